"""The trainer's data sources: memory, stream (DataLoader workers) and device give the same batches
and the same trained weights for the same seed on the CPU, from arrays and from image files."""

import dataclasses

import numpy as np
import pytest
import torch
from PIL import Image

from vistabench.data.augment import Augmentation
from vistabench.data.image_files import ImageFiles
from vistabench.errors import InputError
from vistabench.learners.models import build_model
from vistabench.learners.trainer import Trainer, TrainConfig


def _data(n=40, size=8):
    rng = np.random.default_rng(3)
    return rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8), np.arange(n) % 4


def _files(tmp_path, images):
    paths = []
    for i, a in enumerate(images):
        paths.append(str(tmp_path / f"{i}.png"))
        Image.fromarray(a).save(paths[-1])
    return ImageFiles(paths, size=images.shape[1:3])


def _recorded_fit(images, labels, augment=True, predict=None, **cfg):
    """(the normalised batches every step saw, the trained model's logits on ``predict``, default
    ``images``). Compare logits of the same kind of input: image files are predicted in training-sized
    batches and arrays in ``eval_batch_size`` ones, and on some CPUs a row's logits differ in the last
    bits with the batch it was computed in (test_image_files_are_predicted_in_training_sized_batches)."""
    model = build_model("cnn28", num_classes=4, in_channels=3, seed=0)
    seen = []

    def step(x, y, x2, y2, epoch):
        seen.append(x.detach().clone())
        if x2 is not None:
            seen.append(x2.detach().clone())
        logits = model(x)
        return torch.nn.functional.cross_entropy(logits, y), logits

    tr = Trainer(model, TrainConfig(epochs=2, batch_size=16, lr=0.05, seed=5, augment=augment, count_flops=False,
                                    **cfg), step=step)
    tr.fit(images, labels, sampler="class_balanced")
    return seen, tr.predict_logits(images if predict is None else predict)


def _same(a, b):
    (xa, la), (xb, lb) = a, b
    assert len(xa) == len(xb) and len(xa) > 2
    for u, v in zip(xa, xb):
        assert torch.equal(u, v)
    assert np.array_equal(la, lb)


@pytest.mark.parametrize("augment", [True, Augmentation(crop="resized", min_scale=0.5, hflip=True, vflip=True)])
def test_every_source_gives_the_same_batches_and_weights(augment):
    x, y = _data()
    ref = _recorded_fit(x, y, augment=augment)
    _same(ref, _recorded_fit(x, y, augment=augment, loader="stream", workers=0))
    _same(ref, _recorded_fit(x, y, augment=augment, loader="stream", workers=2))
    _same(ref, _recorded_fit(x, y, augment=augment, loader="device"))


def test_image_files_give_the_batches_of_the_same_pixels_in_memory(tmp_path):
    x, y = _data(24)
    files = _files(tmp_path, x)  # PNG: lossless, so the decoded pixels are the arrays'
    ref = _recorded_fit(x, y)
    for loader, workers in (("memory", 0), ("stream", 2), ("device", 0)):
        # the same batches, then the same weights: their logits on the arrays are the same bits
        _same(ref, _recorded_fit(files, y, predict=x, loader=loader, workers=workers))


def test_second_sampler_batches_match_across_sources():
    x, y = _data(32)
    p = np.full(32, 1 / 32)

    def run(**cfg):
        model = build_model("cnn28", num_classes=4, in_channels=3, seed=0)
        seen = []

        def step(a, b, a2, b2, epoch):
            seen.append(torch.cat([a, a2]).detach().clone())
            logits = model(a)
            return torch.nn.functional.cross_entropy(logits, b) + 0 * model(a2).sum(), logits

        Trainer(model, TrainConfig(epochs=1, batch_size=8, augment=True, count_flops=False, **cfg),
                step=step).fit(x, y, second_sampler=p)
        return seen

    ref = run()
    for cfg in ({"loader": "device"}, {"loader": "stream", "workers": 1}):
        assert all(torch.equal(u, v) for u, v in zip(ref, run(**cfg), strict=True))


