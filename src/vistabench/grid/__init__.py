"""Grids of protocol runs (protocol x datasets x methods x seeds): run, resume, status, table.

A cell is the protocol's typed run config built from the grid's fixed options plus one value of
each varied option; its key hashes the config's canonical form (:meth:`RunConfig.key_dict`).

>>> from vistabench.grid import parse_config
>>> cfg = parse_config({"protocol": "longtail", "fixed": {"data": "digits", "imbalance": 10, "epochs": 1},
...                     "grid": {"method": ["ce", "ldam_drw"], "seed": [0, 1]}})
>>> [c.label() for c in cfg.cells()]
['method=ce, seed=0', 'method=ce, seed=1', 'method=ldam_drw, seed=0', 'method=ldam_drw, seed=1']
"""

from .config import MAX_CELLS, Cell, GridConfig, cell_key, load_config, parse_config
from .protocols import build_config, canonical_options
from .runner import GridRun, grid_records, grid_status, grid_table, run_grid

__all__ = ["MAX_CELLS", "Cell", "GridConfig", "GridRun", "build_config", "canonical_options", "cell_key",
           "grid_records", "grid_status", "grid_table", "load_config", "parse_config", "run_grid"]
