"""Grids under faults: two drivers on one store, leases of dead drivers, SIGTERM/SIGINT to a driver."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from vistabench.grid import parse_config, run_grid
from vistabench.grid.state import GridState

HERE = str(Path(__file__).resolve().parent)

#: a driver of the toy grid in a process of its own: argv = store, max_parallel, sleep, seeds
DRIVER = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {here!r})
    from vistabench.suite import Protocol, declare
    declare(Protocol(name="toy", title="toy", question="?", order=99, run="vb_toy_protocol:run",
                     table="vb_toy_protocol:table", config="vb_toy_protocol:ToyConfig"))
    from vistabench.engine import Engine
    from vistabench.grid import parse_config, run_grid
    store, parallel, sleep, seeds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    cfg = parse_config({{"protocol": "toy", "fixed": {{"sleep": sleep}},
                         "grid": {{"method": ["a", "b"], "seed": list(range(seeds))}}}})
    res = run_grid(cfg, store=store, engine=Engine(max_parallel=parallel))
    print(json.dumps(res.to_dict()))
""").format(here=HERE)


def _driver(store: Path, parallel: int, sleep: float, seeds: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([HERE, *sys.path])}
    return subprocess.Popen([sys.executable, "-c", DRIVER, str(store), str(parallel), str(sleep), str(seeds)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _cells_stored(store: Path) -> list[str]:
    with sqlite3.connect(store) as c:
        return [k for (k,) in c.execute("SELECT grid_cell FROM records")]


def test_two_drivers_of_one_grid_share_its_cells_and_store_none_twice(tmp_path):
    store = tmp_path / "r.sqlite"
    first = _driver(store, 1, 0.2, 5)
    time.sleep(0.3)  # both drivers at work at once
    second = _driver(store, 1, 0.2, 5)
    outs = []
    for proc in (first, second):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    keys = _cells_stored(store)
    assert len(keys) == 10 and len(set(keys)) == 10  # every cell once
    assert sum(o["ran"] for o in outs) == 10  # and run once: what one ran, the other skipped
    assert all(o["ran"] > 0 for o in outs), outs  # the cells were shared, not run twice in turn
    assert all(o["cells"] == o["ran"] + o["skipped"] for o in outs)
    with sqlite3.connect(store) as c:
        assert c.execute("SELECT COUNT(*) FROM grid_leases").fetchone()[0] == 0  # every lease given back


def _toy(**grid):
    return parse_config({"protocol": "toy", "fixed": {"n_max": 3}, "grid": grid})


def _lease(store: Path, key: str, *, host: str, pid: int, expires: float) -> None:
    from vistabench.store import ResultsStore

    with ResultsStore(store), GridState(store):  # creates the tables
        pass
    with sqlite3.connect(store) as c:
        c.execute("INSERT OR REPLACE INTO grid_leases (key, owner, host, pid, expires, heartbeat) VALUES "
                  "(?, ?, ?, ?, ?, ?)", (key, f"{host}:{pid}:x", host, pid, expires, time.time()))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_leases_of_dead_or_expired_drivers_are_taken_over_live_ones_respected(toy, tmp_path):
    cfg = _toy(method=["a"], seed=[0, 1, 2, 3])
    keys = [c.key for c in cfg.cells()]
    store = tmp_path / "r.sqlite"
    _lease(store, keys[0], host=socket.gethostname(), pid=_dead_pid(), expires=time.time() + 3600)  # died here
    _lease(store, keys[1], host="elsewhere", pid=1, expires=time.time() - 1)  # another machine's, expired
    _lease(store, keys[2], host="elsewhere", pid=1, expires=time.time() + 3600)  # another machine's, live
    _lease(store, keys[3], host=socket.gethostname(), pid=os.getppid(), expires=time.time() + 3600)  # live here
    res = run_grid(cfg, store=store)
    assert (res.ran, res.skipped) == (2, 2)
    assert sorted(_cells_stored(store)) == sorted(keys[:2])
    with sqlite3.connect(store) as c:  # the live drivers' leases are untouched
        assert sorted(k for (k,) in c.execute("SELECT key FROM grid_leases")) == sorted(keys[2:])


def test_a_half_stored_cell_of_a_live_driver_is_not_removed(toy, tmp_path):
    from vistabench.store import Record, ResultsStore

    cfg = _toy(method=["a"], seed=[0], parts=[2])
    (cell,) = cfg.cells()
    store = tmp_path / "r.sqlite"
    with ResultsStore(store) as s:  # the other driver has stored 1 of the cell's 2 records so far
        s.add(Record(protocol="toy", dataset="toy", method="a", seed=0, split_hash=None,
                     settings={}, metrics={}, grid_cell=cell.key, grid_part="1/2"))
    _lease(store, cell.key, host=socket.gethostname(), pid=os.getppid(), expires=time.time() + 3600)
    res = run_grid(cfg, store=store)
    assert (res.ran, res.skipped) == (0, 1)
    assert _cells_stored(store) == [cell.key]  # its record kept


def _children(pid: int) -> set[int]:
    """Every process under ``pid`` (from /proc)."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(d))
    out, todo = set(), [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.add(k)
            todo.append(k)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process tree from /proc (Linux)")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_driver_stops_its_workers_first(tmp_path, sig):
    store = tmp_path / "r.sqlite"
    proc = _driver(store, 2, 30.0, 3)  # cells of 30 s: the workers are surely mid-cell
    try:
        _stop_mid_cell(proc, store, sig)
    finally:
        if proc.poll() is None:  # the test failed before the driver ended: nothing of it runs on
            for p in [*_children(proc.pid), proc.pid]:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            proc.wait()


def _stop_mid_cell(proc: subprocess.Popen, store: Path, sig: int) -> None:
    deadline = time.time() + 60
    workers: set[int] = set()
    while time.time() < deadline:
        try:
            with sqlite3.connect(store) as c:
                running = c.execute("SELECT COUNT(*) FROM grid_cells WHERE status = 'running'").fetchone()[0]
        except sqlite3.OperationalError:
            running = 0
        workers = _children(proc.pid)
        if running == 2 and len(workers) >= 2:
            break
        time.sleep(0.1)
    assert running == 2, proc.stderr.read() if proc.poll() is not None else "no cell started"
    time.sleep(0.5)
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    assert proc.returncode != 0
    time.sleep(1)
    survivors = [p for p in workers if _alive(p)]
    assert not survivors, f"worker processes {survivors} still run after the driver exited"
    with sqlite3.connect(store) as c:  # the cells it had in flight are not 'running' any more
        assert c.execute("SELECT COUNT(*) FROM grid_cells WHERE status = 'running'").fetchone()[0] == 0
        assert c.execute("SELECT COUNT(*) FROM grid_leases").fetchone()[0] == 0
