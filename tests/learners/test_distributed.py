"""Data-parallel training (TrainConfig.devices): the same global batch on 2 CPU processes (gloo)
gives one device's weights up to float rounding; batch norm, failures and bad input."""

import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import torch
from torch import nn

from vistabench import epochs
from vistabench.errors import InputError
from vistabench.learners import distributed
from vistabench.learners.trainer import TrainConfig, Trainer

RNG = np.random.default_rng(0)
X = RNG.integers(0, 256, (91, 8, 8, 3), dtype=np.uint8)  # 5 batches of 16 and one of 11 (shards 6 + 5)
Y = np.arange(91) % 4


class Net(nn.Module):
    """No batch norm, no dropout: data parallelism must not change the result."""

    def __init__(self, bn: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        norm = [nn.BatchNorm2d(8)] if bn else []
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), *norm, nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                      nn.Flatten())
        self.classifier = nn.Linear(8, 4)
        self.feature_dim = 8

    def forward(self, x):
        return self.classifier(self.features(x))


def fit(devices, bn=False, **kw):
    hooks = {k: kw.pop(k) for k in ("loss_fn", "callback", "step") if k in kw}
    cfg = TrainConfig(**{"epochs": 3, "batch_size": 16, "lr": 0.1, "threads": 1, "devices": devices, **kw})
    tr = Trainer(Net(bn), cfg, **hooks)
    return tr, tr.fit(X, Y, val=(X[:20], Y[:20]))


