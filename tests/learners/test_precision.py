"""Mixed precision on the shared trainer: bf16 autocast on a CPU, fp16/compile refused there."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vistabench.errors import InputError
from vistabench.learners.models import build_model
from vistabench.learners.trainer import Trainer, TrainConfig


def _data():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (48, 8, 8, 1), dtype=np.uint8)
    return x, np.arange(48) % 3


def _fit(**kw):
    x, y = _data()
    tr = Trainer(build_model("cnn28", num_classes=3, in_channels=1, seed=0, width=4),
                 TrainConfig(epochs=2, batch_size=16, lr=0.05, seed=0, **kw))
    return tr, tr.fit(x, y), x


def test_bf16_runs_under_autocast_on_cpu():
    seen = []
    tr, res, x = _fit(precision="bf16")
    hook = tr.model.classifier.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    logits = tr.predict_logits(x)
    hook.remove()
    assert seen and seen[0] == torch.bfloat16  # the forward ran in bfloat16
    assert logits.dtype == np.float32 and np.isfinite(logits).all()
    assert all(p.dtype == torch.float32 for p in tr.model.parameters())  # weights stay float32
    assert res.config["precision"] == "bf16" and np.isfinite(res.history[-1]["loss"])
    _, fp32, _ = _fit()
    assert res.history[-1]["loss"] != fp32.history[-1]["loss"]  # a different arithmetic, not a no-op


def test_fp32_is_the_default_and_bitwise_reproducible():
    a, ra, x = _fit()
    b, rb, _ = _fit(precision="fp32")
    assert ra.config["precision"] == "fp32"
    assert [h["loss"] for h in ra.history] == [h["loss"] for h in rb.history]
    assert np.array_equal(a.predict_logits(x), b.predict_logits(x))
    assert a._forward is a.model  # no wrapper on the fp32 path


@pytest.mark.parametrize("kw, message", [
    ({"precision": "fp8"}, "precision: expected one of fp32, bf16, fp16"),
    ({"compile": "maybe"}, "compile: expected true or false"),  # "yes"/"no" read as config text does
])
def test_bad_values_name_the_field(kw, message):
    with pytest.raises(InputError, match=message):
        TrainConfig(**kw)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU refusals")
@pytest.mark.parametrize("kw, message", [
    ({"precision": "fp16"}, "precision: fp16 needs a CUDA device"),
    ({"compile": True}, "compile: true needs a CUDA device"),
])
def test_cuda_only_settings_refused_on_cpu(kw, message):
    with pytest.raises(InputError, match=message):
        Trainer(build_model("cnn28", num_classes=3, in_channels=1), TrainConfig(**kw))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_mixed_precision_on_cuda(precision):
    tr, res, x = _fit(precision=precision, device="cuda")
    assert np.isfinite(res.history[-1]["loss"]) and np.isfinite(tr.predict_logits(x)).all()
