"""The stream learners' registry (torch-free): each learner is a :class:`~vistabench.methods.MethodSpec`
in ``stream_learners`` whose builder is the learner class, imported on first use (the built-ins live in
:mod:`.baselines`, :mod:`.mt` and :mod:`.bhpo`), with the typed options it reads, so a
:class:`~vistabench.protocols.stream_config.StreamConfig` for it is built and checked without torch.
:func:`register_learner` adds one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, TypeVar

from ...config import Options
from ...methods import MethodSpec
from ...registry import Registry
from .options import BHPOOptions, EnsembleOptions, MTOptions, NoLearnerOptions, RelatednessOptions

if TYPE_CHECKING:
    from .base import StreamLearner

__all__ = ["stream_learners", "register_learner", "register_method", "learner_options_class"]

L = TypeVar("L", bound="type[StreamLearner]")

stream_learners: Registry[MethodSpec] = Registry("stream learner")


def _add(name: str, builder: Callable[..., object] | str, options: type[Options], title: str = "") -> MethodSpec:
    return stream_learners.add(name, MethodSpec(name=name, protocol="stream", options=options, builder=builder,
                                                title=title))


_S = "vistabench.learners.stream."
_add("indep", _S + "baselines:Indep", NoLearnerOptions, "every task from scratch")
_add("ensemble", _S + "baselines:Ensemble", EnsembleOptions, "ensemble of the past tasks' networks")
_add("ft-prev", _S + "baselines:FTPrev", NoLearnerOptions, "fine-tune the previous task's network")
_add("ft-d", _S + "baselines:FTD", RelatednessOptions, "fine-tune the most related past network")
_add("pt", _S + "baselines:PT", NoLearnerOptions, "fine-tune a pre-trained network")
_add("mt", _S + "mt:MT", MTOptions, "multi-task co-training with past tasks")
_add("bhpo", _S + "bhpo:BHPO", BHPOOptions, "Bayesian hyper-parameter optimisation")


def register_learner(name: str, *, options: type[Options] = NoLearnerOptions) -> Callable[[L], L]:
    """Class decorator: register a :class:`~.base.StreamLearner` subclass under ``name``.

    ``options``: the :class:`~vistabench.config.Options` subclass of the learner's own settings (set
    from the command line as ``--learner-opt KEY=VALUE``); its fields reach the learner as
    ``self.config.<field>``.
    """

    def deco(cls: L) -> L:
        _add(name, cls, options, (cls.__doc__ or "").strip().split("\n")[0])
        return cls

    return deco


#: the name every protocol's learner package uses for its registration decorator
register_method = register_learner


def learner_options_class(name: str) -> type[Options]:
    """The options class of learner ``name``; InputError naming ``learner`` with close matches."""
    return stream_learners.get(name, field="learner").options
