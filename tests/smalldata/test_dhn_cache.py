"""dhn's scattering cache: at most one Kymatio transform per distinct input, and no number changes."""

import numpy as np
import pytest
import torch

from vistabench.learners.smalldata.build import build_method
from vistabench.learners.recipe import Recipe
from vistabench.learners.smalldata.dhn import SCATTERING_CACHE, Scattering
from vistabench.learners.trainer import TrainConfig, Trainer


@pytest.fixture
def cache():
    saved = (SCATTERING_CACHE.enabled, SCATTERING_CACHE.max_bytes, SCATTERING_CACHE.one_thread,
             SCATTERING_CACHE.warm, SCATTERING_CACHE.halves)
    SCATTERING_CACHE.clear()
    yield SCATTERING_CACHE
    (SCATTERING_CACHE.enabled, SCATTERING_CACHE.max_bytes, SCATTERING_CACHE.one_thread,
     SCATTERING_CACHE.warm, SCATTERING_CACHE.halves) = saved
    SCATTERING_CACHE.clear()


def _kymatio(x, J):
    from kymatio.scattering2d.frontend.torch_frontend import ScatteringTorch2D

    return ScatteringTorch2D(J=J, shape=tuple(x.shape[2:]), L=8)(x).flatten(1, 2)


@pytest.mark.parametrize(("shape", "J"), [((1, 8, 8), 3), ((3, 16, 16), 2)])
def test_kymatio_does_not_depend_on_the_batch_nor_the_thread_count(shape, J):
    """The premise of the cache (and of running Kymatio on one thread): an image's coefficients
    are the same bits whatever batch they are computed in and however many threads torch uses."""
    x = torch.randn(24, *shape)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        whole = _kymatio(x, J)
        torch.set_num_threads(1)
        one = _kymatio(x, J)
        parts = torch.cat([_kymatio(x[i:i + 5], J) for i in range(0, 24, 5)])
        single = torch.cat([_kymatio(x[i:i + 1], J) for i in range(24)])
    finally:
        torch.set_num_threads(before)
    assert torch.equal(whole, one) and torch.equal(whole, parts) and torch.equal(whole, single)


