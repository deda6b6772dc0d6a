import math

import numpy as np
import pytest
import torch

from vistabench.data import load_dataset
from vistabench.errors import InputError
from vistabench.learners.models import build_model
from vistabench.learners.tensors import Normaliser, augment_batch, to_float_nchw
from vistabench.learners.trainer import TrainConfig, Trainer, epoch_order, resolve_device

RNG = np.random.default_rng(0)
X = RNG.integers(0, 256, (48, 8, 8, 1), dtype=np.uint8)
Y = np.arange(48) % 3


def make(epochs=1, seed=0, model_seed=0, **kw):
    cfg = TrainConfig(epochs=epochs, batch_size=kw.pop("batch_size", 16), lr=0.05, seed=seed, **kw)
    return Trainer(build_model("cnn28", num_classes=3, in_channels=1, seed=model_seed), cfg)


def test_same_seed_identical_logits_other_seed_differs():
    runs = []
    for seed in (0, 0, 1):
        tr = make(epochs=2, seed=seed, augment=True)
        tr.fit(X, Y)
        runs.append(tr.predict_logits(X))
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


def test_fit_does_not_move_global_rng():
    state = torch.get_rng_state()
    make().fit(X, Y)
    assert torch.equal(state, torch.get_rng_state())


def test_history_result_fields_and_json():
    from vistabench.jsonutil import dumps

    tr = make(epochs=2)
    res = tr.fit(X, Y, val=(X[:9], Y[:9]))
    assert [h["epoch"] for h in res.history] == [1, 2]
    assert set(res.history[0]) == {"epoch", "loss", "train_acc", "val_acc", "lr"}
    assert 0 <= res.history[1]["val_acc"] <= 1
    logits = tr.predict_logits(X[:9])
    assert res.history[1]["val_acc"] == pytest.approx(np.mean(logits.argmax(1) == Y[:9]))
    assert res.steps == 6 and res.flops > 0 and res.images_per_second > 0 and res.peak_memory_bytes > 0
    assert res.config["sampler"] == "uniform" and res.device == "cpu"
    # last step t = 5 of T = 6: lr * (1 + cos(pi * 5 / 6)) / 2
    assert res.history[-1]["lr"] == pytest.approx(0.05 * 0.5 * (1 + math.cos(math.pi * 5 / 6)))
    no_val = make().fit(X, Y)
    assert math.isnan(no_val.history[0]["val_acc"])
    assert '"val_acc": null' in dumps(no_val.to_dict())


def test_cosine_schedule_per_step():
    tr = make(epochs=4, warmup_epochs=1)
    lrs = [tr.lr_at(s, 12, 3) for s in range(12)]
    np.testing.assert_allclose(lrs[:3], [0.05 / 3, 0.1 / 3, 0.05])
    np.testing.assert_allclose(lrs[3:], [0.05 * 0.5 * (1 + math.cos(math.pi * t / 9)) for t in range(9)])


def test_bad_device_and_oversize_batch():
    if not torch.cuda.is_available():
        cfg = TrainConfig(device="cuda")  # can be built on a CPU-only driver and shipped to a GPU worker
        with pytest.raises(InputError, match="CUDA is not available"):
            Trainer(build_model("cnn28", num_classes=3, in_channels=1), cfg)
        assert resolve_device("auto").type == "cpu"
    for bad in ("tpu", "cuda:x", 0):
        with pytest.raises(InputError, match="device"):
            TrainConfig(device=bad)
    with pytest.raises(InputError, match="batch_size.*48.*got 64"):
        make(batch_size=64).fit(X, Y)
    for bad in [dict(epochs=0), dict(lr=-1), dict(momentum=1.5), dict(label_smoothing=2), dict(seed=1.5)]:
        with pytest.raises(InputError, match=next(iter(bad))):
            TrainConfig(**bad)


def test_bad_inputs():
    tr = make()
    with pytest.raises(InputError, match="call fit"):
        tr.predict_logits(X)
    with pytest.raises(InputError, match="labels"):
        tr.fit(X, np.full(48, 3))
    with pytest.raises(InputError, match="in_channels=1"):
        tr.fit(np.zeros((48, 8, 8, 3), np.uint8), Y)
    with pytest.raises(InputError, match="images has 48"):
        tr.fit(X, Y[:10])
    with pytest.raises(InputError, match="NaN"):
        tr.fit(np.full((48, 8, 8, 1), np.nan, np.float32), Y)
    with pytest.raises(InputError, match="sampler"):
        tr.fit(X, Y, sampler="balanced")
    tr.fit(X, Y)
    with pytest.raises(InputError, match="uint8"):
        tr.predict_logits(X.astype(np.float32))
    assert tr.predict_logits(X[:0]).shape == (0, 3)


