"""The stream learners' registry (torch-free): each learner is a :class:`~vistabench.methods.MethodSpec`
in ``stream_learners`` whose builder is the learner class, imported on first use (the built-ins live in
:mod:`.baselines`, :mod:`.mt` and :mod:`.bhpo`), with the typed options it reads, so a
:class:`~vistabench.protocols.stream.config.StreamConfig` for it is built and checked without torch.
:func:`register_method` adds one (:func:`vistabench.methods.get_method` finds one: ``get_method("stream", name)``).
"""

from __future__ import annotations

import warnings
from typing import Any

from ...methods import MethodSpec, method_registrar, method_registries
from ...registry import Registry
from .options import BHPOOptions, EnsembleOptions, MTOptions, NoLearnerOptions, RelatednessOptions

__all__ = ["stream_learners", "register_method", "register_learner"]

stream_learners: Registry[MethodSpec] = method_registries.add("stream", Registry("stream learner"))


#: ``register_method(name, options=NoLearnerOptions, *, builder=..., title=...)``: as a decorator on a
#: :class:`~.base.StreamLearner` subclass (its options' fields reach the learner as ``self.config.<field>``;
#: ``--learner-opt KEY=VALUE``), or with ``builder="module:Class"`` (:func:`~vistabench.methods.method_registrar`)
register_method = method_registrar(stream_learners, "stream", default_options=NoLearnerOptions)


def register_learner(*args: Any, **kwargs: Any) -> Any:
    """Deprecated spelling of :func:`register_method` (the name every learner package uses)."""
    warnings.warn("vistabench.learners.stream.register_learner is deprecated; use register_method",
                  DeprecationWarning, stacklevel=2)
    return register_method(*args, **kwargs)


_S = "vistabench.learners.stream."
register_method("indep", builder=_S + "baselines:Indep", title="every task from scratch")
register_method("ensemble", EnsembleOptions, builder=_S + "baselines:Ensemble",
                title="ensemble of the past tasks' networks")
register_method("ft-prev", builder=_S + "baselines:FTPrev", title="fine-tune the previous task's network")
register_method("ft-d", RelatednessOptions, builder=_S + "baselines:FTD", title="fine-tune the most related past network")
register_method("pt", builder=_S + "baselines:PT", title="fine-tune a pre-trained network")
register_method("mt", MTOptions, builder=_S + "mt:MT", title="multi-task co-training with past tasks")
register_method("bhpo", BHPOOptions, builder=_S + "bhpo:BHPO", title="Bayesian hyper-parameter optimisation")

