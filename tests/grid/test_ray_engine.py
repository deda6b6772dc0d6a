"""The Ray engine: a local 2-worker Ray runs the issue's 4-cell grid; its records equal the local engine's."""

from pathlib import Path

import pytest

from vistabench.grid import grid_records, load_config, parse_config, run_grid

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "longtail-tiny.yaml"
CFG = {"protocol": "longtail", "fixed": {"data": "digits", "imbalance": 10, "epochs": 1, "method": "ce"},
       "grid": {"seed": [0, 1]}}


def _comparable(rec):
    metrics = {k: v for k, v in rec.metrics.items() if "seconds" not in k}  # wall time differs
    return rec.protocol, rec.dataset, rec.method, rec.seed, rec.split_hash, rec.settings, metrics


def test_ray_grid_matches_local_engine(tmp_path):
    pytest.importorskip("ray")
    cfg = load_config(EXAMPLE)  # longtail on digits, imbalance 10, 1 epoch; method [ce, ldam_drw] x seed [0, 1]
    ray_store, local_store = tmp_path / "ray.sqlite", tmp_path / "local.sqlite"
    res = run_grid(cfg, store=ray_store, engine="ray", max_parallel=2, work_dir=tmp_path / "w1")
    assert (res.cells, res.ran, res.skipped, res.failed) == (4, 4, 0, 0)
    again = run_grid(cfg, store=ray_store, engine="ray", work_dir=tmp_path / "w1")  # starts no Ray: nothing to do
    assert (again.cells, again.ran, again.skipped) == (4, 0, 4)
    run_grid(cfg, store=local_store, engine="local", work_dir=tmp_path / "w2")
    by_ray = sorted(map(_comparable, grid_records(cfg, store=ray_store)), key=lambda r: (r[2], r[3]))
    by_local = sorted(map(_comparable, grid_records(cfg, store=local_store)), key=lambda r: (r[2], r[3]))
    assert len(by_ray) == 4 and by_ray == by_local
    assert by_ray[0][6]["auc"] != by_ray[1][6]["auc"]  # seeds differ: the comparison is not vacuous


def test_gpu_cells_need_gpus_in_the_cluster(tmp_path):
    from vistabench.grid.engines import gpus_for

    cells = parse_config({**CFG, "fixed": {**CFG["fixed"], "device": "cuda"}}).cells()
    assert gpus_for(cells[0], None) == 1.0 and gpus_for(cells[0], 0.5) == 0.5
    assert gpus_for(parse_config(CFG).cells()[0], None) == 0.0