def test_callback_stops_and_exceptions_propagate():
    seen = []

    def stop_at_two(epoch, metrics):
        seen.append((epoch, metrics["loss"]))
        return epoch == 2

    res = Trainer(build_model("cnn28", num_classes=3, in_channels=1),
                  TrainConfig(epochs=5, batch_size=16), callback=stop_at_two).fit(X, Y)
    assert res.stopped_early and len(res.history) == 2 and [e for e, _ in seen] == [1, 2]
    assert res.steps == 6

    class Pruned(Exception):
        pass

    def prune(epoch, metrics):
        raise Pruned

    with pytest.raises(Pruned):
        Trainer(build_model("cnn28", num_classes=3, in_channels=1),
                TrainConfig(epochs=3, batch_size=16), callback=prune).fit(X, Y)


def test_loss_set_epoch_is_called_each_epoch():
    calls = []

    class Loss(torch.nn.Module):
        def set_epoch(self, e):
            calls.append(e)

        def forward(self, z, y):
            return torch.nn.functional.cross_entropy(z, y)

    Trainer(build_model("cnn28", num_classes=3, in_channels=1), TrainConfig(epochs=3, batch_size=16),
            loss_fn=Loss()).fit(X, Y)
    assert calls == [0, 1, 2]


def test_classifier_only_training_freezes_backbone():
    tr = make(epochs=1)
    tr.fit(X, Y)
    before = {k: v.clone() for k, v in tr.model.state_dict().items()}
    res = tr.fit(X, Y, sampler="class_balanced", trainable="classifier")
    after = tr.model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed == {"classifier.weight", "classifier.bias"}  # BN statistics untouched too
    assert res.config["trainable"] == "classifier"
    assert all(p.requires_grad for p in tr.model.parameters())
    # a parameter the caller froze stays frozen, also when training fails half-way
    first = next(tr.model.parameters())
    first.requires_grad_(False)
    with pytest.raises(InputError):
        tr.fit(X, np.full(48, 7), trainable="classifier")
    tr.fit(X, Y, trainable="classifier")
    assert not first.requires_grad
    assert all(p.requires_grad for p in list(tr.model.parameters())[1:])


def test_epoch_order_class_balanced_draws_classes_equally():
    labels = np.r_[np.zeros(900, int), np.ones(90, int), np.full(10, 2)]
    rng = np.random.default_rng(0)
    drawn = np.concatenate([labels[epoch_order(labels, rng, "class_balanced")] for _ in range(20)])
    freq = np.bincount(drawn) / len(drawn)
    np.testing.assert_allclose(freq, [1 / 3] * 3, atol=0.01)
    perm = epoch_order(labels, rng, "uniform")
    assert sorted(perm.tolist()) == list(range(1000))


def test_normaliser_matches_numpy_and_handles_constant_band():
    imgs = RNG.normal(5, 2, (30, 4, 4, 3)).astype(np.float32)
    imgs[..., 2] = 7.0
    norm = Normaliser.fit(imgs)
    flat = imgs.reshape(-1, 3).astype(np.float64)
    np.testing.assert_allclose(norm.mean, flat.mean(0), rtol=1e-6)
    np.testing.assert_allclose(norm.std[:2], flat.std(0)[:2], rtol=1e-5)
    assert norm.std[2] == 1.0  # constant band: centred only
    out = norm.apply(to_float_nchw(imgs)).numpy()
    np.testing.assert_allclose(out.mean(axis=(0, 2, 3))[:2], 0, atol=1e-5)
    np.testing.assert_allclose(out.std(axis=(0, 2, 3))[:2], 1, atol=1e-4)
    u8 = Normaliser.fit(X)
    assert u8.mean[0] == pytest.approx(X.mean() / 255)


def test_augment_crops_windows_of_padded_image_and_flips():
    x = torch.arange(2 * 1 * 6 * 6, dtype=torch.float32).reshape(2, 1, 6, 6) + 1
    g = torch.Generator().manual_seed(0)
    out = augment_batch(x, g, padding=2)
    assert out.shape == x.shape
    padded = torch.nn.functional.pad(x, (2, 2, 2, 2)).numpy()
    for i in range(2):
        windows = [padded[i, :, a:a + 6, b:b + 6] for a in range(5) for b in range(5)]
        windows += [w[..., ::-1] for w in windows]
        assert any(np.array_equal(out[i].numpy(), w) for w in windows)
    same = augment_batch(x, torch.Generator().manual_seed(0), padding=0, flip=False)
    assert torch.equal(same, x)


