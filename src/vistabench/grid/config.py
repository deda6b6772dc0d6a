"""Grid configs: one protocol, fixed options and the grid of varied options, expanded to cells.

A config is a YAML (or JSON) file::

    protocol: longtail
    fixed: {data: digits, imbalance: 10, epochs: 1}
    grid:
      method: [ce, ldam_drw]
      seed: [0, 1]

Every cell is the protocol's run with the fixed options plus one value of each grid option (the
cartesian product, in the order written). A grid entry named ``cases`` lists mappings of options
that vary together (e.g. ``{dataset: cub200, root: data/cub}``); it multiplies like any other entry.
Each cell has a key: a hash of the protocol and the
cell's canonical options (CLI defaults filled in), stored with the cell's records.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from .protocols import canonical_options, check_protocol

_KEYS = ("protocol", "fixed", "grid", "name", "description")
CASES = "cases"  # grid entry whose values are mappings of options set together


@dataclass(frozen=True)
class Cell:
    """One run of the grid: ``options`` as written (fixed + varied), ``varied`` the grid values."""

    protocol: str
    options: dict[str, Any]
    varied: dict[str, Any]
    canonical: dict[str, Any]
    key: str

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.varied.items()) or "(single cell)"


@dataclass(frozen=True)
class GridConfig:
    protocol: str
    fixed: dict[str, Any]
    grid: dict[str, list[Any]]
    name: str = ""
    path: str = ""

    def cells(self) -> list[Cell]:
        """All cells, validated (unknown options and bad values raise a one-line ``InputError``)."""
        out, seen = [], {}
        names = list(self.grid)
        for values in itertools.product(*(self.grid[n] for n in names)):
            varied: dict[str, Any] = {}
            for name, value in zip(names, values):
                varied.update(value if name == CASES else {name: value})
            options = {**self.fixed, **varied}
            canonical = canonical_options(self.protocol, options)
            key = cell_key(self.protocol, canonical)
            if key in seen:
                raise InputError(f"{self.path or 'config'}: cells {seen[key]!r} and {varied!r} are the same run "
                                 "(an option written twice, once with '_' and once with '-'?)")
            seen[key] = varied
            out.append(Cell(self.protocol, options, varied, canonical, key))
        return out


def cell_key(protocol: str, canonical: dict[str, Any]) -> str:
    """16 hex digits identifying (protocol, canonical options); stored as ``settings['grid_cell']``."""
    from ..jsonutil import dumps

    text = dumps({"protocol": protocol, "options": canonical}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _norm(name: Any) -> str:
    return str(name).replace("-", "_")


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
    varied = {_norm(k) for k in grid if k != CASES}
    for case in grid.get(CASES, []):
        if not isinstance(case, dict) or not case:
            raise InputError(f"{source}: each of grid 'cases' must be a mapping of option -> value, got {case!r}")
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
    """Read a grid config file (``.yaml``/``.yml`` or ``.json``)."""
    import yaml

    from .._validation import check_input_file

    p = check_input_file(path, "CONFIG")
    try:
        text = p.read_text(encoding="utf-8")
        data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"CONFIG {str(path)!r}: not valid {'JSON' if p.suffix == '.json' else 'YAML'} ({line})") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"CONFIG {str(path)!r}: not a UTF-8 text file") from exc
    return parse_config(data, source=str(path))
