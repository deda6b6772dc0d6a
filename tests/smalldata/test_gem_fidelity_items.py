"""The gem departures fixed under the gem recipe (issue 39, items 7-13 and 18), each read where it is
used: the built network's weights and modules, the trainer's model and augmentation, the loss's
generator/teacher and the mode it labels in. ``--recipe vistabench`` keeps each earlier variant."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from vistabench.learners.smalldata.build import build_method  # noqa: E402
from vistabench.learners.recipe import Recipe  # noqa: E402
from vistabench.learners.smalldata.options import (AuxilearnOptions, DhnOptions, DsknOptions, DvpOptions,  # noqa: E402
                                                   FconvOptions)

DEFAULT = 1 / math.sqrt(3)  # PyTorch's conv default: U(±1/√fan_in), std 1/√(3 fan_in)


def _std_ratio(conv: nn.Conv2d) -> tuple[float, float]:
    """The weight's std over PyTorch's default std and over Kaiming fan-out's."""
    k = conv.kernel_size[0] * conv.kernel_size[1]
    fan_in, fan_out = conv.in_channels // conv.groups * k, conv.out_channels // conv.groups * k
    s = float(conv.weight.detach().std())
    return s / (DEFAULT / math.sqrt(fan_in)), s / math.sqrt(2 / fan_out)


def _opts(cls, recipe: str) -> dict:
    return cls.for_recipe(recipe).to_dict()


# ------------------------------------------------------------------------------------------ item 7


def test_item7_fconv_blocks_default_init_downsample_and_stem_kaiming():
    net, _ = build_method("fconv", Recipe(model="resnet18"), _opts(FconvOptions, "gem"), num_classes=10, in_channels=3,
                          image_size=None, seed=0)
    blk = net.stages[1][0]  # a strided block: its convs new in gem, its downsample passed on
    assert abs(_std_ratio(blk.conv2)[0] - 1) < 0.05
    assert abs(_std_ratio(blk.downsample[0])[1] - 1) < 0.1
    assert abs(_std_ratio(net.stem[0])[1] - 1) < 0.1
    old, _ = build_method("fconv", Recipe(model="resnet18"), _opts(FconvOptions, "vistabench"), num_classes=10, in_channels=3,
                          image_size=None, seed=0)
    assert abs(_std_ratio(old.stages[1][0].conv2)[1] - 1) < 0.05


def test_item7_fconv_keeps_pretrained_block_weights(tmp_path):
    from vistabench.learners.models import build_model

    src = build_model("resnet18", num_classes=10, in_channels=3, seed=3)
    path = tmp_path / "w.pt"
    torch.save(src.state_dict(), path)
    net, _ = build_method("fconv", Recipe(model="resnet18", pretrained=str(path)), {}, num_classes=10, in_channels=3,
                          image_size=None, seed=0)
    assert torch.equal(net.stages[1][0].conv2.weight, src.stages[1][0].conv2.weight)


# ------------------------------------------------------------------------------------- items 8, 9


def _dskn(recipe: str, model: str = "wrn16_8"):
    net, _ = build_method("dskn", Recipe(model=model), {**_opts(DsknOptions, recipe), "loss": "ce"}, num_classes=4,
                          in_channels=3, image_size=16, seed=0)
    return net


def test_item8_dskn_training_forward_runs_both_branches():
    net = _dskn("gem", "resnet32")
    block = net.stages[0]
    before = [m.running_mean.clone() for m in (block.branch1.bn1, block.branch2.bn1)]
    net.train()
    torch.manual_seed(0)
    nn.functional.cross_entropy(net(torch.randn(4, 3, 16, 16)), torch.arange(4)).backward()
    # the branch not drawn: a gradient (zeros), so SGD's weight decay and momentum act on it
    assert all(p.grad is not None for p in block.parameters())
    assert any(float(p.grad.abs().sum()) == 0 for p in block.branch1.parameters()) != \
        any(float(p.grad.abs().sum()) == 0 for p in block.branch2.parameters())
    after = [m.running_mean for m in (block.branch1.bn1, block.branch2.bn1)]
    assert all(not torch.equal(a, b) for a, b in zip(before, after))  # both BNs saw the batch
    old = _dskn("vistabench", "resnet32")
    old.train()
    torch.manual_seed(0)
    nn.functional.cross_entropy(old(torch.randn(4, 3, 16, 16)), torch.arange(4)).backward()
    assert any(p.grad is None for p in old.stages[0].parameters())


