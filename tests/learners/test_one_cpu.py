"""learners/one_cpu.py: a small network's steps with every thread on one CPU give the same bits, the
choice is measured once per network shape, and every thread gets its own CPUs back."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vistabench.learners import one_cpu  # noqa: E402
from vistabench.learners.models import build_model  # noqa: E402
from vistabench.learners.trainer import Trainer, TrainConfig  # noqa: E402


def _affinity() -> bool:
    """Linux per-thread affinity and two or more CPUs (what supported() needs besides the settings)."""
    try:
        return len(os.sched_getaffinity(0)) >= 2 and os.path.isdir("/proc/self/task") \
            and one_cpu._sched_getcpu() is not None
    except AttributeError:
        return False


needs_affinity = pytest.mark.skipif(not _affinity(), reason="needs Linux per-thread affinity and 2+ CPUs")


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    """Two torch threads (the suite runs on one; the conftest gives the setting back), no choice
    remembered from another test, the placement on whatever the environment says."""
    torch.set_num_threads(2)
    monkeypatch.setattr(one_cpu, "CHOICES", {})
    monkeypatch.delenv(one_cpu.ENV, raising=False)
    # what the vistabench command sets (this process's OpenMP read its policy at start: pinned steps
    # here may spin, so the measured choice may be either; the bits are the same)
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")


def _masks() -> dict[int, set[int]]:
    return {int(t): os.sched_getaffinity(int(t)) for t in os.listdir("/proc/self/task")}


@needs_affinity
def test_pin_moves_every_thread_and_unpin_gives_each_its_own_back():
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        narrow = {max(os.sched_getaffinity(0))}
        os.sched_setaffinity(other.native_id, narrow)  # a thread with a mask of its own
        before = _masks()
        saved = one_cpu.pin_to_current_cpu()
        during = _masks()
        assert len({frozenset(m) for m in during.values()}) == 1 and all(len(m) == 1 for m in during.values())
        late = threading.Thread(target=stop.wait)  # started while pinned: inherits the single CPU
        late.start()
        assert os.sched_getaffinity(late.native_id) == next(iter(during.values()))
        one_cpu.unpin(saved)
        after = _masks()
        for tid, mask in before.items():
            assert after[tid] == mask
        assert after[late.native_id] == before[threading.get_native_id()]  # the caller's mask
        assert after[other.native_id] == narrow != before[threading.get_native_id()]
    finally:
        stop.set()
        other.join()


def _data(n=150):
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (n, 8, 8, 1), dtype=np.uint8), np.arange(n) % 3


def _fit(x, y, epochs=2):
    tr = Trainer(build_model("cnn28", num_classes=3, in_channels=1, seed=0),
                 TrainConfig(epochs=epochs, batch_size=10, lr=0.05, weight_decay=5e-4, seed=0))
    res = tr.fit(x, y)
    return tr.predict_logits(x), [p.detach().clone() for p in tr.model.parameters()], res


# run in a fresh process with idle OpenMP threads asleep, as the vistabench command runs (the policy is
# read when torch loads; with this process's spinning threads, steps on one CPU crawl)
CHILD = r"""
import json, os, sys
os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
os.environ.pop("VISTABENCH_ONE_CPU", None)
import numpy as np, torch
torch.set_num_threads(2)
sys.path.insert(0, sys.argv[1])
from test_one_cpu import _data, _fit
from vistabench.learners import one_cpu

