"""How a grid cell becomes a protocol run: protocol name + options -> a typed config -> records.

Everything protocol-specific the grid needs sits in this module, and all of it comes from the
protocol declarations (:mod:`vistabench.suite`): a cell's options build the protocol's typed
config (its ``config`` part, :class:`~vistabench.config.RunConfig`), which validates them (unknown
names with close matches, types, ranges, allowed values, rules across fields); the cell's key is
the config's :meth:`~vistabench.config.RunConfig.key_dict`; the cell runs the protocol's ``run``
part, ``run(config, store=None, work_dir=folder)``, and hands the records it returns back to the
driver: the worker never touches the user's store, and keeps nothing but the cell's work folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ..config import RunConfig
from ..errors import InputError
from ..registry import did_you_mean, resolve_ref

# options the grid sets itself (per-cell scratch folders, the store of `grid run`, output mode)
MANAGED: frozenset[str] = frozenset({"store", "no_store", "json", "out", "work_dir", "help", "config",
                                     "print_config"})
__all__ = ["MANAGED", "protocols", "check_protocol", "config_class", "build_config",
           "canonical_options", "run_ref", "import_ref", "run_config", "table_for"]


def protocols() -> list[str]:
    """The declared protocols (``vistabench.suite``)."""
    from ..suite import protocols as declared

    return sorted(p.name for p in declared())


def check_protocol(protocol: Any) -> str:
    known = protocols()
    if not isinstance(protocol, str) or protocol not in known:
        raise InputError(f"protocol: unknown protocol {protocol!r}{did_you_mean(protocol, known, n=2)} "
                         f"(known: {', '.join(known)})")
    return protocol


def table_for(protocol: str) -> Callable[..., Any]:
    """The protocol's paper-style table builder: ``table(store, *, dataset=None) -> Table``."""
    from ..suite import get_protocol

    return get_protocol(check_protocol(protocol)).part("table")


def config_class(protocol: str) -> type[RunConfig]:
    """The protocol's typed run configuration (its declaration's ``config`` part)."""
    from ..suite import get_protocol

    return get_protocol(check_protocol(protocol)).part("config")


def run_ref(protocol: str) -> str:
    """Where the protocol's ``run(config, *, store=None, work_dir=None) -> list[Record]`` lives
    (``"module:function"``): a worker process imports it from there."""
    from ..suite import get_protocol

    return get_protocol(check_protocol(protocol)).run


def import_ref(ref: str) -> Callable[..., Any]:
    """The object a ``"module:attribute"`` reference names."""
    return resolve_ref(ref)


def build_config(protocol: str, options: dict[str, Any]) -> RunConfig:
    """The cell's typed config: every option checked here, before anything runs (one-line ``InputError``
    naming the option: unknown names with close matches, bad values, a name spelt two ways)."""
    for name in options:
        if str(name).replace("-", "_") in MANAGED:
            raise InputError(f"{name}: set by the grid itself (per-cell folders, the grid's results store); "
                             "remove it from the config")
    return config_class(protocol).from_dict(options)


def canonical_options(protocol: str, options: dict[str, Any]) -> dict[str, Any]:
    """The cell's options as the protocol reads them: its config's :meth:`~RunConfig.key_dict`
    (defaults filled in, types applied, runtime-only fields left out). Two option mappings that mean
    the same run give the same dict."""
    return build_config(protocol, options).key_dict()


def run_config(run: Callable[..., Any], config: RunConfig, *, work_dir: str | Path,
               tags: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Run one cell: ``run(config, store=None, work_dir=work_dir)``; the records it returns, as dicts.

    The cell's work folder is kept: a cell run again after its driver was killed resumes from
    what its run left there, as the same command would (a smalldata search from its study file, a
    stream run from its checkpoint; the other protocols write their files afresh). Nothing is
    stored here: the driver stores the records. A cell whose config has ``track`` is logged to those
    trackers from the process that runs it (:func:`vistabench.tracking.run_tracked`, ``tags``
    naming the cell).
    """
    from ..tracking import run_tracked

    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    records = run_tracked(run, config, store=None, work_dir=work, tags=tags)
    return [r.to_dict() for r in records]
