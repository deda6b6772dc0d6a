"""learners/lanes.py: independent fits at once, one per CPU: results in order and identical to the
same fits in sequence, each lane on its own CPU with the caller's thread count, torch's generator
seeded one block at a time, and what a fit shares across threads (progress, epoch reports) kept
per thread."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

torch = pytest.importorskip("torch")

from vistabench import epochs, progress  # noqa: E402
from vistabench.learners import lanes, one_cpu  # noqa: E402

two_cpus = pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                              reason="needs Linux affinity and 2+ CPUs")


@pytest.fixture(autouse=True)
def _two_threads():
    torch.set_num_threads(2)  # the conftest gives the suite's setting back


@two_cpus
def test_results_come_back_in_order_each_lane_on_its_own_cpu():
    caller_mask = os.sched_getaffinity(0)
    seen = {}

    def fn(i):
        time.sleep(0.2 if i == 0 else 0.01)  # the first item finishes last
        seen[i] = (threading.get_native_id(), os.sched_getaffinity(0), torch.get_num_threads(), lanes.in_lane())
        return i * i

    out = [(i, r, rep) for i, r, rep in lanes.run_ordered(fn, range(5), lanes=2)]
    assert [(i, r) for i, r, _ in out] == [(i, i * i) for i in range(5)]
    masks = {tid: frozenset(m) for tid, m, _, _ in seen.values()}
    assert len(masks) == 2 and all(len(m) == 1 for m in masks.values())  # two lanes, one CPU each
    assert len(set(masks.values())) == 2  # not the same CPU
    assert all(n == 2 and inside for _, _, n, inside in seen.values())  # the caller's thread count
    assert os.sched_getaffinity(0) == caller_mask and not lanes.in_lane()


@two_cpus
def test_an_error_is_raised_at_its_turn_and_items_not_started_are_dropped():
    started = []

    def fn(i):
        started.append(i)
        if i == 1:
            time.sleep(0.05)
            raise ValueError("item 1")
        time.sleep(0 if i == 0 else 1.0)
        return i

    got = []
    with pytest.raises(ValueError, match="item 1"):
        for _i, r, _ in lanes.run_ordered(fn, range(8), lanes=2):
            got.append(r)
    assert got == [0]
    assert not {5, 6, 7} & set(started)  # both lanes were busy when the error came back


@two_cpus
def test_epoch_reports_wait_for_the_caller_and_progress_is_silent_in_a_lane(monkeypatch):
    class Terminal:
        def isatty(self):
            return True

        def write(self, s):
            return len(s)

        def flush(self):
            pass

    monkeypatch.setattr(progress.sys, "stderr", Terminal())
    monkeypatch.setattr(progress, "_QUIET", False)  # an earlier test's --json may have silenced the process
    heard = []

    def fn(i):
        epochs.report({"epoch": 1, "item": i})
        epochs.report({"epoch": 2, "item": i})
        return progress.enabled()

    with epochs.listen(heard.append):
        out = list(lanes.run_ordered(fn, range(3), lanes=2))
    assert heard == []  # nothing reached the listener from a lane
    assert [rep for _, _, rep in out] == [[{"epoch": 1, "item": i}, {"epoch": 2, "item": i}] for i in range(3)]
    assert [r for _, r, _ in out] == [False] * 3 and progress.enabled()  # silent there, not here


def test_seeded_blocks_run_one_at_a_time_and_give_the_generator_back():
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    inside = threading.Event()
    order = []

    def other():
        inside.wait(5)
        with lanes.seeded(2):
            order.append("other")

    t = threading.Thread(target=other)
    t.start()
    with lanes.seeded(1):
        a = torch.rand(3)
        inside.set()
        time.sleep(0.1)  # the other thread is waiting for the lock meanwhile
        order.append("first")
        b = torch.rand(3)
    t.join()
    assert order == ["first", "other"]
    assert torch.equal(torch.random.get_rng_state(), state)  # both blocks gave the generator back
    torch.manual_seed(1)
    assert torch.equal(torch.cat([a, b]), torch.rand(6))  # no draw of the other thread in between


def test_loop_seed_says_whether_the_loop_drew_and_a_lane_loop_may_not():
    with lanes.loop_seed(0) as s:
        pass
    assert s.clean is True
    with lanes.loop_seed(0) as s:
        torch.rand(1)
    assert s.clean is False
    if len(os.sched_getaffinity(0)) < 2:
        return

    def fn(i):
        with lanes.loop_seed(i) as s:  # in a lane: no seeding, nothing to say
            assert s is None
            if i == 1:
                torch.rand(1)  # a loop that draws
        return i

    with pytest.raises(RuntimeError, match="outside a seeded block"):
        list(lanes.run_ordered(fn, range(2), lanes=1))


@two_cpus
def test_a_draw_outside_a_seeded_block_in_a_lane_is_an_error():
    def fn(i):
        with lanes.seeded(i):  # given back: fine
            torch.rand(2)
        if i == 2:
            time.sleep(0.2)  # items 0 and 1 are done by then: only this item sees its own draw
            torch.rand(1)  # not given back: this item's numbers would depend on the other lane
        return i

    got = []
    with pytest.raises(RuntimeError, match="outside a seeded block"):
        for _i, r, _ in lanes.run_ordered(fn, range(4), lanes=2):
            got.append(r)
    assert got == [0, 1]


@pytest.mark.parametrize("draws", [False, True])
def test_final_runs_go_to_lanes_only_when_the_first_drew_nothing_unseeded(monkeypatch, draws):
    from vistabench.protocols.smalldata import final

    monkeypatch.setattr(lanes, "lanes_available", lambda: 2)
    used = []
    monkeypatch.setattr(lanes, "run_ordered", lambda fn, items, *, lanes: used.append(list(items)) or
                        iter((r, fn(r), []) for r in items))

    def fake_run(ctx, split, method, config, opts, *, epochs, repeat):
        if draws and repeat == 0:
            torch.rand(1)  # e.g. a method's layers built without a seed
        return {"metrics": {}, "highres": None, "lane_ready": True}

    monkeypatch.setattr(final, "_final_run", fake_run)

    class Plan:
        repeats = 4

    assert [r for r, _ in final._in_process(None, None, "m", {}, Plan(), 1)] == [0, 1, 2, 3]
    assert used == ([] if draws else [[1, 2, 3]])


def test_lanes_are_off_with_either_switch_and_inside_a_lane(monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    monkeypatch.setenv(lanes.ENV, "0")
    assert lanes.lanes_available() == 1
    monkeypatch.delenv(lanes.ENV)
    monkeypatch.setenv(one_cpu.ENV, "0")
    assert lanes.lanes_available() == 1
    monkeypatch.delenv(one_cpu.ENV)
    got = []
    t = threading.Thread(target=lambda: (one_cpu.mark_placed_by_lane(), got.append(lanes.lanes_available())))
    t.start()
    t.join()
    assert got == [1]


# the small-data protocol's final runs with and without lanes, in a fresh process whose idle OpenMP
# threads sleep (as the vistabench command runs); the steps are put on one CPU without measuring, so
# the first final run is always lane-ready
CHILD = r"""
import contextlib, io, json, os, sys
os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
os.environ.pop("VISTABENCH_ONE_CPU", None)
import torch
from vistabench import epochs
from vistabench.cli import main
from vistabench.learners import lanes, one_cpu
from vistabench.learners.models import build_model
from vistabench.learners.trainer import Trainer, TrainConfig

