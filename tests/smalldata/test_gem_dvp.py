"""DVP under --recipe gem follows gem's code (lorenzobrigato/gem, pipelines/distill_visual_priors/):
gem's logic re-written here and compared with ours on generated data."""

import colorsys
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import norm
from torch import nn

from vistabench.data.augment import Augmentation
from vistabench.errors import InputError
from vistabench.learners.models import Bottleneck, ResNet, WideResNet, build_model
from vistabench.learners.smalldata.build import build_method
from vistabench.learners.recipe import Recipe
from vistabench.learners.smalldata.dvp import DVPLoss, bn_margin
from vistabench.learners.smalldata.dvp_stages import bn_before_relu, forward_stages
from vistabench.learners.smalldata.moco import (ColourAugmentation, MoCoViews, SplitBatchNorm2d, colour_jitter,
                                                enqueue, gaussian_blur, use_split_batchnorm)
from vistabench.learners.smalldata.options import DvpOptions
from vistabench.learners.trainer import TrainConfig, Trainer


# ------------------------------------------------------------------ gem's code, re-written
def gem_distillation_loss(source, target, margin):
    loss = ((source - margin) ** 2 * ((source > margin) & (target <= margin)).float() +
            (source - target) ** 2 * ((source > target) & (target > margin) & (target <= 0)).float() +
            (source - target) ** 2 * (target > 0).float())
    return torch.abs(loss).sum()


def gem_margin_from_bn(bn):
    margin = []
    for s, m in zip(bn.weight.data, bn.bias.data):
        s, m = abs(s.item()), m.item()
        if norm.cdf(-m / s) > 0.001:
            margin.append(- s * math.exp(- (m / s) ** 2 / 2) / math.sqrt(2 * math.pi) / norm.cdf(-m / s) + m)
        else:
            margin.append(-3 * s)
    return torch.FloatTensor(margin)


class GemSplitBatchNorm(nn.BatchNorm2d):
    def __init__(self, num_features, num_splits, **kw):
        super().__init__(num_features, **kw)
        self.num_splits = num_splits

    def forward(self, input):
        N, C, H, W = input.shape
        rm = self.running_mean.repeat(self.num_splits)
        rv = self.running_var.repeat(self.num_splits)
        out = F.batch_norm(input.view(-1, C * self.num_splits, H, W), rm, rv, self.weight.repeat(self.num_splits),
                           self.bias.repeat(self.num_splits), True, self.momentum, self.eps).view(N, C, H, W)
        self.running_mean.data.copy_(rm.view(self.num_splits, C).mean(dim=0))
        self.running_var.data.copy_(rv.view(self.num_splits, C).mean(dim=0))
        return out


def gem_enqueue(queue, ptr, keys):  # queue (dim, K), as gem's _dequeue_and_enqueue_single_gpu
    b = keys.shape[0]
    assert queue.shape[1] % b == 0
    queue[:, ptr:ptr + b] = keys.t()
    return (ptr + b) % queue.shape[1]


def _data(n=40, c=1, size=8):
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (n, size, size, c), dtype=np.uint8), np.arange(n) % 4


# ------------------------------------------------------------------------------ distillation
def test_margin_term_fires_on_a_constructed_case():
    s = torch.tensor([0.5, 0.5, -2.0, 1.0, 0.1])
    t = torch.tensor([-2.0, -0.3, -2.0, 2.0, -0.5])
    m = torch.tensor(-0.8)
    # element 0: t <= m < s -> (s - m)^2 = 1.3^2; element 1: m < t <= 0 < s -> (s - t)^2 = 0.8^2;
    # element 2: s below m -> 0; element 3: t > 0 -> 1; element 4: s > t > m -> 0.6^2
    want = 1.3 ** 2 + 0.8 ** 2 + 0 + 1.0 + 0.6 ** 2
    from vistabench.learners.smalldata.dvp import distillation_loss
    assert distillation_loss(s, t, m).item() == pytest.approx(want)
    assert gem_distillation_loss(s, t, m).item() == pytest.approx(want)


