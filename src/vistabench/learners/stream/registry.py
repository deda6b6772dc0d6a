"""The stream learners' registry: :func:`register_learner` adds a learner class (and the typed options
it reads, so a :class:`~vistabench.protocols.stream_config.StreamConfig` for it can be built and
checked). The built-in learners register themselves in :mod:`.baselines`, :mod:`.mt` and :mod:`.bhpo`;
:mod:`.catalog` imports them all (this module imports none of them: no cycle).
"""

from __future__ import annotations

from typing import Callable, TypeVar

from ...config import Options
from ...registry import Registry
from .base import StreamLearner
from .options import NoLearnerOptions, register_learner_options

__all__ = ["stream_learners", "register_learner", "register_method"]

L = TypeVar("L", bound=type[StreamLearner])

stream_learners: Registry[type[StreamLearner]] = Registry("stream learner")


def register_learner(name: str, *, options: type[Options] = NoLearnerOptions) -> Callable[[L], L]:
    """Class decorator: register a :class:`~.base.StreamLearner` subclass under ``name``.

    ``options``: the :class:`~vistabench.config.Options` subclass of the learner's own settings (set
    from the command line as ``--learner-opt KEY=VALUE``); its fields reach the learner as
    ``self.config.<field>``.
    """

    def deco(cls: L) -> L:
        register_learner_options(name, options)
        stream_learners.register(name)(cls)
        return cls

    return deco


#: the name every protocol's learner package uses for its registration decorator
register_method = register_learner