real_init = one_cpu.StepPlacement.__init__
def on_one_cpu(self, key, *, measure):
    real_init(self, key, measure=measure)
    if self.active:
        self.choice = True
one_cpu.StepPlacement.__init__ = on_one_cpu
calls, real_run = [], lanes.run_ordered
lanes.run_ordered = lambda fn, items, *, lanes: calls.append(lanes) or real_run(fn, items, lanes=lanes)
out = {}
for switch in ("1", "0"):
    os.environ["VISTABENCH_LANES"] = switch
    heard, buf = [], io.StringIO()
    with epochs.listen(heard.append), contextlib.redirect_stdout(buf):
        rc = main(["smalldata", "run", "--dataset", "digits", "--method", "dhn", "--trials", "1", "--epochs", "2",
                   "--repeats", "4", "--split", "0", "--per-class", "12", "--seed", "0", "--no-store", "--json",
                   "--work-dir", sys.argv[1] + "/w" + switch])
    runs = [r for r in json.loads(buf.getvalue())["records"] if r["kind"] == "final"]
    out[switch] = {"rc": rc, "lanes": list(calls), "heard": json.dumps(heard),
                   "finals": [[r["seed"], r["metrics"]["balanced_accuracy"], r["metrics"]["accuracy"]] for r in runs],
                   "placements": [r["settings"]["placement"] for r in runs]}
    calls.clear()

def fit(net):
    tr = Trainer(net, TrainConfig(epochs=1, batch_size=10, lr=0.05, seed=0))
    import numpy as np
    rng = np.random.default_rng(0)
    tr.fit(rng.integers(0, 256, (60, 8, 8, 1), dtype=np.uint8), np.arange(60) % 3)
    return tr.lane_ready
out["plain_ready"] = fit(build_model("cnn28", num_classes=3, in_channels=1, seed=0))
out["dropout_ready"] = fit(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Dropout(0.5), torch.nn.Linear(64, 3)))
print(json.dumps(out))
"""


@two_cpus
def test_final_runs_in_lanes_equal_the_same_runs_in_sequence(tmp_path):
    p = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    on, off = out["1"], out["0"]
    assert on["rc"] == off["rc"] == 0
    assert on["lanes"] == [2] and off["lanes"] == []  # repeats 1-3 ran in two lanes; none with the switch off
    # the records say so (their time, images/s and the process's peak memory were shared)
    assert on["placements"] == [{"kind": "alone"}] + [{"kind": "lanes", "lanes": 2}] * 3
    assert off["placements"] == [{"kind": "alone"}] * 4
    assert on["finals"] == off["finals"] and [s for s, _, _ in on["finals"]] == [0, 1, 2, 3]
    assert on["heard"] == off["heard"] and on["heard"] != "[]"  # a tracked run's curves: the same, in order
    assert out["plain_ready"] is True
    assert out["dropout_ready"] is False  # its loop draws from torch's generator: never in lanes