def test_margins_from_the_initial_bn_as_gem_builds_them():
    model, loss = build_method("dvp", Recipe(model="cnn28"), {"distill_weight": 1e-4}, num_classes=4, in_channels=1,
                               image_size=8, seed=0)
    assert loss.num_maps == 3
    for bn, m in zip(bn_before_relu(loss.teacher), loss.margins):
        torch.testing.assert_close(m.flatten(), gem_margin_from_bn(bn))  # fresh BN: γ 1, β 0
        torch.testing.assert_close(m.flatten(), torch.full((bn.num_features,), -math.sqrt(2 / math.pi)))
    bn = nn.BatchNorm2d(6)
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([1.0, -0.5, 2.0, 0.3, 1.0, 0.1]))
        bn.bias.copy_(torch.tensor([0.0, 0.4, -1.0, 2.0, 5.0, -0.2]))  # 5.0: the −3σ branch
    torch.testing.assert_close(bn_margin(bn).flatten(), gem_margin_from_bn(bn))


_BACKBONES = {
    "cnn28": lambda: build_model("cnn28", num_classes=3, in_channels=3, image_size=32),
    "resnet32": lambda: build_model("resnet32", num_classes=3, in_channels=3, image_size=32),
    "resnet18_small": lambda: build_model("resnet18", num_classes=3, in_channels=3, image_size=32),
    "resnet18_imagenet_stem": lambda: build_model("resnet18", num_classes=3, in_channels=3, image_size=32,
                                                  small_input=False),
    "bottleneck_resnet": lambda: ResNet(Bottleneck, (1, 1, 1, 1), 3, 3, small_input=True),
    "wrn10_1": lambda: WideResNet(3, 3, depth=10, widen=1),
}


@pytest.mark.parametrize("name", sorted(_BACKBONES))
def test_stage_maps_are_pre_relu_and_give_the_backbones_features(name):
    torch.manual_seed(0)
    model = _BACKBONES[name]().eval()
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        maps, f = forward_stages(model, x)
        torch.testing.assert_close(f, model.features(x))
    assert len(maps) == (4 if "resnet18" in name or "bottleneck" in name else 3)
    assert all((m < 0).any() for m in maps)  # before the ReLU
    assert [m.shape[1] for m in maps] == [bn.num_features for bn in bn_before_relu(model)]
    if "wrn" in name:  # gem's WideResNetOFD: the stage output through the next BN
        with torch.no_grad():
            x1 = model.blocks[0](model.conv1(x))
            torch.testing.assert_close(maps[0], model.blocks[1].bn1(x1))
    elif name != "cnn28":  # the ReLU of the stage's last block comes after the map
        with torch.no_grad():
            stem = model.stem(x) if hasattr(model, "stem") else F.relu(model.bn1(model.conv1(x)))
            first = model.stages[0] if hasattr(model, "stages") else model.layers[:5]
            torch.testing.assert_close(F.relu(maps[0]), first(stem))


def test_distillation_loss_is_gems_distiller_with_the_teacher_in_train_mode():
    x, y = _data()
    model, loss = build_method("dvp", Recipe(model="cnn28"), {"distill_weight": 0.1}, num_classes=4, in_channels=1,
                               image_size=8, seed=0)
    tr = Trainer(model, TrainConfig(epochs=1, lr=0.01, batch_size=10, count_flops=False), loss_fn=loss)
    tr.fit(x, y)
    assert all(type(m) is nn.BatchNorm2d for m in loss.teacher.modules() if isinstance(m, nn.BatchNorm2d))
    model.train()
    loss.set_epoch(4)  # gem: distillation from epoch 5 (1-based) on
    xb, yb = tr.batch(x, np.arange(10)), torch.tensor(y[:10])
    logits = model(xb)
    # gem's Distiller.forward: teacher and student pre-ReLU maps, connectors, 1/2^(S-1-i) weights
    s_maps, _ = forward_stages(model.base, xb)
    loss.teacher.train()  # gem: t_net.train() while distilling
    with torch.no_grad():
        t_maps, _ = forward_stages(loss.teacher, xb)
    n_maps = len(t_maps)
    dist = sum(gem_distillation_loss(conn(s), t.detach(), m) / 2 ** (n_maps - i - 1)
               for i, (conn, s, t, m) in enumerate(zip(model.connectors, s_maps, t_maps, loss.margins)))
    want = F.cross_entropy(logits, yb) + 0.1 * (dist.sum() / len(xb))
    got = loss(logits, yb)
    assert loss.teacher.training
    assert got.item() == pytest.approx(want.item(), rel=1e-5)
    # the margin term fires: teacher values at or below the margin where the student's are above it
    _, s_conn = model.last
    fired = sum(int(((s > m) & (t <= m)).sum()) for s, t, m in zip(s_conn, t_maps, loss.margins))
    assert fired > 0


