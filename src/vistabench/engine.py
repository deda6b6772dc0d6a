"""Where runs go: the engine settings, declared once (torch-free, Ray-free).

:class:`Engine` is the value every dispatcher takes (:func:`vistabench.jobs.run_jobs`, the grid,
small-data's search and final runs, the stream's trials): ``engine`` (``local``: this process or
``max_parallel`` worker processes; ``ray``: Ray tasks), ``ray_address`` (a running cluster; None
starts a local Ray) and ``max_parallel`` (jobs in flight at once). :data:`ENGINE` is the one
declaration of those three fields (type, default, range, help); :class:`Engine` is made from it, and
a config or a verb's options that shows them as flags or config keys gets them, flat and under the
same names, from :func:`engine_fields` (the run configs keep their keys; the engine is runtime only
there). Its :meth:`Engine.check` is the one rule across them (``ray_address`` only with ``ray``).

Whether a cluster answers at ``ray_address`` is checked where it is reached
(:func:`vistabench.jobs.check_ray_address`), not when the value is made: a config made on one
machine may be run on another.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, Optional

from .errors import InputError
from .options import Options, option

__all__ = ["ENGINE", "ENGINES", "Engine", "engine_fields"]

#: ``engine``'s values
ENGINES = ("local", "ray")

#: name -> (type, :func:`~vistabench.options.option` arguments): the one declaration of each engine field
ENGINE: dict[str, tuple[Any, dict[str, Any]]] = {
    "engine": (Literal[ENGINES], {"default": "local",
                                  "help": "local: in this process, or max_parallel worker processes; ray: each job "
                                          "a Ray task"}),
    "ray_address": (Optional[str], {"default": None, "metavar": "ADDR",
                                    "help": "Ray cluster to use (e.g. HEAD_IP:6379 from `ray start --head`, or auto); "
                                            "default: start a local Ray"}),
    "max_parallel": (Optional[int], {"default": None, "low": 1, "metavar": "N",
                                     "help": "jobs in flight at once (local default 1 = in this process; ray default: "
                                             "as the cluster's resources allow)"}),
}


def _fields(runtime: bool | tuple[str, ...], helps: dict[str, str]) -> list[tuple[str, Any, Any]]:
    unknown = sorted(set(helps) - set(ENGINE))
    if unknown:
        raise TypeError(f"engine_fields: {unknown[0]!r} is not an engine field ({', '.join(ENGINE)})")  # our bug
    out = []
    for name, (tp, kwargs) in ENGINE.items():
        kw = {**kwargs, "help": helps.get(name, kwargs["help"])}
        if runtime is True or (not isinstance(runtime, bool) and name in runtime):
            kw["runtime"] = True
        out.append((name, tp, option(**kw)))
    return out


class _EngineChecks:
    def check_engine(self) -> None:
        """``ray_address`` only with ``engine`` ray (the one rule across the engine's fields)."""
        if getattr(self, "ray_address", None) is not None and getattr(self, "engine", "local") != "ray":
            raise InputError(f"ray_address: only read with engine 'ray' (engine is {self.engine!r})")

    def to_engine(self) -> "Engine":
        """The engine settings of this config, as the value the dispatchers take."""
        return Engine(**{name: getattr(self, name) for name in ENGINE})


def engine_fields(*, runtime: bool | tuple[str, ...] = False, **helps: str) -> type:
    """The base class giving a config (or a verb's options) the three engine fields, flat, as declared
    in :data:`ENGINE` (``runtime``: out of a run config's grid key, all or those named; ``helps``: a field's help worded for
    the command). Its ``check_engine()`` is the rule across them (call it from ``check``) and
    ``to_engine()`` gives the :class:`Engine`."""
    base = dataclasses.make_dataclass("EngineFields", _fields(runtime, helps), bases=(_EngineChecks, Options),
                                      frozen=True, kw_only=True)
    base.__module__ = __name__
    return base


class Engine(engine_fields()):
    """Where jobs run: ``engine``, ``ray_address``, ``max_parallel`` (:data:`ENGINE`), checked when made.

    ``dispatches()``: whether jobs leave this process (Ray, or more than one local process).

    >>> Engine().dispatches(), Engine(engine="local", max_parallel=2).dispatches()
    (False, True)
    >>> Engine(ray_address="h:6379")
    Traceback (most recent call last):
    ...
    vistabench.errors.InputError: ray_address: only read with engine 'ray' (engine is 'local')
    """

    def check(self) -> None:
        self.check_engine()

    def dispatches(self) -> bool:
        """Whether jobs leave this process (Ray, or more than one local process)."""
        return self.engine == "ray" or (self.max_parallel or 1) > 1
