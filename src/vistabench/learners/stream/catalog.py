"""Every stream learner, built by name (the registry imports each learner's module on first use)."""

from __future__ import annotations

from typing import Any

from ...errors import InputError
from .base import StreamLearner
from ..recipe import RECIPE
from .options import LearnerConfig
from .registry import stream_learners

__all__ = ["learner_names", "learner_class", "make_learner", "stream_learners"]


def learner_names() -> list[str]:
    """Names of every registered stream learner (``indep``, ..., ``mt``, ``bhpo``)."""
    return stream_learners.names()


def learner_class(name: str) -> type[StreamLearner]:
    return stream_learners.get(name).load()


def make_learner(name: str, **config: Any) -> StreamLearner:
    """Instantiate a registered stream learner with :class:`~.options.LearnerConfig` fields."""
    cls = learner_class(name)
    known = (set(LearnerConfig.__dataclass_fields__) - {"recipe"}) | set(RECIPE) | {"arch"}  # arch: model's old name
    unknown = sorted(set(config) - known)
    if unknown:
        raise InputError(f"learner options {unknown} unknown (known: {sorted(known)})")
    return cls(LearnerConfig(**config))