def test_vit_is_refused_for_stage_distillation():
    with pytest.raises(InputError, match="distill_features=pooled"):
        build_method("dvp", Recipe(model="vit_small"), {"distill_weight": 1e-4}, num_classes=4, in_channels=3, image_size=32,
                     seed=0)


# ------------------------------------------------------------------------------ augmentation
def _ref_jitter_one(img, factors, order):
    """torchvision's tensor ColorJitter on one (3, H, W) image, hue by colorsys per pixel."""
    img = img.clone()
    grey = lambda z: 0.2989 * z[0] + 0.587 * z[1] + 0.114 * z[2]  # noqa: E731
    for op in order.tolist():
        f = float(factors[op])
        if op == 0:
            img = (f * img).clamp(0, 1)
        elif op == 1:
            img = (f * img + (1 - f) * grey(img).mean()).clamp(0, 1)
        elif op == 2:
            img = (f * img + (1 - f) * grey(img)[None]).clamp(0, 1)
        else:
            out = torch.empty_like(img)
            for i in range(img.shape[1]):
                for j in range(img.shape[2]):
                    h, s, v = colorsys.rgb_to_hsv(*img[:, i, j].double().tolist())
                    out[:, i, j] = torch.tensor(colorsys.hsv_to_rgb((h + f) % 1.0, s, v))
            img = out
    return img


def test_colour_augmentation_is_moco_v2s_with_gems_probabilities():
    gem = DvpOptions.for_recipe("gem")
    assert (gem.jitter_prob, gem.grayscale_prob, gem.blur_prob) == (0.8, 0.2, 0.5)  # gem's prob_* defaults
    aug = ColourAugmentation(jitter_prob=gem.jitter_prob, grayscale_prob=gem.grayscale_prob, blur_prob=gem.blur_prob)
    assert aug.strength == (0.4, 0.4, 0.4, 0.1) and aug.sigma == (0.1, 2.0)
    d = aug.draw(20000, torch.Generator().manual_seed(0))
    assert d.jitter.float().mean().item() == pytest.approx(0.8, abs=0.01)
    assert d.grey.float().mean().item() == pytest.approx(0.2, abs=0.01)
    assert d.blur.float().mean().item() == pytest.approx(0.5, abs=0.01)
    lo, hi = d.factors.min(0).values, d.factors.max(0).values
    assert torch.all(lo >= torch.tensor([0.6, 0.6, 0.6, -0.1], dtype=lo.dtype))
    assert torch.all(hi <= torch.tensor([1.4, 1.4, 1.4, 0.1], dtype=hi.dtype))
    assert (d.sigma.min() >= 0.1) and (d.sigma.max() <= 2.0)
    assert all(sorted(o.tolist()) == [0, 1, 2, 3] for o in d.order[:50])  # a random order per image
    assert not ColourAugmentation(jitter_prob=0, grayscale_prob=0, blur_prob=0).active
    v = DvpOptions.for_recipe("vistabench")
    assert (v.jitter_prob, v.grayscale_prob, v.blur_prob, v.moco_splits) == (0.0, 0.0, 0.0, 1)


def test_colour_jitter_matches_torchvisions_formulas():
    g = torch.Generator().manual_seed(1)
    x = torch.rand(3, 3, 4, 5, generator=g)
    d = ColourAugmentation().draw(3, g)
    got = colour_jitter(x, d.factors.float(), d.order)
    for i in range(3):
        torch.testing.assert_close(got[i], _ref_jitter_one(x[i], d.factors[i], d.order[i]), atol=1e-5, rtol=0)
    # one channel: saturation and hue leave it as it is; brightness and contrast act
    x1 = torch.rand(2, 1, 4, 4, generator=g)
    f = torch.tensor([[1.2, 0.7, 1.3, 0.05], [0.8, 1.1, 0.6, -0.05]])
    order = torch.tensor([[3, 2, 0, 1], [1, 0, 2, 3]])
    want = torch.stack([((0.7 * (1.2 * x1[0]).clamp(0, 1) + 0.3 * (1.2 * x1[0]).clamp(0, 1).mean())).clamp(0, 1),
                        (0.8 * (1.1 * x1[1] + (1 - 1.1) * x1[1].mean()).clamp(0, 1)).clamp(0, 1)])
    torch.testing.assert_close(colour_jitter(x1, f, order), want)


