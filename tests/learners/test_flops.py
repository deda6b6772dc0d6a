"""FLOP counts against hand-written analytic counts (multiply-add = 2 FLOPs).

Convention checked here (what FlopCounterMode counts): convolutions and matrix products only;
forward = 2·MACs; backward = gradient w.r.t. the input (= forward) + gradient w.r.t. the weights
(= forward), except the first layer, whose input needs no gradient (weights only).
"""

import numpy as np
import pytest
import torch

from vistabench.errors import InputError
from vistabench.learners.flops import count_forward_flops, count_train_step_flops, flops_by_operator
from vistabench.learners.models import build_model
from vistabench.learners.trainer import TrainConfig, Trainer


def conv_macs(h_out, w_out, c_in, c_out, k):
    return h_out * w_out * c_out * c_in * k * k


def cnn28_layers(size, c_in, w=16, classes=10):
    """MACs per image of each conv/linear layer of cnn28, in order."""
    s1 = size
    s2 = -(-s1 // 2)  # ceil-mode 2x2 max-pool
    s3 = -(-s2 // 2)
    return [conv_macs(s1, s1, c_in, w, 3), conv_macs(s2, s2, w, 2 * w, 3),
            conv_macs(s3, s3, 2 * w, 4 * w, 3), 16 * w * classes]


def resnet32_layers(c_in=3, classes=10):
    layers = [conv_macs(32, 32, c_in, 16, 3)]
    for stage, (size, c) in enumerate([(32, 16), (16, 32), (8, 64)]):
        for block in range(5):
            c_prev = c // 2 if (stage > 0 and block == 0) else c
            layers += [conv_macs(size, size, c_prev, c, 3), conv_macs(size, size, c, c, 3)]
    return layers + [64 * classes]


def analytic(layers, batch):
    fwd = 2 * sum(layers) * batch
    train = fwd + 2 * fwd - 2 * layers[0] * batch  # backward 2x, first layer no input gradient
    return fwd, train


@pytest.mark.parametrize("size,c_in", [(28, 1), (8, 1), (32, 3)])
def test_cnn28_matches_analytic(size, c_in):
    m = build_model("cnn28", num_classes=10, in_channels=c_in)
    fwd, train = analytic(cnn28_layers(size, c_in), 4)
    assert count_forward_flops(m, (c_in, size, size), batch_size=4) == pytest.approx(fwd, rel=0.02)
    assert count_train_step_flops(m, (c_in, size, size), 4) == pytest.approx(train, rel=0.02)


def test_resnet32_matches_analytic():
    m = build_model("resnet32", num_classes=10, in_channels=3)
    fwd, train = analytic(resnet32_layers(), 2)
    got_fwd = count_forward_flops(m, (3, 32, 32), batch_size=2)
    assert got_fwd == pytest.approx(fwd, rel=0.02)
    # the literature's figure: ResNet-32 on CIFAR is ~69M multiply-adds per image
    assert got_fwd / 2 / 2 / 1e6 == pytest.approx(69.0, abs=0.5)
    assert count_train_step_flops(m, (3, 32, 32), 2) == pytest.approx(train, rel=0.02)


def test_classifier_only_step_counts_frozen_forward_plus_head():
    layers = cnn28_layers(8, 1, classes=5)
    m = build_model("cnn28", num_classes=5, in_channels=1)
    got = count_train_step_flops(m, (1, 8, 8), 3, trainable="classifier")
    expected = 2 * sum(layers[:-1]) * 3 + 3 * 2 * layers[-1] * 3
    assert got == pytest.approx(expected, rel=0.02)


def test_counts_scale_linearly_with_batch_and_leave_model_untouched():
    m = build_model("vit_small", num_classes=3, in_channels=1, image_size=8, depth=2, dim=48, heads=4)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    one = count_train_step_flops(m, (1, 8, 8), 1)
    assert count_train_step_flops(m, (1, 8, 8), 5) == 5 * one
    assert count_forward_flops(m, (5, 1, 8, 8)) == 5 * count_forward_flops(m, (1, 8, 8))
    after = m.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is None for p in m.parameters())
    assert next(m.parameters()).device.type == "cpu"


def test_flops_by_operator_names_conv_and_linear():
    m = build_model("cnn28", num_classes=10, in_channels=1).eval()
    by_op = flops_by_operator(lambda: m(torch.zeros(1, 1, 8, 8)))
    layers = cnn28_layers(8, 1)
    assert by_op["convolution"] == 2 * sum(layers[:3])
    assert by_op["addmm"] == 2 * layers[3]


def test_trainer_flops_are_steps_times_step_count():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (40, 8, 8, 1), dtype=np.uint8)
    y = np.arange(40) % 10
    tr = Trainer(build_model("cnn28", num_classes=10, in_channels=1, seed=0),
                 TrainConfig(epochs=2, batch_size=16, seed=0))
    res = tr.fit(x, y, val=(x[:10], y[:10]))
    _, per_image_train = analytic(cnn28_layers(8, 1), 1)
    fwd_per_image, _ = analytic(cnn28_layers(8, 1), 1)
    assert res.steps == 6  # batches of 16, 16, 8 per epoch
    assert res.flops == pytest.approx(2 * 40 * per_image_train, rel=0.02)
    assert res.eval_flops == pytest.approx(2 * 10 * fwd_per_image, rel=0.02)
    off = Trainer(build_model("cnn28", num_classes=10, in_channels=1, seed=0),
                  TrainConfig(epochs=1, batch_size=16, count_flops=False)).fit(x, y)
    assert off.flops == 0


