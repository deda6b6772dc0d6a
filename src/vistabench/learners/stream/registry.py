"""The stream learners' registry (torch-free): each learner is a :class:`~vistabench.methods.MethodSpec`
in ``stream_learners`` whose builder is the learner class, imported on first use (the built-ins live in
:mod:`.baselines`, :mod:`.mt` and :mod:`.bhpo`), with the typed options it reads, so a
:class:`~vistabench.protocols.stream_config.StreamConfig` for it is built and checked without torch.
:func:`register_learner` adds one.
"""

from __future__ import annotations

from ...config import Options
from ...methods import MethodSpec, method_registrar
from ...registry import Registry
from .options import BHPOOptions, EnsembleOptions, MTOptions, NoLearnerOptions, RelatednessOptions

__all__ = ["stream_learners", "register_learner", "register_method", "learner_options_class"]

stream_learners: Registry[MethodSpec] = Registry("stream learner")


#: ``register_learner(name, options=NoLearnerOptions, *, builder=..., title=...)``: as a decorator on a
#: :class:`~.base.StreamLearner` subclass (its options' fields reach the learner as ``self.config.<field>``;
#: ``--learner-opt KEY=VALUE``), or with ``builder="module:Class"`` (:func:`~vistabench.methods.method_registrar`)
register_learner = method_registrar(stream_learners, "stream", default_options=NoLearnerOptions)

#: the name every protocol's learner package uses for its registration function
register_method = register_learner

_S = "vistabench.learners.stream."
register_learner("indep", builder=_S + "baselines:Indep", title="every task from scratch")
register_learner("ensemble", EnsembleOptions, builder=_S + "baselines:Ensemble",
                 title="ensemble of the past tasks' networks")
register_learner("ft-prev", builder=_S + "baselines:FTPrev", title="fine-tune the previous task's network")
register_learner("ft-d", RelatednessOptions, builder=_S + "baselines:FTD", title="fine-tune the most related past network")
register_learner("pt", builder=_S + "baselines:PT", title="fine-tune a pre-trained network")
register_learner("mt", MTOptions, builder=_S + "mt:MT", title="multi-task co-training with past tasks")
register_learner("bhpo", BHPOOptions, builder=_S + "bhpo:BHPO", title="Bayesian hyper-parameter optimisation")


def learner_options_class(name: str) -> type[Options]:
    """The options class of learner ``name``; InputError naming ``learner`` with close matches."""
    return stream_learners.get(name, field="learner").options