def test_a_large_batch_is_computed_as_two_halves_at_once_with_the_same_bits(cache, monkeypatch):
    """A batch of HALVES_MIN or more images on two CPUs: two threads, each on one OpenMP thread
    (the second sets its own team size), and the coefficients of one call, bit for bit."""
    from vistabench.learners import openmp
    from vistabench.learners.smalldata import dhn

    if openmp.runtime() is None:
        pytest.skip("needs torch's OpenMP runtime (libgomp)")
    torch.set_num_threads(2)  # the suite runs on one thread; the conftest gives the setting back
    x = torch.randn(dhn.HALVES_MIN + 7, 1, 8, 8)
    s = Scattering(3)
    cache.halves = False
    whole = s._compute(x)
    seen = []
    real_bank = s._bank

    def bank(h, w, device):
        b = real_bank(h, w, device)

        def call(part):
            import threading

            seen.append((threading.current_thread().name, torch.get_num_threads(), len(part)))
            return b(part)
        return call

    monkeypatch.setattr(s, "_bank", bank)
    cache.halves = True
    halves = s._compute(x)
    assert torch.equal(whole, halves)
    assert sorted(n for _, _, n in seen) == [len(x) // 2, len(x) - len(x) // 2]
    assert {t for _, t, _ in seen} == {1} and len({name for name, _, _ in seen}) == 2
    assert torch.get_num_threads() == 2  # given back
    seen.clear()
    s._compute(x[: dhn.HALVES_MIN - 1])  # smaller: one call
    assert len(seen) == 1


def test_each_distinct_input_is_transformed_once_and_served_bit_for_bit(cache):
    x = torch.randn(6, 1, 8, 8)
    batch = x[[0, 1, 0, 2, 1, 0]]  # three distinct images, one of them three times
    want = _kymatio(batch, 2)
    got = Scattering(2)(batch)
    assert cache.computed == 3 and len(cache) == 3 and cache.hits == 0
    assert torch.equal(got, want)
    again = Scattering(2)(x[[2, 3, 0]])  # a new module (another trial) shares the cache: one new image
    assert cache.computed == 4 and cache.hits == 2
    assert torch.equal(again, _kymatio(x[[2, 3, 0]], 2))
    # another scale or another size is another input
    Scattering(1)(x[:2])
    assert cache.computed == 6


def test_channels_last_input_hits_the_entry_of_the_same_values(cache):
    x = torch.randn(4, 3, 8, 8)
    a = Scattering(1)(x)
    b = Scattering(1)(x.contiguous(memory_format=torch.channels_last))
    assert torch.equal(a, b) and cache.computed == 4 and cache.hits == 4


def test_augmented_training_inputs_are_computed_but_not_kept(cache):
    s = Scattering(2)
    x = torch.randn(5, 1, 8, 8)
    s.inputs_augmented = True
    out = s(x)  # training mode (a fresh module) with augmented inputs
    assert len(cache) == 0 and cache.computed == 5 and torch.equal(out, _kymatio(x, 2))
    s.eval()
    s(x)  # evaluation inputs are kept even when training augments
    assert len(cache) == 5 and cache.computed == 10
    s.train()
    s.inputs_augmented = False
    s(x)
    assert cache.computed == 10 and cache.hits == 5


def test_disabled_cache_and_inputs_needing_gradients_compute_every_time(cache):
    x = torch.randn(3, 1, 8, 8)
    cache.enabled = False
    Scattering(2)(x)
    Scattering(2)(x)
    assert cache.computed == 6 and len(cache) == 0
    cache.enabled = True
    Scattering(2)(x.clone().requires_grad_(True))
    assert cache.computed == 9 and len(cache) == 0


def test_least_recently_used_entries_leave_past_max_bytes(cache):
    x = torch.randn(10, 1, 8, 8)
    out = Scattering(2)(x[:1])
    per_image = out[0].numel() * out[0].element_size()
    cache.clear()
    cache.max_bytes = 3 * per_image
    s = Scattering(2)
    s(x[:3])
    s(x[:1])  # image 0 becomes the most recently used
    s(x[3:4])  # evicts image 1, the least recently used
    assert len(cache) == 3 and cache.nbytes == 3 * per_image
    computed = cache.computed
    s(x[[0, 2, 3]])
    assert cache.computed == computed
    s(x[1:2])
    assert cache.computed == computed + 1


@pytest.mark.parametrize("augment", [False, True])
def test_training_with_the_cache_gives_the_same_numbers_as_without(cache, augment):
    """A dhn fit (2 epochs, validation every epoch) and its test logits, cache on vs off: identical."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (40, 8, 8, 1), dtype=np.uint8)
    labels = np.arange(40) % 4
    test = rng.integers(0, 256, (12, 8, 8, 1), dtype=np.uint8)

    def run(enabled, one_thread):
        cache.clear()
        cache.enabled, cache.one_thread = enabled, one_thread
        model, loss = build_method("dhn", Recipe(model="cnn28"), {"scattering_J": 2}, num_classes=4, in_channels=1,
                                   image_size=8, seed=0)
        cfg = TrainConfig(epochs=2, lr=0.05, batch_size=10, count_flops=False, seed=0, threads=1,
                          augment=augment)
        tr = Trainer(model, cfg, loss_fn=loss)
        res = tr.fit(images, labels, val=(images[:12], labels[:12]))
        return [h["val_acc"] for h in res.history], tr.predict_logits(test), cache.computed

    acc0, logits0, computed0 = run(False, False)
    acc1, logits1, computed1 = run(True, True)
    assert acc0 == acc1
    np.testing.assert_array_equal(logits0, logits1)
    # without augmentation: the 40 training images once (the 12 validation ones are among them) and
    # the 12 test images; with it, every augmented training image as before, evaluation inputs once
    assert computed0 == 2 * 40 + 2 * 12 + 12
    assert computed1 == (2 * 40 + 12 + 12 if augment else 40 + 12)


def test_warm_computes_the_missing_inputs_in_one_call_and_the_batches_then_hit(cache, monkeypatch):
    s = Scattering(2)
    x = torch.randn(30, 1, 8, 8)
    calls = []
    compute = Scattering._compute
    monkeypatch.setattr(Scattering, "_compute", lambda self, b: calls.append(len(b)) or compute(self, b))
    s(x[:5])  # five already cached
    assert s.warm(x) is True
    assert calls == [5, 25] and cache.computed == 30 and cache.hits == 0  # a warm-up uses no entry
    got = torch.cat([s(x[i:i + 10]) for i in range(0, 30, 10)])
    assert calls == [5, 25] and cache.hits == 30
    assert torch.equal(got, _kymatio(x, 2))


def test_warm_stops_where_the_cache_would_evict(cache):
    s = Scattering(2)
    x = torch.randn(10, 1, 8, 8)
    per_image = s(x[:1])[0].numel() * 4
    cache.clear()
    cache.max_bytes = 6 * per_image
    assert s.warm(x[:4]) is True and len(cache) == 4
    assert s.warm(x[:4]) is True and cache.computed == 4  # nothing missing: nothing computed
    assert s.warm(x[4:]) is False and len(cache) == 4 and cache.computed == 4  # 6 more would evict
    cache.warm = False
    assert s.warm(x[9:]) is False and len(cache) == 4
    cache.warm, cache.enabled = True, False
    assert s.warm(x[:1]) is False


def test_the_filter_bank_is_built_once_per_scale_and_size(cache, monkeypatch):
    from kymatio.scattering2d.frontend import torch_frontend

    from vistabench.learners.smalldata import dhn

    monkeypatch.setattr(dhn, "_BANKS", {})
    built = []
    real = torch_frontend.ScatteringTorch2D
    monkeypatch.setattr(torch_frontend, "ScatteringTorch2D", lambda **kw: built.append(kw) or real(**kw))
    cache.enabled = False
    x = torch.randn(2, 1, 8, 8)
    for _ in range(3):  # three models (trials, repeats): one bank
        Scattering(2)(x)
    Scattering(1)(x)
    Scattering(2)(torch.randn(2, 1, 16, 16))
    assert [(kw["J"], kw["shape"]) for kw in built] == [(2, (8, 8)), (1, (8, 8)), (2, (16, 16))]


def test_a_fit_warms_its_unaugmented_training_set_in_eval_sized_batches(cache, monkeypatch):
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (40, 8, 8, 1), dtype=np.uint8)
    labels = np.arange(40) % 4
    calls = []
    compute = Scattering._compute
    monkeypatch.setattr(Scattering, "_compute", lambda self, b: calls.append(len(b)) or compute(self, b))
    for augment, want in ((False, [16, 16, 8]), (True, [])):
        cache.clear()
        calls.clear()
        model, loss = build_method("dhn", Recipe(model="cnn28"), {"scattering_J": 2}, num_classes=4, in_channels=1,
                                   image_size=8, seed=0)
        cfg = TrainConfig(epochs=1, lr=0.05, batch_size=10, count_flops=False, seed=0, eval_batch_size=16,
                          augment=augment)
        Trainer(model, cfg, loss_fn=loss).fit(images, labels)
        if augment:  # every step computes its own (augmented) batch; nothing warmed or kept
            assert calls == [10, 10, 10, 10] and len(cache) == 0
        else:  # the warm-up computes the set; the four steps only hit
            assert calls == want and cache.hits == 40
