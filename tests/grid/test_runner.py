"""Running grids with the local engine: store, skip, failures, resume, status, table."""

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from vistabench.engine import Engine
from vistabench.errors import InputError
from vistabench.grid import grid_records, grid_status, grid_table, load_config, parse_config, run_grid
from vistabench.store import Record, ResultsStore

FIXED = {"data": "digits", "imbalance": 10, "epochs": 1, "points": 4, "repeats": 2}


def _toy(**grid):
    return parse_config({"protocol": "toy", "fixed": {"n_max": 3}, "grid": grid})


def test_run_skip_fail_status_and_table(toy, tmp_path):
    store = tmp_path / "r.sqlite"
    with ResultsStore(store) as s:  # one unrelated record that no grid table may show
        s.add(Record(protocol="toy", dataset="toy", method="b", seed=9, split_hash=None, settings={},
                     metrics={"score": -1}))
    cfg = _toy(fail=[False, True], seed=[0])
    res = run_grid(cfg, store=store, work_dir=tmp_path / "work")
    assert (res.cells, res.ran, res.skipped, res.failed, res.retried) == (2, 2, 0, 1, 0)
    (err,) = res.errors.values()
    assert err == "ValueError: toy failure (method a)"

    st = grid_status(cfg, store=store)
    assert (st["done"], st["failed"], st["missing"], st["running"]) == (1, 1, 0, 0)
    failed = [r for r in st["rows"] if r["status"] == "failed"][0]
    assert failed["cell"] == {"fail": True, "seed": 0} and failed["error"] == err

    # the stored record is the protocol's own run of that cell (its config) plus the cell key
    cell = cfg.cells()[0]
    (rec,) = grid_records(cfg, store=store)
    (direct,) = toy.run(cell.config)
    assert rec.metrics["score"] == direct.metrics["score"] == 3 and rec.settings["n_max"] == 3
    assert rec.grid_cell == cell.key and rec.grid_part == "1/1" and "grid_cell" not in rec.settings
    assert (tmp_path / "work" / f"toy-{cell.key}" / "ran.txt").is_file()  # the run got its work_dir

    res = run_grid(cfg, store=store, work_dir=tmp_path / "work")  # the done cell is skipped, the failed one retried
    assert (res.cells, res.ran, res.skipped, res.failed) == (2, 1, 1, 1)
    with ResultsStore(store) as s:
        assert len(s.records(protocol="toy")) == 2  # the unrelated one + one cell: nothing duplicated
    assert grid_table(cfg, store=store) == [("a", 0, 3)]  # the unrelated record is not in the grid's table


def test_a_bad_third_cell_runs_nothing(toy, tmp_path):
    store = tmp_path / "r.sqlite"
    cfg = parse_config({"protocol": "toy", "grid": {"method": ["a", "b", "balanced_sofmax"]}})
    with pytest.raises(InputError, match="balanced_sofmax"):
        run_grid(cfg, store=store, work_dir=tmp_path / "work")
    assert not (tmp_path / "work").exists()
    assert not store.exists() or not ResultsStore(store).records()


def test_cells_with_several_records_and_half_stored_cells(toy, tmp_path):
    store = tmp_path / "r.sqlite"
    cfg = _toy(parts=[3])
    key = cfg.cells()[0].key
    with ResultsStore(store) as s:  # what a driver killed between two records of a cell leaves
        s.add(Record(protocol="toy", dataset="toy", method="a", seed=0, split_hash=None,
                     settings={}, metrics={"score": -1.0}, grid_cell=key, grid_part="1/3"))
    assert grid_status(cfg, store=store)["missing"] == 1
    res = run_grid(cfg, store=store, work_dir=tmp_path / "work")
    assert (res.ran, res.skipped) == (1, 0)
    with ResultsStore(store) as s:
        recs = s.records(protocol="toy")
    assert [r.grid_part for r in recs] == ["1/3", "2/3", "3/3"] and -1.0 not in [r.metrics["score"] for r in recs]


def test_local_process_pool_gives_the_in_process_records(toy, tmp_path):
    cfg = _toy(seed=[0, 1, 2])
    run_grid(cfg, store=tmp_path / "a.sqlite", work_dir=tmp_path / "w1")
    run_grid(cfg, store=tmp_path / "b.sqlite", work_dir=tmp_path / "w2", engine=Engine(max_parallel=2))
    a = sorted((r.seed, r.metrics["score"]) for r in grid_records(cfg, store=tmp_path / "a.sqlite"))
    b = sorted((r.seed, r.metrics["score"]) for r in grid_records(cfg, store=tmp_path / "b.sqlite"))
    assert a == b == [(0, 3), (1, 13), (2, 23)]
    pids = {r.metrics["pid"] for r in grid_records(cfg, store=tmp_path / "b.sqlite")}
    assert os.getpid() not in pids  # they ran in worker processes


