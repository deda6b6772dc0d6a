"""Grids of protocol runs (protocol x datasets x methods x seeds): run, resume, status, table.

>>> from vistabench.grid import parse_config
>>> cfg = parse_config({"protocol": "longtail", "fixed": {"data": "digits", "imbalance": 10, "epochs": 1},
...                     "grid": {"method": ["ce", "ldam_drw"], "seed": [0, 1]}})
>>> [c.label() for c in cfg.cells()]
['method=ce, seed=0', 'method=ce, seed=1', 'method=ldam_drw, seed=0', 'method=ldam_drw, seed=1']
"""

from .config import Cell, GridConfig, cell_key, load_config, parse_config
from .protocols import canonical_options, run_protocol
from .runner import GridRun, grid_records, grid_status, grid_table, run_grid

__all__ = ["Cell", "GridConfig", "GridRun", "canonical_options", "cell_key", "grid_records", "grid_status",
           "grid_table", "load_config", "parse_config", "run_grid", "run_protocol"]
