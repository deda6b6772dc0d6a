"""The Ray engine: a local 2-worker Ray runs a tiny grid; its records equal the local engine's."""

import pytest

from vistabench.grid import grid_records, parse_config, run_grid

CFG = {"protocol": "longtail", "fixed": {"data": "digits", "imbalance": 10, "epochs": 1, "method": "ce",
                                          "points": 4, "repeats": 2},
       "grid": {"seed": [0, 1]}}


def _comparable(rec):
    metrics = {k: v for k, v in rec.metrics.items() if "seconds" not in k}  # wall time differs
    return rec.protocol, rec.dataset, rec.method, rec.seed, rec.split_hash, rec.settings, metrics


def test_ray_grid_matches_local_engine(tmp_path):
    pytest.importorskip("ray")
    cfg = parse_config(CFG)
    ray_store, local_store = tmp_path / "ray.sqlite", tmp_path / "local.sqlite"
    res = run_grid(cfg, store=ray_store, engine="ray", max_parallel=2, work_dir=tmp_path / "w1")
    assert (res.cells, res.ran, res.skipped, res.failed) == (2, 2, 0, 0)
    again = run_grid(cfg, store=ray_store, engine="ray", work_dir=tmp_path / "w1")  # starts no Ray: nothing to do
    assert (again.ran, again.skipped) == (0, 2)
    run_grid(cfg, store=local_store, engine="local", work_dir=tmp_path / "w2")
    by_ray = sorted(map(_comparable, grid_records(cfg, store=ray_store)), key=lambda r: r[3])
    by_local = sorted(map(_comparable, grid_records(cfg, store=local_store)), key=lambda r: r[3])
    assert len(by_ray) == 2 and by_ray == by_local


def test_gpu_cells_need_gpus_in_the_cluster(tmp_path):
    from vistabench.errors import InputError
    from vistabench.grid.engines import gpus_for

    cells = parse_config({**CFG, "fixed": {**CFG["fixed"], "device": "cuda"}}).cells()
    assert gpus_for(cells[0], None) == 1.0 and gpus_for(cells[0], 0.5) == 0.5
    assert gpus_for(parse_config(CFG).cells()[0], None) == 0.0