def test_learns_digits():
    data = load_dataset("digits")
    tr = Trainer(build_model("cnn28", num_classes=10, in_channels=1, seed=0),
                 TrainConfig(epochs=4, batch_size=32, lr=0.05, seed=0))
    tr.fit(data.train.images, data.train.labels)
    acc = np.mean(tr.predict_logits(data.test.images).argmax(1) == data.test.labels)
    assert acc > 0.85
    assert tr.features(data.test.images[:5]).shape == (5, 256)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_run_reports_device_memory():
    tr = make(epochs=1, device="cuda")
    res = tr.fit(X, Y)
    assert res.device.startswith("cuda") and res.peak_memory_kind == "cuda_max_allocated"
    assert res.peak_memory_bytes > 0
    assert tr.predict_logits(X).shape == (48, 3)


def test_given_normaliser_is_used_instead_of_refitting():
    tr = make()
    tr.fit(X, Y)
    first = tr.normaliser
    other = (X // 2).astype(np.uint8)
    res = tr.fit(other, Y, normaliser=first)
    assert tr.normaliser is first and res.normaliser["mean"] == first.mean.tolist()
    assert make().fit(other, Y).normaliser["mean"] != first.mean.tolist()
    with pytest.raises(InputError, match="uint8"):
        tr.fit(X.astype(np.float32), Y, normaliser=first)


def test_divergence_raises_training_diverged():
    from vistabench.learners.trainer import TrainingDiverged

    with pytest.raises(TrainingDiverged, match="lower the learning rate"):
        Trainer(build_model("cnn28", num_classes=3, in_channels=1, seed=0),
                TrainConfig(epochs=2, batch_size=16, lr=1e30)).fit(X, Y)


# ----------------------------------------------------------------------- custom step, second sampler

def test_custom_step_equal_to_default_loss_reproduces_the_default_loop():
    ref = make(epochs=2, augment=True)
    r_ref = ref.fit(X, Y)
    model = build_model("cnn28", num_classes=3, in_channels=1, seed=0)

    def step(x, y, x2, y2, epoch):
        assert x2 is None and y2 is None
        logits = model(x)
        return torch.nn.functional.cross_entropy(logits, y), logits

    tr = Trainer(model, TrainConfig(epochs=2, batch_size=16, lr=0.05, seed=0, augment=True), step=step)
    res = tr.fit(X, Y)
    np.testing.assert_array_equal(tr.predict_logits(X), ref.predict_logits(X))
    assert [h["loss"] for h in res.history] == [h["loss"] for h in r_ref.history]
    # measured on the real step (FlopCounterMode) = the default meta-device count
    assert res.flops == r_ref.flops > 0 and res.steps == r_ref.steps == 6
    assert res.config["trainable"] == "custom" and res.config["sampler"] == "uniform"


def test_second_sampler_draws_a_same_size_batch_from_its_probabilities():
    p = (Y == 2) / np.sum(Y == 2)  # only class 2
    seen = []
    model = build_model("cnn28", num_classes=3, in_channels=1, seed=0)

    def step(x, y, x2, y2, epoch):
        seen.append((len(y), y2.tolist(), tuple(x2.shape), epoch))
        logits = model(x) + 0 * model(x2).sum()
        return torch.nn.functional.cross_entropy(logits, y), logits

    res = Trainer(model, TrainConfig(epochs=2, batch_size=20), step=step).fit(X, Y, second_sampler=p)
    assert [s[0] for s in seen] == [20, 20, 8] * 2
    assert all(set(y2) == {2} and len(y2) == n and shape[0] == n for n, y2, shape, _ in seen)
    assert [s[3] for s in seen] == [0, 0, 0, 1, 1, 1]
    assert res.config["sampler"] == "uniform+second"


def test_custom_step_and_second_sampler_errors():
    step = lambda x, y, x2, y2, epoch: (x.sum(), x.flatten(1)[:, :3])
    cfg = TrainConfig(epochs=1, batch_size=16)
    model = build_model("cnn28", num_classes=3, in_channels=1, seed=0)
    with pytest.raises(InputError, match="^step: .*not both"):
        Trainer(model, cfg, loss_fn=torch.nn.CrossEntropyLoss(), step=step)
    with pytest.raises(InputError, match="^second_sampler: needs a trainer with a step"):
        make().fit(X, Y, second_sampler=np.full(48, 1 / 48))
    tr = Trainer(model, cfg, step=step)
    with pytest.raises(InputError, match="^second_sampler: expected 48 "):
        tr.fit(X, Y, second_sampler=np.full(47, 1 / 47))
    with pytest.raises(InputError, match="^second_sampler: expected 48 "):
        tr.fit(X, Y, second_sampler=np.full(48, 1.0))
    with pytest.raises(InputError, match="^frozen_mode: "):
        tr.fit(X, Y, trainable="classifier", frozen_mode="frozen")


def test_custom_step_may_train_the_classifier_alone():
    model = build_model("cnn28", num_classes=3, in_channels=1, seed=0)
    features = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith("classifier")}
    head = model.classifier.weight.detach().clone()

    def step(x, y, x2, y2, epoch):
        with torch.no_grad():
            f = model.features(x)
        out = model.classifier(f)
        return torch.nn.functional.cross_entropy(out, y), out

    res = Trainer(model, TrainConfig(epochs=1, batch_size=16), step=step).fit(X, Y, trainable="classifier")
    assert all(torch.equal(v, features[k]) for k, v in model.state_dict().items() if k in features)
    assert not torch.equal(model.classifier.weight, head) and res.config["frozen_mode"] == "eval"
    assert all(p.requires_grad for p in model.parameters())  # the caller's flags given back


