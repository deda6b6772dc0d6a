"""TEMPORARY: the old way a grid cell ran, through ``vistabench <protocol> run``'s argument parser.

Only for a protocol whose declaration has no typed ``config`` part yet (issue 20 moves every
protocol to a config; :mod:`vistabench.grid.protocols` is the way cells run). This module imports
:mod:`vistabench.cli`, which the grid must not: delete it once every protocol declares its config.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..errors import InputError
from .protocols import KEEP_WORK_DIR, MANAGED

RUN_VERB = "run"
RUNTIME_ONLY: frozenset[str] = frozenset({"threads", "ray_address", "max_parallel"})
RUNTIME_ONLY_FOR: dict[str, frozenset[str]] = {"stream": frozenset({"engine"})}


@functools.lru_cache(maxsize=None)
def _run_parser(protocol: str) -> argparse.ArgumentParser:
    from ..cli import build_parser

    def child(p: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction) and name in action.choices:
                return action.choices[name]
        raise InputError(f"protocol {protocol!r}: this installation has no `vistabench {protocol} "
                         f"{RUN_VERB}` command")

    parser = child(child(build_parser(), protocol), RUN_VERB)

    def error(message: str) -> None:  # one-line InputError instead of argparse's exit
        raise InputError(f"{protocol} options: {message}")

    parser.error = error  # type: ignore[method-assign]
    return parser


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions if a.option_strings and a.dest not in MANAGED}


def _argv(protocol: str, parser: argparse.ArgumentParser, options: dict[str, Any]) -> list[str]:
    actions = _actions(parser)
    argv: list[str] = []
    for name, value in options.items():
        dest = str(name).replace("-", "_")
        if dest in MANAGED:
            raise InputError(f"option {name!r}: set by the grid itself (per-cell folders, --store of `grid run`); "
                             "remove it from the config")
        if dest not in actions:
            close = difflib.get_close_matches(dest, list(actions), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(c.replace('_', '-') for c in close)}?" if close else ""
            raise InputError(f"option {name!r}: `vistabench {protocol} {RUN_VERB}` has no such "
                             f"option{hint}")
        action = actions[dest]
        flag = action.option_strings[-1]
        if action.nargs == 0:  # store_true / store_false flags
            if not isinstance(value, bool):
                raise InputError(f"option {name!r}: expected true or false, got {value!r}")
            if value != action.default:
                argv.append(flag)
        elif value is None:
            continue
        elif isinstance(value, (list, tuple)):
            if action.nargs not in ("+", "*"):
                raise InputError(f"option {name!r}: expected one value, got the list {value!r}")
            argv += [flag, *map(str, value)]
        elif isinstance(value, dict):
            import json

            argv += [flag, json.dumps(value)]
        else:
            argv += [flag, str(value)]
    return argv


def legacy_argv_canonical_options(protocol: str, options: dict[str, Any]) -> dict[str, Any]:
    """The cell's options as the protocol reads them: CLI defaults filled in, types applied.

    Raises ``InputError`` (one line) for an unknown option (with close matches), a bad value or a
    missing required option. Two configs that mean the same run give the same dict.
    """
    parser = _run_parser(protocol)
    args = parser.parse_args(_argv(protocol, parser, options))
    return {k: v for k, v in sorted(vars(args).items())
            if k in _actions(parser) and k not in RUNTIME_ONLY | RUNTIME_ONLY_FOR.get(protocol, frozenset())}


def legacy_argv_run_protocol(protocol: str, options: dict[str, Any], *, work_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Run one configuration of ``protocol`` and return the records it produced (as dicts).

    ``options`` are the CLI option names of ``vistabench <protocol> run`` (``_`` or ``-``).
    Files the run writes go to ``work_dir``, emptied first except for protocols in ``KEEP_WORK_DIR``
    (smalldata resumes a killed cell's search from its study file there). The records are written to a private scratch store and returned, never to the user's store.
    """
    from ..store import ResultsStore

    parser = _run_parser(protocol)
    args = parser.parse_args(_argv(protocol, parser, options))
    work = Path(work_dir)
    if protocol not in KEEP_WORK_DIR:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    for dest in ("out", "work_dir"):
        if hasattr(args, dest):
            setattr(args, dest, str(work / dest))
    with tempfile.TemporaryDirectory(prefix="vistabench-cell-") as tmp:
        args.store = str(Path(tmp) / "cell.sqlite")
        args.no_store = False
        args.json = True
        args.handler(args)
        if not Path(args.store).is_file():
            return []
        with ResultsStore(args.store) as scratch:
            return [r.to_dict() for r in scratch.records()]