def test_gaussian_blur_and_the_view_order():
    x = torch.zeros(1, 1, 15, 15)
    x[0, 0, 7, 7] = 1.0
    sigma = 1.3
    out = gaussian_blur(x, torch.tensor([sigma]))
    t = np.arange(-4, 5)  # radius ⌈3σ⌉ = 4, normalised
    k = np.exp(-t ** 2 / (2 * sigma ** 2))
    k /= k.sum()
    want = np.zeros((15, 15))
    want[3:12, 3:12] = np.outer(k, k)
    np.testing.assert_allclose(out[0, 0].numpy(), want, atol=1e-6)
    # the dataset's crop, (colour), then its flips: with no colour it is the dataset's augmentation
    aug = Augmentation(crop="shift", shift=2, hflip=True, vflip=True)
    xs = torch.rand(6, 3, 8, 8)
    none = ColourAugmentation(jitter_prob=0, grayscale_prob=0, blur_prob=0)
    torch.testing.assert_close(MoCoViews(aug, none)(xs, torch.Generator().manual_seed(3)),
                               aug(xs, torch.Generator().manual_seed(3)))
    # multi-spectral images get no colour augmentation (gem: only 1 or 3 channels)
    x13 = torch.rand(4, 13, 8, 8)
    always = ColourAugmentation(jitter_prob=1, grayscale_prob=1, blur_prob=1)
    torch.testing.assert_close(always(x13, torch.Generator().manual_seed(0)), x13)
    grey = always.apply(xs, always.draw(6, torch.Generator().manual_seed(0)))
    assert torch.allclose(grey[:, 0], grey[:, 1]) and torch.allclose(grey[:, 1], grey[:, 2])


# ------------------------------------------------------------------------------ split BN, queue
def test_split_batchnorm_has_statistics_per_split():
    torch.manual_seed(0)
    x = torch.randn(16, 3, 4, 4) * torch.tensor([1.0, 2.0, 0.5]).view(1, 3, 1, 1) + 0.3
    x[::4] += 5.0  # split 0 (samples n mod 4 = 0) differs from the others
    ours, ref = SplitBatchNorm2d(3, 4), GemSplitBatchNorm(3, 4)
    with torch.no_grad():
        for bn in (ours, ref):
            bn.weight.copy_(torch.tensor([1.0, 0.5, 2.0]))
            bn.bias.copy_(torch.tensor([0.0, 0.1, -0.2]))
    out, want = ours(x), ref(x)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(ours.running_mean, ref.running_mean)
    torch.testing.assert_close(ours.running_var, ref.running_var)
    for s in range(4):  # each split normalised by its own batch statistics
        part = x[s::4]
        mu = part.mean(dim=(0, 2, 3), keepdim=True)
        var = part.var(dim=(0, 2, 3), unbiased=False, keepdim=True)
        norm_ = (part - mu) / torch.sqrt(var + 1e-5)
        torch.testing.assert_close(out[s::4], norm_ * ours.weight.view(1, 3, 1, 1) + ours.bias.view(1, 3, 1, 1),
                                   atol=1e-5, rtol=1e-5)
    ours.eval()
    torch.testing.assert_close(ours(x), F.batch_norm(x, ours.running_mean, ours.running_var, ours.weight,
                                                     ours.bias, False, 0.1, 1e-5))
    # every BatchNorm2d of an encoder is swapped, state kept
    model = build_model("cnn28", num_classes=2, in_channels=1, image_size=8, seed=0)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    use_split_batchnorm(model, 8)
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert len(bns) == 3 and all(isinstance(m, SplitBatchNorm2d) and m.num_splits == 8 for m in bns)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())


def test_queue_update_is_gems():
    torch.manual_seed(0)
    dim, size, b = 5, 12, 4
    ours = F.normalize(torch.randn(size, dim), dim=1)
    ref = ours.t().clone()
    p_ours = p_ref = 0
    for _ in range(5):  # wraps around the queue
        keys = F.normalize(torch.randn(b, dim), dim=1)
        p_ours = enqueue(ours, p_ours, keys)
        p_ref = gem_enqueue(ref, p_ref, keys)
        assert p_ours == p_ref
        torch.testing.assert_close(ours, ref.t())


