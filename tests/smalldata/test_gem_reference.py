"""gem's behaviour (lorenzobrigato/gem) is the default under the gem recipe: each item of issue 22's
small-data list, with the reference logic re-written here on generated data."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from vistabench.learners.models import build_model
from vistabench.learners.smalldata.build import build_method
from vistabench.learners.recipe import Recipe
from vistabench.learners.smalldata.dskn import DSKNCompositeLoss, DSKNCompositeModel
from vistabench.learners.smalldata.harmonic import HarmonicConv2d, dct_filters
from vistabench.learners.trainer import TrainConfig, Trainer


def test_dskn_loss_is_gems_three_term_formula():
    model, loss = build_method("dskn", Recipe(model="cnn28"), {}, num_classes=4, in_channels=1, image_size=8, seed=0)
    assert isinstance(model, DSKNCompositeModel) and isinstance(loss, DSKNCompositeLoss)
    assert isinstance(model.projection, nn.Linear) and model.classifier.in_features == model.feature_dim
    model.train()
    x, y = torch.randn(6, 1, 8, 8), torch.tensor([0, 1, 2, 3, 0, 1])
    z = model(x)
    f = model.last_features
    c = loss.centres.detach()
    # gem: PositiveClassLoss (−log σ(z_y) + 1 − z_y/‖z‖) + 0.5 · CenterLoss (2 − 2 cos(f, c_y), clamped)
    zy = z.detach()[torch.arange(6), y]
    pcl = (-torch.log(torch.sigmoid(zy))).mean() + (1 - zy / z.detach().norm(dim=1)).mean()
    cos = (F.normalize(f.detach(), dim=1) * F.normalize(c, dim=1)[y]).sum(1)
    want = pcl + 0.5 * (2 - 2 * cos).clamp(1e-12, 1e12).mean()
    assert loss(z, y).item() == pytest.approx(want.item(), rel=1e-6)


def test_dskn_centres_take_sgd_steps_of_lr_half():
    model, loss = build_method("dskn", Recipe(model="cnn28"), {}, num_classes=3, in_channels=1, image_size=8, seed=1)
    model.train()
    x, y = torch.randn(4, 1, 8, 8), torch.tensor([0, 1, 2, 0])
    loss(model(x), y).backward()
    c0, g = loss.centres.detach().clone(), loss.centres.grad.clone()
    assert g.abs().sum() > 0
    loss(model(x), y)  # the next forward applies the pending step first
    torch.testing.assert_close(loss.centres.detach(), c0 - 0.5 * g)


def test_dskn_ce_option_and_vit_refused():
    _, loss = build_method("dskn", Recipe(model="cnn28"), {"loss": "ce"}, num_classes=3, in_channels=1, image_size=8, seed=0)
    assert loss is None
    from vistabench.errors import InputError

    with pytest.raises(InputError, match="model: method 'dskn' .* 'vit_small' has none"):
        build_method("dskn", Recipe(model="vit_small"), {}, num_classes=3, in_channels=3, image_size=16, seed=0)


def test_cosine_ce_predicts_from_relu_bn_head():
    model, loss = build_method("cosine_ce", Recipe(model="cnn28"), {"xent_weight": 0.1}, num_classes=3, in_channels=1,
                               image_size=8, seed=0)
    model.eval()
    x = torch.randn(5, 1, 8, 8)
    with torch.no_grad():
        z = model.base(x)
        zn = z / z.norm(dim=1, keepdim=True)
        want = model.xent_head(model.bn(torch.relu(zn)))  # gem's CosineXentModel
        torch.testing.assert_close(model(x), want)
    model.train()
    y = torch.tensor([0, 1, 2, 0, 1])
    out = model(x)
    z = model.last_embedding
    ref = (1 - F.normalize(z, dim=1)[torch.arange(5), y]).mean() + 0.1 * F.cross_entropy(out, y)
    assert loss(out, y).item() == pytest.approx(ref.item(), rel=1e-6)


def test_harmonic_l1_filters_all_k2_and_bn_on_the_first_layer():
    k = 3
    filt = dct_filters(k, normalisation="l1")
    assert filt.shape == (9, 3, 3)
    for u in range(k):
        for v in range(k):  # gem's dct_filters: cos(π(x+½)u/k)·cos(π(y+½)v/k) / Σ|·|
            ref = np.array([[math.cos(math.pi * (x + .5) * u / k) * math.cos(math.pi * (y + .5) * v / k)
                             for y in range(k)] for x in range(k)])
            ref /= np.abs(ref).sum()
            assert any(np.allclose(f.numpy(), ref, atol=1e-6) for f in filt)
    model, _ = build_method("harmonic", Recipe(model="resnet18"), {}, num_classes=3, in_channels=3, image_size=32, seed=0)
    harm = [m for m in model.modules() if isinstance(m, HarmonicConv2d)]
    assert harm[0] is model.stem[0] and isinstance(harm[0].bn, nn.BatchNorm2d) and not harm[0].bn.affine
    assert all(h.bn is None for h in harm[1:]) and all(h.m == 9 for h in harm)
    # gem's Harm2d weight (out, in, 9, 1, 1), kaiming_normal_(mode="fan_out"): std √(2 / (out · 9)); the
    # BN layer's (out, in·9, 1, 1): std √(2 / out)
    big = max(harm[1:], key=lambda h: h.mix.weight.numel())
    assert float(big.mix.weight.detach().std()) == pytest.approx(math.sqrt(2 / (big.out_channels * 9)), rel=0.05)
    first = harm[0].mix.weight.detach()
    assert float(first.std()) == pytest.approx(math.sqrt(2 / harm[0].out_channels), rel=0.15)
    conv, _ = build_method("harmonic", Recipe(model="resnet18"), {"mix_init": "conv"}, num_classes=3, in_channels=3, image_size=32,
                           seed=0)
    big = max((m for m in conv.modules() if isinstance(m, HarmonicConv2d)), key=lambda h: h.mix.weight.numel())
    assert float(big.mix.weight.detach().std()) == pytest.approx(math.sqrt(2 / big.out_channels), rel=0.05)


def test_fconv_turns_the_imagenet_max_pool_into_2x2_stride_2():
    model, _ = build_method("fconv", Recipe(model="resnet18"), {}, num_classes=3, in_channels=3, image_size=128, seed=0)
    pool = [m for m in model.modules() if isinstance(m, nn.MaxPool2d)]
    assert len(pool) == 1 and (pool[0].kernel_size, pool[0].stride, pool[0].padding) == (2, 2, 0)
    model, _ = build_method("fconv", Recipe(model="resnet18"), {"maxpool": "3x3"}, num_classes=3, in_channels=3, image_size=128,
                            seed=0)
    assert [m.kernel_size for m in model.modules() if isinstance(m, nn.MaxPool2d)] == [3]


def test_eurosat_gets_the_imagenet_stem_under_gem():
    from vistabench.protocols.smalldata.config import SmalldataConfig
    from vistabench.protocols.smalldata.core import stem_model_options

    cfg = SmalldataConfig.from_dict({"dataset": "eurosat:/d", "method": "ce"})
    model = build_model("resnet50", num_classes=10, in_channels=13, image_size=64,
                        **stem_model_options("resnet50", cfg.stem))
    conv, pool = model.stem[0], model.stem[3]
    assert (conv.kernel_size, conv.stride, conv.in_channels) == ((7, 7), (2, 2), 13)
    assert isinstance(pool, nn.MaxPool2d)


def test_gem_fixes_dhn_ole_tvmf_options():
    from vistabench.protocols.smalldata.config import SmalldataConfig

    got = {m: SmalldataConfig.from_dict({"dataset": "digits", "method": m}).method_options.to_dict()
           for m in ("dhn", "ole", "tvmf")}
    assert got == {"dhn": {"scattering_J": 3, "hybrid_stem": "gem", "input_crop": "gem"}, "ole": {"ole_weight": 0.25},
                   "tvmf": {"kappa": 16.0}}


def _data():
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (40, 8, 8, 1), dtype=np.uint8), np.arange(40) % 4


def test_dvp_student_starts_from_the_teacher_and_ce_only_for_4_epochs():
    x, y = _data()
    model, loss = build_method("dvp", Recipe(model="cnn28"), {"distill_weight": 0.1}, num_classes=4, in_channels=1,
                               image_size=8, seed=0)
    seen = {}
    orig = loss.before_fit

    def spy(trainer, images, labels):
        out = orig(trainer, images, labels)
        seen["student"] = {k: v.clone() for k, v in model.base.state_dict().items()}
        seen["teacher"] = {k: v.clone() for k, v in loss.teacher.state_dict().items()}
        return out

    loss.before_fit = spy
    tr = Trainer(model, TrainConfig(epochs=1, lr=0.01, batch_size=10, count_flops=False), loss_fn=loss)
    tr.fit(x, y)
    assert seen["student"].keys() == seen["teacher"].keys()
    assert all(torch.equal(seen["student"][k], seen["teacher"][k]) for k in seen["student"])
    assert loss._start == 4  # gem: epochs 1..4 (1-based) CE only
    model.train()
    xb = tr.batch(x, np.arange(10))
    logits = model(xb)
    loss.set_epoch(3)
    assert loss(logits, torch.tensor(y[:10])).item() == pytest.approx(
        F.cross_entropy(logits, torch.tensor(y[:10])).item())


def test_auxilearn_meta_step_follows_the_primary_step_on_a_fresh_batch():
    x, y = _data()
    cfg = {"aux_scale": 0.5, "auxgrad_every": 2, "num_aux_classes": 3, "aux_set_size": 0.2}
    model, loss = build_method("auxilearn", Recipe(model="cnn28"), cfg, num_classes=4, in_channels=1, image_size=8, seed=0)
    calls = []
    orig = loss._meta_step

    def spy(xm, ym):
        calls.append((loss._step, xm.shape[0]))
        return orig(xm, ym)

    loss._meta_step = spy
    tr = Trainer(model, TrainConfig(epochs=1, lr=0.05, batch_size=8, count_flops=False), loss_fn=loss)
    tr.fit(x, y)
    # 4 primary steps; due after steps 2 and 4: the one after step 2 runs before step 3's loss (the last
    # one, after step 4, would only change φ after training)
    assert calls == [(2, 8)] and loss._pending
    assert loss._aug_gen is None  # digits: no augmentation configured, so none for the auxiliary batch either


def test_print_config_shows_grad_l2_weight_decay_range_and_the_dhn_stem(capsys):
    import json

    from vistabench.cli import main

    assert main(["smalldata", "run", "--dataset", "digits", "--method", "grad_l2", "--print-config", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["method_options"]["weight_decay"] == {"loguniform": [1e-5, 0.1]}
    assert main(["smalldata", "run", "--dataset", "digits", "--method", "grad_l2", "--recipe", "vistabench",
                 "--print-config", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["method_options"]["weight_decay"] == 0.0
    assert main(["smalldata", "run", "--dataset", "digits", "--method", "dhn", "--print-config", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["method_options"]["hybrid_stem"] == "gem"