def test_the_default_memory_path_is_unchanged_by_the_sources():
    """loader memory is what fit always did: the same logits as a hand-written loop of the same batches."""
    x, y = _data(32)
    tr = Trainer(build_model("cnn28", num_classes=4, in_channels=3, seed=0),
                 TrainConfig(epochs=1, batch_size=16, seed=1, count_flops=False))
    base = tr.fit(x, y)
    assert base.config["loader"] == "memory" and base.config["workers"] == 0
    model = build_model("cnn28", num_classes=4, in_channels=3, seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    order = np.random.default_rng(1).permutation(32)
    with torch.random.fork_rng():
        torch.manual_seed(1)
        model.train()
        for step, b in enumerate((order[:16], order[16:])):
            for g in opt.param_groups:
                g["lr"] = tr.lr_at(step, 2, 2)
            xb = tr.batch(x, b)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), torch.from_numpy(y[b])).backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(tr.batch(x, slice(None))), torch.from_numpy(tr.predict_logits(x)))


def test_loader_and_workers_are_checked():
    with pytest.raises(InputError, match="loader: expected one of memory, stream, device, got 'disk'"):
        TrainConfig(loader="disk")
    with pytest.raises(InputError, match="workers"):
        TrainConfig(workers=-1)


def test_device_loader_refuses_a_trainer_that_converts_batches_itself():
    class Own(Trainer):
        def batch(self, images, idx, gen=None):
            return super().batch(images, idx, gen)

    x, y = _data(16)
    tr = Own(build_model("cnn28", num_classes=4, in_channels=3, seed=0), TrainConfig(epochs=1, batch_size=8,
                                                                                     loader="device"))
    with pytest.raises(InputError, match="loader: 'device' converts batches itself; Own overrides"):
        tr.fit(x, y)


def test_a_corrupt_file_read_by_a_worker_is_one_line(tmp_path):
    x, y = _data(16)
    files = _files(tmp_path, x)
    (tmp_path / "5.png").write_bytes(b"broken")
    tr = Trainer(build_model("cnn28", num_classes=4, in_channels=3, seed=0),
                 TrainConfig(epochs=1, batch_size=8, loader="stream", workers=1))
    tr.normaliser = None
    with pytest.raises(InputError, match=r"^image '.*5.png': not a readable image") as e:
        tr.fit(files, y, normaliser=_normaliser(x))
    assert "\n" not in str(e.value)


def _normaliser(x):
    from vistabench.learners.tensors import Normaliser

    return Normaliser.fit(x)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_device_source_on_cuda_matches_memory_on_cuda():  # pragma: no cover - GPU only
    x, y = _data()
    a = _recorded_fit(x, y, device="cuda")
    b = _recorded_fit(x, y, device="cuda", loader="device")
    for u, v in zip(a[0], b[0], strict=True):
        assert torch.allclose(u, v)


@pytest.mark.parametrize("loader,workers", [("memory", 0), ("stream", 0), ("stream", 2)])
def test_image_files_are_predicted_in_training_sized_batches(tmp_path, loader, workers, monkeypatch):
    """Prediction on files never decodes more than a training batch at once (memory bounded whatever
    the test set's size) and arrays keep eval_batch_size. Files and arrays predicted in batches of one
    size give the same bits; across batch sizes a row's logits may differ in the last bits on some
    CPUs (the convolutions split their work by the batch: up to 1.5e-7 for cnn28 on a 2-core
    Xeon), so there they are compared to float32 rounding."""
    x, y = _data(40)
    files = _files(tmp_path, x)
    tr = Trainer(build_model("cnn28", num_classes=4, in_channels=3, seed=0),
                 TrainConfig(epochs=1, batch_size=16, seed=1, count_flops=False, loader=loader, workers=workers))
    tr.fit(x, y)
    assert tr.eval_batch(files) == 16 and tr.eval_batch(x) == 512
    sizes = []
    real = Trainer.batch
    monkeypatch.setattr(Trainer, "batch", lambda self, im, idx, gen=None: sizes.append(len(im[idx])) or real(self, im, idx, gen))
    from_files = tr.predict_logits(files)
    assert sizes == [16, 16, 8]
    in_512 = tr.predict_logits(x)
    assert sizes[3:] == [40]
    np.testing.assert_allclose(from_files, in_512, rtol=0, atol=1e-5)
    tr.cfg = dataclasses.replace(tr.cfg, eval_batch_size=16)  # arrays in the files' batches: the same bits
    assert np.array_equal(from_files, tr.predict_logits(x)) and sizes[4:] == [16, 16, 8]
