"""The grid's cells tracked: `track` in the config or `grid run --track` logs every cell, and the
cells keep their keys (tracking is runtime-only)."""

import json

import pytest

from vistabench.cli import main
from vistabench.grid import parse_config

pytest.importorskip("tensorboardX", reason="tensorboardX not installed (pip install 'vistabench[track]')")
accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator",
                                  reason="tensorboard not installed (pip install 'vistabench[track]')")

GRID = {"protocol": "longtail", "fixed": {"data": "digits", "imbalance": 10, "epochs": 1, "points": 3, "repeats": 2},
        "grid": {"method": ["ce"], "seed": [0, 1]}}


def test_track_leaves_the_cell_keys():
    plain = parse_config(GRID).cells()
    tracked = parse_config({**GRID, "fixed": {**GRID["fixed"], "track": ["mlflow", "tensorboard"], "track_dir": "x"}}).cells()
    assert [c.key for c in plain] == [c.key for c in tracked]
    assert all(c.config.track == ("mlflow", "tensorboard") for c in tracked)


def test_grid_run_tracks_every_cell(tmp_path, capsys):
    (tmp_path / "g.yaml").write_text(json.dumps(GRID))
    rc = main(["grid", "run", str(tmp_path / "g.yaml"), "--store", str(tmp_path / "g.sqlite"), "--track", "tensorboard",
               "--track-dir", str(tmp_path / "tb"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["ran"] == 2
    folders = sorted((tmp_path / "tb").iterdir())
    assert [f.name.split("-")[2] for f in folders] == ["seed0", "seed1"]
    keys = {c.key for c in parse_config(GRID).cells()}
    seen = set()
    for folder in folders:
        ea = accumulator.EventAccumulator(str(folder), size_guidance={"tensors": 0, "scalars": 0})
        ea.Reload()
        (tags,) = ea.Tensors("tags/text_summary")[-1:]
        text = tags.tensor_proto.string_val[0].decode()
        seen |= {line.split(": ")[1] for line in text.splitlines() if "vistabench.grid_cell" in line}
        assert [e.step for e in ea.Scalars("train/loss")] == [0] and ea.Scalars("auc")
    assert seen == keys
    # the second run skips both cells (same keys) and tracks nothing new
    rc = main(["grid", "run", str(tmp_path / "g.yaml"), "--store", str(tmp_path / "g.sqlite"), "--track", "tensorboard",
               "--track-dir", str(tmp_path / "tb"), "--json"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["skipped"] == 2 and len(list((tmp_path / "tb").iterdir())) == 2