def test_apply_runs_a_function_on_normalised_batches_like_predict():
    tr = make(eval_batch_size=20)
    tr.fit(X, Y)
    out = tr.apply(X, lambda x: torch.cat([tr.model(x), tr.model.features(x)], 1), width=3 + tr.model.feature_dim)
    np.testing.assert_array_equal(out[:, :3], tr.predict_logits(X))
    np.testing.assert_array_equal(out[:, 3:], tr.features(X))
    # batch(): the normalised float batch that training and prediction feed the model
    x = X[:5].astype(np.float64) / 255
    expect = ((x - (X / 255).mean()) / (X / 255).std()).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(tr.batch(X, np.arange(5)).numpy(), expect, rtol=1e-5, atol=1e-5)


def test_normaliser_with_read_only_arrays_does_not_warn():
    """After a Ray transfer the mean/std arrays are read-only; applying them must neither warn nor
    write to them."""
    import warnings

    mean, std = np.array([0.5, 1.0]), np.array([2.0, 4.0])
    mean.flags.writeable = std.flags.writeable = False
    norm = Normaliser(mean=mean, std=std, dtype="float32")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = norm.apply(torch.ones(1, 2, 2, 2))
    assert torch.allclose(out[0, 0], torch.full((2, 2), 0.25)) and torch.allclose(out[0, 1], torch.zeros(2, 2))


def test_batch_indices_cover_the_epoch_once_and_merge_a_last_single_image():
    from vistabench.learners.sampling import batch_indices

    order = np.random.default_rng(3).permutation(33)
    batches = batch_indices(order, 16)
    assert [len(b) for b in batches] == [16, 17]
    np.testing.assert_array_equal(np.concatenate(batches), order)  # each image once, in order
    assert [len(b) for b in batch_indices(order[:32], 16)] == [16, 16]
    assert [len(b) for b in batch_indices(order[:1], 16)] == [1]


def test_cpu_batches_are_channels_last_with_nchw_values():
    x = RNG.integers(0, 256, (5, 6, 7, 3), dtype=np.uint8)
    tr3 = Trainer(build_model("cnn28", num_classes=3, in_channels=3, seed=0), TrainConfig(epochs=1, batch_size=4))
    tr3.fit(x, np.arange(5) % 3)
    b = tr3.batch(x, np.arange(5))
    assert b.shape == (5, 3, 6, 7) and b.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(b.contiguous(), tr3.normaliser.apply(to_float_nchw(x)))
    # to_float_nchw never aliases the caller's array (the trainer standardises batches in place)
    xf = RNG.normal(size=(2, 4, 4, 3)).astype(np.float32)
    kept = xf.copy()
    for cl in (False, True):
        t = to_float_nchw(xf, channels_last=cl)
        assert t.is_contiguous(memory_format=torch.channels_last if cl else torch.contiguous_format)
        assert np.array_equal(t.permute(0, 2, 3, 1).numpy(), xf)
        t.add_(1.0)
        assert np.array_equal(xf, kept)
