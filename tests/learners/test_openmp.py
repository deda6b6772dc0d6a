"""learners/openmp.py: element-wise work on one OpenMP thread gives the same bits, and the trainer's
update of a small network runs there without changing a number."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vistabench.learners import openmp  # noqa: E402
from vistabench.learners.models import build_model  # noqa: E402
from vistabench.learners.trainer import Trainer, TrainConfig  # noqa: E402

needs_runtime = pytest.mark.skipif(openmp.runtime() is None, reason="needs torch's OpenMP runtime (libgomp)")


@pytest.fixture(autouse=True)
def _two_threads():
    """The suite runs on one torch thread (tests/conftest.py); these tests need a team of two (the
    conftest's per-test fixture gives the setting back)."""
    torch.set_num_threads(2)


@needs_runtime
def test_one_thread_sets_and_restores_the_callers_team_size():
    with openmp.one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with openmp.one_thread(False):
        assert torch.get_num_threads() == 2


@needs_runtime
def test_one_thread_is_a_no_op_when_disabled(monkeypatch):
    monkeypatch.setattr(openmp, "ENABLED", False)
    with openmp.one_thread():
        assert torch.get_num_threads() == 2


@needs_runtime
@pytest.mark.parametrize("n", [32769, 40001, 124993, 200003])  # > torch's grain of 32,768; odd splits
def test_sgd_update_bits_do_not_depend_on_the_thread_count(n):
    def run(one: bool):
        g = torch.Generator().manual_seed(n)
        p = torch.nn.Parameter(torch.randn(n, generator=g))
        opt = torch.optim.SGD([p], lr=0.0123, momentum=0.9, weight_decay=0.00713, nesterov=True)
        for _ in range(3):
            p.grad = torch.randn(n, generator=g)
            with openmp.one_thread(one):
                opt.step()
        return p.detach().clone(), opt.state[p]["momentum_buffer"].clone()

    (p1, b1), (p2, b2) = run(False), run(True)
    assert torch.equal(p1, p2) and torch.equal(b1, b2)


@needs_runtime
def test_trainer_results_unchanged_with_the_update_on_one_thread(monkeypatch):
    """A network whose weights reach the parallel kernels (cnn28 of width 48: 41,472 and 165,888
    elements > 32,768) trains to the same bits with and without the one-thread update."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (60, 12, 12, 1), dtype=np.uint8)
    y = np.arange(60) % 3

    def fit():
        tr = Trainer(build_model("cnn28", num_classes=3, in_channels=1, seed=0, width=48),
                     TrainConfig(epochs=2, batch_size=10, lr=0.05, weight_decay=5e-4, seed=0))
        res = tr.fit(x, y)
        return tr.predict_logits(x), [p.detach().clone() for p in tr.model.parameters()], res

    calls = []
    real = openmp.one_thread
    monkeypatch.setattr("vistabench.learners.trainer.one_thread", lambda on: calls.append(on) or real(on))
    logits1, params1, res1 = fit()
    assert calls and all(calls)  # the update ran on one thread
    monkeypatch.setattr(openmp, "ENABLED", False)
    logits2, params2, res2 = fit()
    assert np.array_equal(logits1, logits2)
    assert all(torch.equal(a, b) for a, b in zip(params1, params2))
    assert [h["loss"] for h in res1.history] == [h["loss"] for h in res2.history]


def test_large_weights_keep_torchs_threads(monkeypatch):
    """A weight over SMALL_UPDATE elements: the update keeps torch's thread count."""
    monkeypatch.setattr(openmp, "SMALL_UPDATE", 10)
    monkeypatch.setattr("vistabench.learners.trainer.SMALL_UPDATE", 10)
    calls = []
    real = openmp.one_thread
    monkeypatch.setattr("vistabench.learners.trainer.one_thread", lambda on: calls.append(on) or real(on))
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (20, 8, 8, 1), dtype=np.uint8)
    Trainer(build_model("cnn28", num_classes=2, in_channels=1, seed=0),
            TrainConfig(epochs=1, batch_size=10, lr=0.05)).fit(x, np.arange(20) % 2)
    assert calls and not any(calls)


def test_torchs_own_runtime_is_chosen_beside_another_libgomp(monkeypatch):
    """scikit-learn's wheels load a second libgomp: the one torch's kernels use is still found."""
    import os

    pytest.importorskip("sklearn.cluster")  # its k-means extension loads scikit_learn.libs/libgomp-*.so
    with open("/proc/self/maps") as f:
        loaded = {line.split()[-1] for line in f if "libgomp" in line.rsplit("/", 1)[-1]}
    torch_lib = os.path.realpath(os.path.join(os.path.dirname(torch.__file__), "lib"))
    if len(loaded) < 2 or not any(os.path.dirname(os.path.realpath(p)) == torch_lib for p in loaded):
        pytest.skip("needs torch's own libgomp and a second one loaded")
    monkeypatch.setattr(openmp, "_RUNTIME", [])
    lib = openmp.runtime()
    assert lib is not None and os.path.dirname(os.path.realpath(lib._name)) == torch_lib
