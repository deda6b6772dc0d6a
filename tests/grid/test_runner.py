"""Running grids with the local engine: store, skip, failures, resume, status, table."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from vistabench.grid import grid_records, load_config, grid_status, grid_table, parse_config, run_grid
from vistabench.protocols.longtail import run as longtail_run
from vistabench.store import Record, ResultsStore

FIXED = {"data": "digits", "imbalance": 10, "epochs": 1, "points": 4, "repeats": 2}


def _cfg(**grid):
    return parse_config({"protocol": "longtail", "fixed": FIXED, "grid": grid})


def test_run_skip_fail_status_and_table(tmp_path):
    store = tmp_path / "r.sqlite"
    # one unrelated record that no grid table may show
    with ResultsStore(store) as s:
        s.add(Record(protocol="longtail", dataset="digits", method="focal", seed=0, split_hash=None,
                     settings={"imbalance": 10.0}, metrics={"auc": 0.99}))
    cfg = _cfg(method=["ce", "no_such_method"], seed=[0])
    res = run_grid(cfg, store=store, work_dir=tmp_path / "work")
    assert (res.cells, res.ran, res.skipped, res.failed) == (2, 2, 0, 1)
    (err,) = res.errors.values()
    assert "no_such_method" in err and "\n" not in err

    st = grid_status(cfg, store=store)
    assert (st["done"], st["failed"], st["missing"], st["running"]) == (1, 1, 0, 0)
    failed = [r for r in st["rows"] if r["status"] == "failed"][0]
    assert failed["cell"] == {"method": "no_such_method", "seed": 0} and failed["error"] == err

    # the stored record is the protocol's own run of that cell plus the cell key
    (rec,) = grid_records(cfg, store=store)
    direct = longtail_run(**{**FIXED, "method": "ce", "seed": 0})
    assert rec.metrics["auc"] == direct["metrics"]["auc"] and rec.split_hash == direct["split_hash"]
    assert rec.settings["grid_cell"] == cfg.cells()[0].key and rec.settings["grid_part"] == "1/1"

    # again: the done cell is skipped, the failed one is tried again
    res = run_grid(cfg, store=store, work_dir=tmp_path / "work")
    assert (res.cells, res.ran, res.skipped, res.failed) == (2, 1, 1, 1)
    with ResultsStore(store) as s:
        assert len(s.records(protocol="longtail")) == 2  # focal + one ce: nothing duplicated

    table = grid_table(cfg, store=store)
    assert [r["method"] for r in table.rows] == ["ce (digits, ρ=10)"]  # the focal record is not in the grid
    assert table.rows[0]["auc"] == pytest.approx(direct["metrics"]["auc"])
    assert "**" in table.render("markdown") and "\\textbf" in table.render("latex")


def test_half_stored_cell_is_removed_and_run_again(tmp_path):
    store = tmp_path / "r.sqlite"
    cfg = _cfg(method=["ce"], seed=[0])
    key = cfg.cells()[0].key
    with ResultsStore(store) as s:  # what a driver killed between two records of a cell leaves
        s.add(Record(protocol="longtail", dataset="digits", method="ce", seed=0, split_hash=None,
                     settings={"grid_cell": key, "grid_part": "1/2"}, metrics={"auc": -1.0}))
    assert grid_status(cfg, store=store)["missing"] == 1
    res = run_grid(cfg, store=store, work_dir=tmp_path / "work")
    assert (res.ran, res.skipped) == (1, 0)
    with ResultsStore(store) as s:
        recs = s.records(protocol="longtail")
    assert len(recs) == 1 and recs[0].settings["grid_part"] == "1/1" and recs[0].metrics["auc"] != -1.0


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

    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while n_records() < 1 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = n_records()
    assert 1 <= first < 4, "the kill should land mid-grid"
    res = run_grid(load_config(cfg), store=store)  # the same grid again, resumed (in-process: faster)
    assert res.cells == 4 and res.failed == 0 and res.skipped >= first and res.ran == 4 - res.skipped
    with sqlite3.connect(store) as c:
        keys = [json.loads(s)["grid_cell"] for (s,) in c.execute("SELECT settings FROM records")]
    assert len(keys) == 4 and len(set(keys)) == 4


def test_cli_errors_are_one_line(tmp_path, capsys):
    from vistabench.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("protocol: longtail\nfixed: {data: digits, imbalance: 10, epoch: 1}\n")
    for argv in (["grid", "run", str(bad)], ["grid", "status", str(tmp_path / "nope.yaml")],
                 ["grid", "table", str(bad), "--store", str(tmp_path / "none.sqlite")]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("vistabench: error:") and "\n" not in err
    good = tmp_path / "good.yaml"
    good.write_text("protocol: longtail\nfixed: {data: digits, imbalance: 10, method: ce}\n")
    with pytest.raises(SystemExit):
        main(["grid", "run", str(good), "--engine", "lokal"])
    assert main(["grid", "run", str(good), "--ray-address", "1.2.3.4:6379"]) == 2
    assert "--ray-address: only with --engine ray" in capsys.readouterr().err


def test_unreachable_ray_address_and_empty_table_are_one_line_errors(tmp_path):
    import socket

    from vistabench.errors import InputError

    pytest.importorskip("ray")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = _cfg(method=["ce"], seed=[0])
    with pytest.raises(InputError, match=r"--ray-address '127.0.0.1:\d+': nothing answers there"):
        run_grid(cfg, store=tmp_path / "r.sqlite", engine="ray", ray_address=f"127.0.0.1:{port}")
    assert grid_status(cfg, store=tmp_path / "r.sqlite")["missing"] == 1  # nothing left marked running
    with pytest.raises(InputError, match="no cell of grid .* is done yet"):
        grid_table(cfg, store=tmp_path / "r.sqlite")
