"""The cell keys of the examples/ grids did not change when cells became typed configs.

``data/example_cell_keys.json`` holds, for every cell of every example config, the options, the
canonical options and the key that the argparse-based grid computed before (issue 20): the config's
``key_dict()`` must equal that canonical dict, and the key must be the same. (An example may now
spell out a field at the value older runs used, e.g. ``recipe: cpu``: the key does not change.)
"""

import json
from pathlib import Path

import pytest

from vistabench.grid import load_config

ROOT = Path(__file__).resolve().parents[2]
OLD = json.loads((Path(__file__).parent / "data" / "example_cell_keys.json").read_text())


def test_every_example_is_recorded():
    # the ten examples that existed before typed configs; later ones (the authors' recipes) are new cells
    assert set(OLD) <= {f"examples/{p.name}" for p in (ROOT / "examples").glob("*.yaml")}
    assert len(OLD) == 10


@pytest.mark.parametrize("name", sorted(OLD))
def test_example_cells_keep_their_keys(name):
    cfg = load_config(ROOT / name)
    old = OLD[name]
    cells = cfg.cells()
    assert cfg.protocol == old["protocol"] and len(cells) == len(old["cells"])
    for cell, before in zip(cells, old["cells"]):
        assert {k: v for k, v in cell.options.items() if k not in before["options"]} in ({}, {"recipe": "cpu"})
        assert cell.config.key_dict() == before["canonical"], cell.label()
        assert cell.key == before["key"], cell.label()