def masks():
    return {t: sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")}

pins, real_pin, real_init = [], one_cpu.pin_to_current_cpu, one_cpu.StepPlacement.__init__
one_cpu.pin_to_current_cpu = lambda: pins.append(1) or real_pin()
out = {}
def forced(choice):
    def init(self, key, *, measure):
        real_init(self, key, measure=True)
        self.choice = choice  # no measurement: this placement throughout
    return init
x, y = _data(60)
one_cpu.StepPlacement.__init__ = forced(True)
l1, p1, r1 = _fit(x, y)
out["pinned_steps_moved"] = bool(pins)
one_cpu.StepPlacement.__init__ = forced(False)
pins.clear()
l2, p2, r2 = _fit(x, y)
out["free_steps_moved"] = bool(pins)
out["same_logits"] = bool(np.array_equal(l1, l2))
out["same_weights"] = all(torch.equal(a, b) for a, b in zip(p1, p2))
out["same_losses"] = [h["loss"] for h in r1.history] == [h["loss"] for h in r2.history]
one_cpu.StepPlacement.__init__ = real_init
x, y = _data()  # 15 steps: the measurement (2 + 6 + 1 + 6 steps) ends in the first epoch
before = masks()
_fit(x, y, epochs=1)
out["choices"] = [[list(k), v] for k, v in one_cpu.CHOICES.items()]
out["masks_back"] = masks() == before
_fit(x, y, epochs=1)
out["choices_after_second_fit"] = [[list(k), v] for k, v in one_cpu.CHOICES.items()]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def passive_run():
    import json
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", CHILD, os.path.dirname(__file__)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@needs_affinity
def test_steps_on_one_cpu_give_the_same_bits(passive_run):
    """The same fit with its threads free and on one CPU throughout: identical logits, weights, losses."""
    r = passive_run
    assert r["pinned_steps_moved"] and not r["free_steps_moved"]
    assert r["same_logits"] and r["same_weights"] and r["same_losses"]


@needs_affinity
def test_the_choice_is_measured_once_and_kept_for_the_same_network(passive_run):
    (key, choice), = passive_run["choices"]
    net = build_model("cnn28", num_classes=3, in_channels=1, seed=0)
    # the network's type and size, batch size, input shape, torch threads
    assert key == [type(net).__qualname__, sum(p.numel() for p in net.parameters()), 10, [1, 8, 8], 2]
    assert isinstance(choice, bool)
    assert passive_run["masks_back"]  # every thread back where it was after the fit
    assert passive_run["choices_after_second_fit"] == passive_run["choices"]


@needs_affinity
def test_short_fits_and_the_switch_leave_no_choice(monkeypatch):
    assert one_cpu.supported()  # what the fixture sets up: the placement could run here
    x, y = _data(40)  # 4 steps: the measurement cannot finish
    _fit(x, y, epochs=1)
    assert one_cpu.CHOICES == {}
    monkeypatch.setenv(one_cpu.ENV, "0")
    monkeypatch.setattr(one_cpu, "pin_to_current_cpu", lambda: pytest.fail("moved threads with the switch off"))
    _fit(*_data(), epochs=2)
    assert one_cpu.CHOICES == {}


def test_spinning_idle_threads_are_never_moved(monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert not one_cpu.supported()
    monkeypatch.delenv("OMP_WAIT_POLICY")
    assert not one_cpu.supported()


@needs_affinity
def test_large_networks_are_never_measured(monkeypatch):
    assert one_cpu.supported()
    monkeypatch.setattr(one_cpu, "pin_to_current_cpu", lambda: pytest.fail("moved the threads"))
    monkeypatch.setattr("vistabench.learners.trainer.SMALL_UPDATE", 10)  # every weight is "large"
    _fit(*_data(), epochs=2)
    assert one_cpu.CHOICES == {}


@needs_affinity
def test_one_torch_thread_is_never_measured(monkeypatch):
    assert one_cpu.supported()
    monkeypatch.setattr(one_cpu, "pin_to_current_cpu", lambda: pytest.fail("moved the threads"))
    torch.set_num_threads(1)
    _fit(*_data(), epochs=2)
    assert one_cpu.CHOICES == {}


def test_job_workers_turn_it_off(monkeypatch):
    from vistabench import jobs

    monkeypatch.setenv(one_cpu.ENV, "1")

    class Pids:
        def put(self, pid):
            pass

    jobs._report_pid(Pids())  # what each pool worker runs first
    assert os.environ[one_cpu.ENV] == "0" and not one_cpu.supported()