def test_cuda_cells_without_a_gpu_are_refused_before_anything_runs(toy, tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    cfg = parse_config({"protocol": "toy", "fixed": {"device": "cuda"}})
    for engine in ("local", "ray"):
        with pytest.raises(InputError, match=r"device: cell \(single cell\) has device 'cuda' but this machine "
                                             "has no CUDA GPU"):
            run_grid(cfg, store=tmp_path / "r.sqlite", engine=Engine(engine=engine))
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()


def test_store_arguments_are_checked_alike(toy, tmp_path):
    cfg = _toy(seed=[0])
    for call in (lambda: run_grid(cfg, store=tmp_path), lambda: grid_status(cfg, store=tmp_path),
                 lambda: grid_table(cfg, store=tmp_path)):
        with pytest.raises(InputError, match=r"store: '.*' is a folder, expected a results store file"):
            call()


def test_status_and_table_read_a_store_they_cannot_write(toy, tmp_path, monkeypatch):
    import vistabench.store as vstore

    store = tmp_path / "r.sqlite"
    cfg = _toy(seed=[0, 1])
    run_grid(cfg, store=store, work_dir=tmp_path / "w")
    before = sorted(p.name for p in tmp_path.iterdir())
    monkeypatch.setattr(vstore, "can_write", lambda path: False)  # as in a read-only folder: immutable=1
    assert grid_status(cfg, store=store)["done"] == 2
    assert len(grid_table(cfg, store=store)) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no -wal / -shm created


def test_killed_grid_resumes_without_duplicates(tmp_path):
    cfg = tmp_path / "g.yaml"
    cfg.write_text("protocol: longtail\nfixed: {data: digits, imbalance: 10, epochs: 1, points: 4, repeats: 2}\n"
                   "grid:\n  method: [ce, balanced_softmax]\n  seed: [0, 1]\n")
    store = tmp_path / "r.sqlite"
    cmd = [sys.executable, "-m", "vistabench", "grid", "run", str(cfg), "--store", str(store), "--json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def n_records():
        if not store.is_file():
            return 0
        try:
            with sqlite3.connect(store) as c:
                return c.execute("SELECT COUNT(*) FROM records").fetchone()[0]
        except sqlite3.OperationalError:
            return 0

    with subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:  # closes the pipe
        deadline = time.time() + 120
        while n_records() < 1 and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        first = n_records()
        assert 1 <= first < 4, f"the kill should land mid-grid ({first} records); stderr: {proc.stderr.read()[-2000:]!r}"
    res = run_grid(load_config(cfg), store=store)  # the same grid again, resumed (in-process: faster)
    assert res.cells == 4 and res.failed == 0 and res.skipped >= first and res.ran == 4 - res.skipped
    with sqlite3.connect(store) as c:
        keys = [k for (k,) in c.execute("SELECT grid_cell FROM records")]
    assert len(keys) == 4 and len(set(keys)) == 4


def test_a_one_cell_grid_run_imports_no_cli(tmp_path):
    code = ("import sys\nfrom vistabench.grid import parse_config, run_grid\n"
            "cfg = parse_config({'protocol': 'longtail', 'fixed': {'data': 'digits', 'imbalance': 10, 'epochs': 1,"
            " 'points': 4, 'repeats': 2, 'method': 'ce'}})\n"
            f"res = run_grid(cfg, store={str(tmp_path / 'r.sqlite')!r})\n"
            "assert (res.ran, res.failed) == (1, 0), res\n"
            "print(sorted(m for m in sys.modules if m.startswith('vistabench.cli')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_cli_errors_are_one_line(tmp_path, capsys):
    from vistabench.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("protocol: longtail\nfixed: {data: digits, imbalance: 10, epoch: 1}\n")
    dup = tmp_path / "dup.yaml"
    dup.write_text("protocol: longtail\ngrid:\n  method: [ce]\n  method: [focal]\n")
    good = tmp_path / "good.yaml"
    good.write_text("protocol: longtail\nfixed: {data: digits, imbalance: 10, method: ce}\n")
    for argv, message in (
            (["grid", "run", str(bad)], "epoch"),
            (["grid", "status", str(tmp_path / "nope.yaml")], "no such file"),
            (["grid", "table", str(bad), "--store", str(tmp_path / "none.sqlite")], "epoch"),
            (["grid", "status", str(dup)], "key 'method' written twice"),
            (["grid", "run", str(good), "--no-store"], "--store: none (no results store), but a grid needs its results store"),
            (["grid", "run", str(bad), "--no-store"], "epoch"),  # the config's mistake first
            (["grid", "status", str(good), "--no-store"], "--store: none"),
            (["grid", "table", str(good), "--no-store"], "--store: none"),
            (["grid", "status", str(good), "--store", str(tmp_path)], "--store: '"),
            (["grid", "run", str(good), "--store", str(tmp_path)], "is a folder"),
            (["grid", "run", str(good), "--ray-address", "1.2.3.4:6379"], "--ray-address: only read with engine 'ray'")):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("vistabench: error:") and "\n" not in err and message in err, (argv, err)
    assert main(["grid", "run", str(good), "--engine", "lokal"]) == 2  # the options' own check, one line
    assert capsys.readouterr().err == ("vistabench: error: --engine: expected one of local, ray, got 'lokal'; "
                                       "did you mean 'local'?\n")
