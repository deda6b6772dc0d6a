"""The Ray engine: a local 2-worker Ray runs the issue's 4-cell grid; its records equal the local engine's."""

from pathlib import Path

import pytest

from vistabench.engine import Engine
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
    res = run_grid(cfg, store=ray_store, engine=Engine(engine="ray", max_parallel=2), work_dir=tmp_path / "w1")
    assert (res.cells, res.ran, res.skipped, res.failed) == (4, 4, 0, 0)
    again = run_grid(cfg, store=ray_store, engine=Engine(engine="ray"), work_dir=tmp_path / "w1")  # starts no Ray: nothing to do
    assert (again.cells, again.ran, again.skipped) == (4, 0, 4)
    run_grid(cfg, store=local_store, engine=Engine(), work_dir=tmp_path / "w2")
    by_ray = sorted(map(_comparable, grid_records(cfg, store=ray_store)), key=lambda r: (r[2], r[3]))
    by_local = sorted(map(_comparable, grid_records(cfg, store=local_store)), key=lambda r: (r[2], r[3]))
    assert len(by_ray) == 4 and by_ray == by_local
    assert by_ray[0][6]["auc"] != by_ray[1][6]["auc"]  # seeds differ: the comparison is not vacuous


def test_gpu_cells_need_gpus_in_the_cluster(tmp_path):
    from vistabench.grid.engines import gpus_for

    cells = parse_config({**CFG, "fixed": {**CFG["fixed"], "device": "cuda"}}).cells()
    assert gpus_for(cells[0], None) == 1.0 and gpus_for(cells[0], 0.5) == 0.5
    assert gpus_for(parse_config(CFG).cells()[0], None) == 0.0


def _dead_port() -> int:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_absent_or_unreachable_clusters_answer_in_one_line_within_seconds(tmp_path, monkeypatch, capsys):
    import time

    from vistabench.cli import main
    from vistabench.errors import InputError
    from vistabench.jobs import connect_ray

    pytest.importorskip("ray")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))  # no cluster was ever started "on this machine"
    port = _dead_port()
    with pytest.raises(InputError, match=rf"ray_address: nothing answers at '127.0.0.1:{port}'"):
        connect_ray(f"127.0.0.1:{port}")
    with pytest.raises(InputError, match="ray_address: 'auto' finds no running Ray cluster"):
        connect_ray("auto")
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{port}")  # left by a dead session
    with pytest.raises(InputError, match=rf"nothing answers at '127.0.0.1:{port}' \(where 'auto' points\)"):
        connect_ray("auto")
    import ray

    assert not ray.is_initialized()
    one = tmp_path / "one.yaml"
    one.write_text("protocol: longtail\nfixed: {data: digits, imbalance: 10, epochs: 1, method: ce}\n")
    commands = [["grid", "run", str(one), "--store", str(tmp_path / "r.sqlite")],
                ["smalldata", "run", "--dataset", "digits", "--method", "ce", "--epochs", "1", "--repeats", "1",
                 "--no-store"],
                ["stream", "run", "--stream", "embedded", "--learner", "indep", "--no-store"]]
    for argv in commands:
        for address in ("auto", "127.0.0.1:1"):
            t = time.perf_counter()
            assert main([*argv, "--engine", "ray", "--ray-address", address]) == 2, (argv, address)
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and err[0].startswith("vistabench: error: --ray-address:"), err
            assert time.perf_counter() - t < 20, (argv, address)  # digits loading included
    assert not ray.is_initialized()


def test_a_stale_cluster_file_and_ray_logs_leave_a_local_json_grid_alone(tmp_path):
    """A ``ray_current_cluster`` left by an earlier session does not make a local Ray grid attach to
    it (and refuse num_cpus); ``--json`` prints exactly one JSON object on stdout (Ray logs: stderr)."""
    import json
    import os
    import subprocess
    import sys
    import tempfile

    pytest.importorskip("ray")
    ray_tmp = Path(tempfile.mkdtemp(prefix="vbr", dir="/tmp"))  # short: Ray's socket paths live there
    try:
        (ray_tmp / "ray").mkdir()
        (ray_tmp / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{_dead_port()}")
        one = tmp_path / "one.yaml"
        one.write_text("protocol: longtail\nfixed: {data: digits, imbalance: 10, epochs: 1, points: 4, repeats: 2,"
                       " method: ce}\n")
        env = {**os.environ, "RAY_TMPDIR": str(ray_tmp), "PYTHONPATH": os.pathsep.join(sys.path)}
        env.pop("RAY_ADDRESS", None)
        out = subprocess.run([sys.executable, "-m", "vistabench", "grid", "run", str(one), "--engine", "ray",
                              "--max-parallel", "1", "--store", str(tmp_path / "r.sqlite"), "--json"],
                             capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        assert json.loads(out.stdout) == {"cells": 1, "ran": 1, "skipped": 0, "failed": 0, "retried": 0,
                                          "errors": {}}
    finally:
        import shutil

        shutil.rmtree(ray_tmp, ignore_errors=True)