def test_item9_dskn_wrn_shortcut_blurs_at_stride_one():
    from vistabench.learners.smalldata.dskn import BlurPool

    first = _dskn("gem").stages[0]  # 16 -> 128 channels at stride 1
    assert [type(m) for m in first.shortcut] == [nn.Conv2d, BlurPool] and first.shortcut[1].stride == 1
    assert [type(m) for m in _dskn("vistabench").stages[0].shortcut] == [nn.Conv2d]


# ------------------------------------------------------------------------------------ items 10, 12


def test_item10_dvp_teacher_drawn_as_the_architecture():
    cfg = {**_opts(DvpOptions, "gem"), "distill_weight": 1e-4}
    _, loss = build_method("dvp", Recipe(model="resnet18"), cfg, num_classes=4, in_channels=3, image_size=32, seed=0)
    conv = loss.teacher.stages[2][0].conv2
    assert abs(_std_ratio(conv)[1] - 1) < 0.05
    _, old = build_method("dvp", Recipe(model="resnet18"), {**_opts(DvpOptions, "vistabench"), "distill_weight": 1e-4},
                          num_classes=4, in_channels=3, image_size=32, seed=0)
    assert abs(_std_ratio(old.teacher.stages[2][0].conv2)[0] - 1) < 0.05


def _auxilearn(recipe: str, model: str = "resnet18", image_size: int = 32):
    cfg = {**_opts(AuxilearnOptions, recipe), "aux_scale": 0.25, "auxgrad_every": 2}
    return build_method("auxilearn", Recipe(model=model), cfg, num_classes=4, in_channels=3 if model != "cnn28" else 1,
                        image_size=image_size, seed=0)


def test_item12_auxilearn_generator_drawn_as_the_architecture():
    _, loss = _auxilearn("gem")
    assert abs(_std_ratio(loss.generator.base.stages[2][0].conv2)[1] - 1) < 0.05
    _, old = _auxilearn("vistabench")
    assert abs(_std_ratio(old.generator.base.stages[2][0].conv2)[0] - 1) < 0.05


# ------------------------------------------------------------------------------------------ item 11


@pytest.mark.parametrize("recipe,modes", [("gem", [True, False, False]), ("vistabench", [True, True, True])])
def test_item11_auxilearn_generator_mode_per_epoch(recipe, modes):
    """The generator's mode while it labels, epoch by epoch, in a real fit."""
    from vistabench.learners.trainer import TrainConfig, Trainer

    model, loss = _auxilearn(recipe, "cnn28", 8)
    seen: dict[int, set] = {}
    epoch = {"e": 0}
    real_set_epoch = loss.set_epoch

    def set_epoch(e):
        epoch["e"] = e
        real_set_epoch(e)

    loss.set_epoch = set_epoch
    loss.generator.register_forward_pre_hook(lambda m, a: seen.setdefault(epoch["e"], set()).add(m.training))
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (80, 8, 8, 1), dtype=np.uint8)
    cfg = TrainConfig(epochs=3, lr=0.01, batch_size=8, seed=0, count_flops=False)
    Trainer(model, cfg, loss_fn=loss).fit(images, np.arange(80) % 4)
    assert [seen[e] for e in range(3)] == [{m} for m in modes]


