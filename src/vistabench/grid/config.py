"""Grid configs: one protocol, fixed options and the grid of varied options, expanded to cells.

A config is a YAML (or JSON) file::

    protocol: longtail
    fixed: {data: digits, imbalance: 10, epochs: 1}
    grid:
      method: [ce, ldam_drw]
      seed: [0, 1]

Every cell is the protocol's typed run config (:class:`~vistabench.config.RunConfig`) built from
the fixed options plus one value of each grid option (the cartesian product, in the order
written). A grid entry named ``cases`` lists mappings of options that vary together (e.g.
``{dataset: cub200, root: data/cub}``); it multiplies like any other entry. Each cell has a key: a
hash of the protocol and the config's :meth:`~vistabench.config.RunConfig.key_dict`, stored with
the cell's records. Building the cells checks every one of them; a grid of more than
:data:`MAX_CELLS` cells is refused before any is built.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import RunConfig, read_config_file
from ..errors import InputError
from .protocols import build_config, check_protocol, run_ref

_KEYS = ("protocol", "fixed", "grid", "name", "description")
CASES = "cases"  # grid entry whose values are mappings of options set together
#: The largest grid that ``grid run``/``status``/``table`` expand (counted before expanding).
MAX_CELLS = 10_000

__all__ = ["CASES", "MAX_CELLS", "Cell", "GridConfig", "cell_key", "parse_config", "load_config"]


@dataclass(frozen=True)
class Cell:
    """One run of the grid: ``options`` as written (fixed + varied), ``varied`` the grid values,
    ``config`` the protocol's typed config built from ``options``, ``canonical`` its key dict."""

    protocol: str
    options: dict[str, Any]
    varied: dict[str, Any]
    canonical: dict[str, Any]
    key: str
    config: RunConfig
    run: str  # the protocol's run part, "module:function"

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.varied.items()) or "(single cell)"

    def setting(self, name: str, default: Any = None) -> Any:
        """A resolved config field (runtime-only fields included), e.g. ``device``."""
        return getattr(self.config, name, default)


@dataclass(frozen=True)
class GridConfig:
    protocol: str
    fixed: dict[str, Any]
    grid: dict[str, list[Any]]
    name: str = ""
    path: str = ""

    def size(self) -> int:
        """How many cells the grid has (counted, not expanded)."""
        return math.prod(len(v) for v in self.grid.values())

    def check_size(self, limit: int = MAX_CELLS) -> int:
        n = self.size()
        if n > limit:
            sizes = " x ".join(f"{len(v)} {k}" for k, v in self.grid.items())
            raise InputError(f"{self.path or 'config'}: grid: {n:,} cells ({sizes}); at most {limit:,} are run, "
                             "listed or tabled by one config; split it into several configs")
        return n

    def cells(self) -> list[Cell]:
        """All cells, each one's config built and checked (one-line ``InputError`` naming the option)."""
        self.check_size()
        out, seen = [], {}
        names = list(self.grid)
        run = run_ref(self.protocol)
        for values in itertools.product(*(self.grid[n] for n in names)):
            varied: dict[str, Any] = {}
            for name, value in zip(names, values):
                varied.update(value if name == CASES else {name: value})
            options = {**self.fixed, **varied}
            try:
                config = build_config(self.protocol, options)
                canonical = config.key_dict()
            except InputError as exc:
                where = f"cell {_label(varied)}: " if varied else ""
                raise InputError(f"{self.path or 'config'}: {where}{exc}") from None
            key = cell_key(self.protocol, canonical)
            if key in seen:
                raise InputError(f"{self.path or 'config'}: cells {seen[key]!r} and {varied!r} are the same run "
                                 "(they differ only in how a value is written, or in runtime-only options)")
            seen[key] = varied
            out.append(Cell(self.protocol, options, varied, canonical, key, config, run))
        check_run_ids(self, out)
        return out


def _label(varied: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in varied.items())


def check_run_ids(grid: GridConfig, cells: list[Cell]) -> None:
    """Cells whose records a protocol keys by a run id (stream: ``run_id``) need one each: two cells
    that would store under the same run id would mix their events in the table."""
    by_id: dict[str, Cell] = {}
    for c in cells:
        rid = getattr(c.config, "run_id", None)
        if not isinstance(rid, str) or not rid:
            continue
        if rid in by_id:
            raise InputError(f"{grid.path or 'config'}: cells {_label(by_id[rid].varied)!r} and {_label(c.varied)!r} "
                             f"would both store under run_id {rid!r}; give each its own run_id (e.g. through "
                             "grid 'cases')")
        by_id[rid] = c


def cell_key(protocol: str, canonical: dict[str, Any]) -> str:
    """16 hex digits identifying (protocol, canonical options); stored as ``settings['grid_cell']``."""
    from ..jsonutil import dumps

    text = dumps({"protocol": protocol, "options": canonical}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _norm(name: Any) -> str:
    return str(name).replace("-", "_")


def _check_spellings(source: str, where: str, names: Any) -> None:
    seen: dict[str, Any] = {}
    for k in names:
        n = _norm(k)
        if n in seen:
            raise InputError(f"{source}: {where}: option {n!r} given twice ({seen[n]!r} and {k!r}); keep one")
        seen[n] = k


def parse_config(data: Any, *, source: str = "config") -> GridConfig:
    """Validate a config mapping (as read from YAML/JSON) into a :class:`GridConfig`."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: expected a mapping with 'protocol', 'fixed' and 'grid', got {type(data).__name__}")
    unknown = [k for k in data if k not in _KEYS]
    if unknown:
        raise InputError(f"{source}: unknown key {unknown[0]!r} (expected: {', '.join(_KEYS)})")
    if "protocol" not in data:
        raise InputError(f"{source}: missing 'protocol' (one of longtail, detection, incremental, smalldata, stream)")
    protocol = check_protocol(data["protocol"])
    fixed = data.get("fixed") or {}
    grid = data.get("grid") or {}
    for what, m in (("fixed", fixed), ("grid", grid)):
        if not isinstance(m, dict):
            raise InputError(f"{source}: '{what}' must be a mapping of option -> value, got {type(m).__name__}")
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise InputError(f"{source}: grid option {k!r} must be a non-empty list of values, got {v!r}")
    _check_spellings(source, "fixed", fixed)
    _check_spellings(source, "grid", grid)
    varied = {_norm(k) for k in grid if k != CASES}
    for case in grid.get(CASES, []):
        if not isinstance(case, dict) or not case:
            raise InputError(f"{source}: each of grid 'cases' must be a mapping of option -> value, got {case!r}")
        _check_spellings(source, "grid 'cases'", case)
        varied |= {_norm(k) for k in case}
    both = {_norm(k) for k in fixed} & varied
    if both:
        raise InputError(f"{source}: option {sorted(both)[0]!r} is both fixed and in the grid")
    clash = {_norm(k) for k in grid if k != CASES} & {_norm(k) for c in grid.get(CASES, []) for k in c}
    if clash:
        raise InputError(f"{source}: option {sorted(clash)[0]!r} is both a grid entry and in 'cases'")
    return GridConfig(protocol=protocol, fixed=dict(fixed), grid={k: list(v) for k, v in grid.items()},
                      name=str(data.get("name") or Path(source).stem), path=source)


def load_config(path: str | Path) -> GridConfig:
    """Read a grid config file (YAML or JSON; a key written twice in one mapping is refused)."""
    return parse_config(read_config_file(path, "CONFIG"), source=str(path))