def weights(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def test_two_devices_give_one_devices_weights_and_history():
    one, r1 = fit(1)
    two, r2 = fit(2)
    w1, w2 = weights(one.model), weights(two.model)
    assert not torch.equal(w1, weights(Net())), "training changed the weights"
    torch.testing.assert_close(w2, w1, rtol=1e-5, atol=1e-6)
    assert r2.steps == r1.steps == 18
    for a, b in zip(r1.history, r2.history):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
        assert b["train_acc"] == a["train_acc"] and b["lr"] == a["lr"] and b["val_acc"] == a["val_acc"]
    # FLOPs: both ranks' shards together are the one-device batches; images: all ranks'
    assert r2.flops == r1.flops > 0
    assert r2.images_per_second > 0 and r2.config["devices"] == 2 and r2.peak_memory_bytes > 0
    np.testing.assert_allclose(two.predict_logits(X), one.predict_logits(X), rtol=1e-4, atol=1e-5)


def test_a_batch_that_splits_unevenly_still_gives_the_global_gradient():
    one, _ = fit(1, epochs=1, batch_size=15)  # parts of 8 and 7 images, weighted by their sizes
    two, _ = fit(2, epochs=1, batch_size=15)
    torch.testing.assert_close(weights(two.model), weights(one.model), rtol=1e-5, atol=1e-6)


def test_batch_norm_model_trains_end_to_end_and_keeps_its_layers():
    tr, res = fit(2, bn=True, augment=True)
    bn = tr.model.features[1]
    assert type(bn) is nn.BatchNorm2d and int(bn.num_batches_tracked) == 18
    # per-rank statistics on a CPU, averaged over the ranks: finite, moved away from the initial 0 / 1
    assert torch.isfinite(bn.running_mean).all() and bn.running_mean.abs().sum() > 0
    assert all(np.isfinite(h["loss"]) for h in res.history) and np.isfinite(tr.predict_logits(X)).all()


def test_callback_and_listeners_run_once_on_rank_zero_and_stop_every_rank():
    seen, calls = [], []

    def stop_after_two(epoch, metrics):
        calls.append(epoch)
        return epoch == 2

    with epochs.listen(seen.append):
        _, res = fit(2, callback=stop_after_two, epochs=5)
    assert calls == [1, 2] and [e["epoch"] for e in seen] == [1, 2]
    assert res.stopped_early and res.steps == 12


def test_bad_devices_and_batch_size_are_one_line(monkeypatch):
    with pytest.raises(InputError, match="devices: expected an integer >= 1|devices: .*got 0"):
        TrainConfig(devices=0)
    with pytest.raises(InputError, match=r"^batch_size: expected at least devices=4 images \(one per device\), got 2$"):
        Trainer(Net(), TrainConfig(devices=4, batch_size=2))
    from vistabench.protocols.longtail.config import LongtailConfig

    with pytest.raises(InputError, match=r"^batch_size: expected a multiple of devices=2 .*got 15"):
        LongtailConfig.from_dict({"data": "digits", "method": "ce", "imbalance": 10, "devices": 2,
                                  "batch_size": 15})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(InputError, match=r"^devices: 2 CUDA devices from cuda:0 requested but only 1 exist$"):
        Trainer(Net(), TrainConfig(device="cuda", devices=2, batch_size=16))


def test_more_cpu_processes_than_cores_are_allowed_with_one_warning(monkeypatch):
    """``--devices 16`` on a 2-core CPU computes what 16 devices do, only slower: accepted, warned."""
    monkeypatch.setattr(distributed, "cpu_cores", lambda: 2)
    with pytest.warns(UserWarning, match=r"^devices: 16 training processes on 2 CPU core\(s\): they share") as w:
        Trainer(Net(), TrainConfig(devices=16, batch_size=16))
    assert len(w) == 1
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Trainer(Net(), TrainConfig(devices=2, batch_size=16))


def test_a_helper_process_error_reaches_the_caller_as_one_line():
    def loss(logits, y):
        if torch.distributed.get_rank() == 1:
            raise InputError("loss: rank one refuses")
        return nn.functional.cross_entropy(logits, y)

    with pytest.raises(InputError, match="^loss: rank one refuses$"):
        fit(2, loss_fn=loss, epochs=1)

    def broken(logits, y):
        if torch.distributed.get_rank() == 1:
            raise ZeroDivisionError("bug")
        return nn.functional.cross_entropy(logits, y)

    with pytest.raises(RuntimeError, match="devices: a training process failed: ZeroDivisionError: bug"):
        fit(2, loss_fn=broken, epochs=1)
    _, res = fit(2, epochs=1)  # nothing left over: the next fit starts its own group
    assert res.steps == 6


def test_spawned_helpers_get_the_same_result_and_unpicklable_state_is_one_line(monkeypatch):
    monkeypatch.setitem(distributed.START_METHODS, "cpu", "spawn")  # the CUDA way of starting helpers
    one, _ = fit(1, epochs=1)
    two, _ = fit(2, epochs=1)
    torch.testing.assert_close(weights(two.model), weights(one.model), rtol=1e-5, atol=1e-6)
    lock = threading.Lock()

    def loss(logits, y):
        with lock:
            return nn.functional.cross_entropy(logits, y)

    with pytest.raises(InputError, match=r"^devices: the trainer cannot be shipped to spawned processes .*lock"):
        fit(2, loss_fn=loss, epochs=1)


def test_torchrun_processes_join_its_group_and_agree_with_one_device(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import sys, numpy as np, torch
        from vistabench.learners.trainer import TrainConfig, Trainer
        sys.path.insert(0, {__file__.rsplit('/', 1)[0]!r})
        from test_distributed import X, Y, Net, weights
        cfg = TrainConfig(epochs=2, batch_size=16, lr=0.1, threads=1, devices=2)
        tr = Trainer(Net(), cfg)
        res = tr.fit(X, Y)
        if torch.distributed.get_rank() == 0:
            np.save({str(tmp_path / "w.npy")!r}, weights(tr.model).numpy())
            print("steps", res.steps, "world", torch.distributed.get_world_size())
        """))
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                          "--master-port", str(distributed._free_port()), str(script)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "steps 12 world 2" in out.stdout
    one, _ = fit(1, epochs=2)
    torch.testing.assert_close(torch.from_numpy(np.load(tmp_path / "w.npy")), weights(one.model),
                               rtol=1e-5, atol=1e-6)


def test_torchrun_with_another_devices_count_is_one_line(monkeypatch):
    for k, v in dict(RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="2").items():
        monkeypatch.setenv(k, v)
    with pytest.raises(InputError, match=r"^devices: torchrun started 2 processes per node; set devices to 2, got 1$"):
        Trainer(Net(), TrainConfig(batch_size=16))


def test_divergence_is_training_diverged_on_every_rank():
    from vistabench.learners.trainer import TrainingDiverged

    with pytest.raises(TrainingDiverged, match="^lr: training loss became"):
        fit(2, epochs=1, lr=1e30)
