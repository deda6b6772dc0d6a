"""How a grid cell becomes a protocol run: protocol name + options -> a typed config -> records.

Everything protocol-specific the grid needs sits in this module, and all of it comes from the
protocol declarations (:mod:`vistabench.suite`): a cell's options build the protocol's typed
config (its ``config`` part, :class:`~vistabench.config.RunConfig`), which validates them (unknown
names with close matches, types, ranges, allowed values, rules across fields); the cell's key is
the config's :meth:`~vistabench.config.RunConfig.key_dict`; the cell runs the protocol's ``run``
part, ``run(config, store=scratch, work_dir=folder)``, in a private scratch store, and hands the
records back: the worker never touches the user's store.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from ..config import RunConfig
from ..errors import InputError
from ..registry import did_you_mean, resolve_ref

# options the grid sets itself (per-cell scratch folders, the store of `grid run`, output mode)
MANAGED: frozenset[str] = frozenset({"store", "no_store", "json", "out", "work_dir", "help", "config",
                                     "print_config"})
# protocols whose run resumes from its work folder alone (smalldata: the Optuna study of the search);
# the others start from an emptied folder (a stream checkpoint would skip tasks whose records were
# in the killed cell's scratch store)
KEEP_WORK_DIR: frozenset[str] = frozenset({"smalldata"})

__all__ = ["MANAGED", "KEEP_WORK_DIR", "protocols", "check_protocol", "config_class", "build_config",
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
               keep_work_dir: bool = False, tags: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Run one cell: ``run(config, store=<scratch store>, work_dir=work_dir)``; its records as dicts.

    ``work_dir`` is emptied first unless ``keep_work_dir`` (a smalldata cell resumes its search
    from the study file there). The records go to a private scratch store, never the user's. A cell
    whose config has ``track`` is logged to those trackers from the process that runs it
    (:func:`vistabench.tracking.run_tracked`, ``tags`` naming the cell).
    """
    from ..store import ResultsStore
    from ..tracking import run_tracked

    work = Path(work_dir)
    if not keep_work_dir:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vistabench-cell-") as tmp, \
            ResultsStore(Path(tmp) / "cell.sqlite") as scratch:
        records = run_tracked(run, config, store=scratch, work_dir=work, tags=tags)
        return [r.to_dict() for r in records]