# ------------------------------------------------------------------------------------------ item 13


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    from vistabench.protocols.smalldata.runner import prepare

    return {r: prepare("digits", per_class=20, splits=[0], recipe=r, out_splits=tmp_path_factory.mktemp(r))
            for r in ("gem", "vistabench")}


def _trained(monkeypatch, ctx, method, config, **plan):
    """(model, augmentation) the trainer gets from ``train_method``."""
    from vistabench.learners.trainer import Trainer
    from vistabench.protocols.smalldata.core import RunPlan, train_method

    got = {}

    def fit(self, images, labels, **kw):
        got["model"], got["augment"] = self.model, self.cfg.augment
        return None

    monkeypatch.setattr(Trainer, "fit", fit)
    train_method(ctx, method, {"lr": 0.01, "weight_decay": 0.0, "batch_size": 10, **config}, RunPlan(**plan),
                 epochs=1, seed=0, train_idx=ctx.splits[0].train, val=None)
    return got["model"], got["augment"]


def test_item13_dhn_resize_crop_train_and_eval(digits, monkeypatch):
    from vistabench.data.augment import Augmentation, resize_center_crop
    from vistabench.learners.smalldata.common import EvalResizeCrop

    shift = Augmentation(crop="shift", shift=1, hflip=True)
    cfg = {**_opts(DhnOptions, "gem"), "scattering_J": 1}
    model, aug = _trained(monkeypatch, digits["gem"], "dhn", cfg, augmentation=shift)
    assert isinstance(model, EvalResizeCrop) and model.shift == 1
    assert (aug.crop, aug.shift, aug.hflip) == ("resize", 1, True)
    x = torch.randn(2, 1, 8, 8)
    model.eval()
    torch.testing.assert_close(model(x), model.model(resize_center_crop(x, 1)))
    model, aug = _trained(monkeypatch, digits["gem"], "dhn", {**cfg, "input_crop": "shift"}, augmentation=shift)
    assert not isinstance(model, EvalResizeCrop) and aug == shift
    model, aug = _trained(monkeypatch, digits["gem"], "ce", {}, augmentation=shift)  # other methods: unchanged
    assert not isinstance(model, EvalResizeCrop) and aug == shift


def test_item13_resize_crop_is_resize_then_window():
    from vistabench.data.augment import Augmentation

    x = torch.arange(2 * 3 * 6 * 6, dtype=torch.float32).reshape(2, 3, 6, 6)
    big = nn.functional.interpolate(x, size=(10, 10), mode="bilinear", align_corners=False)
    out = Augmentation(crop="resize", shift=2)(x, torch.Generator().manual_seed(1))
    for n in range(2):
        assert any(torch.equal(out[n], big[n, :, i:i + 6, j:j + 6]) for i in range(5) for j in range(5))
    assert Augmentation(crop="resize", shift=2).describe() == "resize +4px + random crop"


# ------------------------------------------------------------------------------------------ item 18


@pytest.mark.parametrize("recipe,rule", [("gem", 0), ("vistabench", 1)])
def test_item18_multiband_imagenet_stem_init(digits, monkeypatch, recipe, rule):
    """A non-RGB input on the ImageNet stem: gem replaces conv1 after the init (PyTorch's default)."""
    model, _ = _trained(monkeypatch, digits[recipe], "ce", {}, model="resnet18", stem="imagenet")
    stem = model.stem[0]
    assert stem.kernel_size == (7, 7) and stem.in_channels == 1
    assert abs(_std_ratio(stem)[rule] - 1) < 0.1


def test_dskn_branches_end_in_relu_under_gem():
    """Found by executing gem's ResNet-18 DSK network: each basic branch ends in relu(out + 0)."""
    for recipe, closed in (("gem", True), ("vistabench", False)):
        net = _dskn(recipe, "resnet32").train()  # batch statistics: a BN output has negative values
        out = net.stages[0].branch1(torch.randn(2, 16, 8, 8))
        assert bool((out >= 0).all()) is closed