def test_bad_shapes():
    m = build_model("cnn28", num_classes=2, in_channels=1)
    with pytest.raises(InputError, match="input_shape"):
        count_train_step_flops(m, (8, 8), 2)
    with pytest.raises(InputError, match="input_shape"):
        count_train_step_flops(m, (2, 1, 8, 8), 2)
    with pytest.raises(InputError, match="batch_size"):
        count_train_step_flops(m, (1, 8, 8), 0)


def test_counts_are_cached_per_architecture():
    from vistabench.learners import flops

    flops.clear_cache()
    a = build_model("cnn28", num_classes=10, in_channels=1, seed=0)
    b = build_model("cnn28", num_classes=10, in_channels=1, seed=1)  # other weights, same architecture
    wide = build_model("cnn28", num_classes=10, in_channels=1, width=8)
    fa = count_train_step_flops(a, (1, 8, 8), 4)
    assert len(flops._CACHE) == 1
    assert count_train_step_flops(b, (1, 8, 8), 4) == fa and len(flops._CACHE) == 1
    fw = count_train_step_flops(wide, (1, 8, 8), 4)
    assert len(flops._CACHE) == 2 and fw == pytest.approx(analytic(cnn28_layers(8, 1, w=8), 4)[1], rel=0.02)
    count_train_step_flops(a, (1, 8, 8), 4, loss_fn=torch.nn.CrossEntropyLoss(label_smoothing=0.1))
    assert len(flops._CACHE) == 3


def test_stream_ledger_uses_the_one_cache_and_tells_two_loss_closures_apart():
    """The stream's compute ledger keys nothing itself: two closures of the same type whose steps
    cost differently are charged differently (a second cache keyed by the loss's type name charged
    the first one's count for both)."""
    from vistabench.learners.stream.base import ComputeLedger

    model = build_model("cnn28", num_classes=5, in_channels=1, image_size=28)
    proj = torch.nn.Linear(5, 5)

    def plain(logits, targets):
        return torch.nn.functional.cross_entropy(logits, targets)

    def projected(logits, targets):  # one more matrix product in the step
        return torch.nn.functional.cross_entropy(proj(logits), targets)

    ledger = ComputeLedger()
    a = ledger.charge_train(model, (1, 28, 28), 8, steps=1, loss_fn=plain)
    b = ledger.charge_train(model, (1, 28, 28), 8, steps=1, loss_fn=projected)
    assert a == count_train_step_flops(model, (1, 28, 28), 8, loss_fn=plain)
    assert b == count_train_step_flops(model, (1, 28, 28), 8, loss_fn=projected)
    assert b > a