def test_dvp_options_are_gems_moco_defaults_and_checked():
    from vistabench.protocols.smalldata.config import SmalldataConfig

    opts = SmalldataConfig.from_dict({"dataset": "digits", "method": "dvp"}).method_options.to_dict()
    assert {k: opts[k] for k in ("moco_queue", "moco_momentum", "moco_temperature", "moco_margin", "moco_dim",
                                 "moco_splits", "distill_features", "teacher_mode", "margin_source")} == {
        "moco_queue": 4096, "moco_momentum": 0.999, "moco_temperature": 0.07, "moco_margin": 0.6, "moco_dim": 128,
        "moco_splits": 8, "distill_features": "stages", "teacher_mode": "train", "margin_source": "initial_bn"}
    with pytest.raises(InputError, match=r"^method_options\.pretrain_batch_size: expected a multiple of"):
        SmalldataConfig.from_dict({"dataset": "digits", "method": "dvp",
                                   "method_options": {"pretrain_batch_size": 60}})
    with pytest.raises(InputError, match=r"^method_options\.moco_queue: expected a multiple of"):
        SmalldataConfig.from_dict({"dataset": "digits", "method": "dvp", "method_options": {"moco_queue": 1000}})


def test_pretraining_shuffles_keys_over_split_bn_and_restores_plain_bn():
    x, y = _data(n=20)
    model, loss = build_method("dvp", Recipe(model="cnn28"), {"distill_weight": 0.1, "pretrain_batch_size": 16},
                               num_classes=4, in_channels=1, image_size=8, seed=0)
    assert isinstance(loss, DVPLoss) and loss.pretrain_batch_size(20) == 16 and loss.pretrain_batch_size(13) == 8
    with pytest.raises(InputError, match="moco_splits"):
        loss.pretrain_batch_size(7)
    tr = Trainer(model, TrainConfig(epochs=1, lr=0.01, batch_size=10, count_flops=False), loss_fn=loss)
    tr.fit(x, y)
    assert len(loss.pretrain_history) == 1 and np.isfinite(loss.pretrain_history[0])
    assert not any(isinstance(m, SplitBatchNorm2d) for m in loss.teacher.modules())
    assert not any(isinstance(m, SplitBatchNorm2d) for m in model.modules())


def test_the_pretraining_stage_is_the_runs_recipe_with_its_own_changes():
    from vistabench.learners.smalldata.dvp import PRETRAIN_RULES

    _, loss = build_method("dvp", Recipe(model="cnn28"), {"distill_weight": 0.1, "pretrain_lr": 0.3},
                           num_classes=4, in_channels=1, image_size=8, seed=0)
    assert loss.moco.changes == {"lr": 0.3, "batch_size": 64}  # the options given (None: the run's value)
    run = Recipe(epochs=6, lr=0.02, weight_decay=1e-3, momentum=0.5, nesterov=True, schedule="step",
                 lr_milestones=(4,), lr_factors=(0.1,), warmup_epochs=1)
    stage = loss.moco.recipe(run)
    assert (stage.epochs, stage.lr, stage.weight_decay, stage.batch_size) == (6, 0.3, 1e-3, 64)
    assert {k: getattr(stage, k) for k in PRETRAIN_RULES} == PRETRAIN_RULES  # gem's MoCo optimiser, whatever the run's
    _, short = build_method("dvp", Recipe(model="cnn28"), {"distill_weight": 0.1, "pretrain_epochs": 2},
                            num_classes=4, in_channels=1, image_size=8, seed=0)
    assert short.moco.recipe(run).epochs == 2  # the run's milestone at 4 is not the stage's


def test_the_runs_method_options_reach_the_search(monkeypatch, tmp_path):
    import vistabench.protocols.smalldata.runner as proto
    from vistabench.protocols.smalldata.config import SmalldataConfig

    seen = {}

    class Stop(Exception):
        pass

    def fake_tune(objective, space, settings, **kw):
        seen.update(space)
        raise Stop

    monkeypatch.setattr(proto, "tune", fake_tune)
    cfg = SmalldataConfig.from_dict({"dataset": "digits", "method": "dvp", "split": [0], "trials": 1, "epochs": 1,
                                     "method_options": {"ce_only_epochs": 0, "jitter_prob": 0.3}})
    with pytest.raises(Stop):
        proto.run(cfg, work_dir=tmp_path)
    assert seen["ce_only_epochs"].value == 0 and seen["jitter_prob"].value == 0.3
