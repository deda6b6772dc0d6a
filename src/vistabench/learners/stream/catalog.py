"""Every stream learner, built by name: imports the built-in learners (which register themselves)."""

from __future__ import annotations

from typing import Any

from ...errors import InputError
from . import baselines, bhpo, mt  # noqa: F401  (registration)
from .base import StreamLearner
from .options import LearnerConfig
from .registry import stream_learners

__all__ = ["learner_names", "learner_class", "make_learner", "stream_learners"]


def learner_names() -> list[str]:
    """Names of every registered stream learner (``indep``, ..., ``mt``, ``bhpo``)."""
    return stream_learners.names()


def learner_class(name: str) -> type[StreamLearner]:
    return stream_learners.get(name)


def make_learner(name: str, **config: Any) -> StreamLearner:
    """Instantiate a registered stream learner with :class:`~.options.LearnerConfig` fields."""
    cls = stream_learners.get(name)
    known = set(LearnerConfig.__dataclass_fields__)
    unknown = sorted(set(config) - known)
    if unknown:
        raise InputError(f"learner options {unknown} unknown (known: {sorted(known)})")
    return cls(LearnerConfig(**config))
