"""DHN scattering, full convolution and dual selective kernels against independent computations."""

import numpy as np
import pytest
import scipy.signal
import torch

from vistabench.learners.models import build_model
from vistabench.learners.smalldata.build import build_method
from vistabench.learners.recipe import Recipe
from vistabench.learners.smalldata.dhn import Scattering, scattering_channels
from vistabench.learners.smalldata.dskn import DSKBasicBlock, SKBlock
from vistabench.learners.smalldata.fconv import full_padding


# ------------------------------------------------------------------------------------ DHN
@pytest.mark.parametrize("J", [1, 2])
def test_scattering_is_kymatio_with_its_coefficient_count(J):
    from kymatio.scattering2d.frontend.torch_frontend import ScatteringTorch2D

    x = torch.randn(2, 3, 16, 16)
    ref = ScatteringTorch2D(J=J, shape=(16, 16), L=8)(x)  # (N, C, K, H', W')
    assert ref.shape[2] == scattering_channels(J) == {1: 9, 2: 81}[J]  # 1 + 8J + 64 J(J−1)/2
    out = Scattering(J)(x)
    assert out.shape == (2, 3 * scattering_channels(J), 16 // 2 ** J, 16 // 2 ** J)
    torch.testing.assert_close(out, ref.flatten(1, 2))
    meta = Scattering(J)(torch.zeros(2, 3, 16, 16, device="meta"))  # FLOP counting path: same shape
    assert meta.shape == out.shape


def test_scattering_order_zero_is_a_low_pass_average():
    """The first coefficient is x * φ_J sub-sampled: a constant image stays (nearly) constant."""
    out = Scattering(1)(torch.full((1, 1, 16, 16), 3.0))
    assert torch.allclose(out[0, 0], torch.full((8, 8), 3.0), atol=1e-3)
    assert out[0, 1:].abs().max() < 1e-3  # band-pass wavelets annihilate constants


def test_dhn_rejects_a_scale_larger_than_the_image():
    from vistabench.errors import InputError

    model, _ = build_method("dhn", Recipe(model="cnn28"), {"scattering_J": 2}, num_classes=3, in_channels=1, image_size=2, seed=0)
    with pytest.raises(InputError, match="J=2 needs images of at least 4 px"):
        model(torch.zeros(1, 1, 2, 2))


# ---------------------------------------------------------------------------------- fconv
def test_full_convolution_equals_scipy_full_correlation():
    rng = np.random.default_rng(0)
    conv = torch.nn.Conv2d(1, 1, 3, padding=1, bias=False)
    assert full_padding(torch.nn.Sequential(conv)) == 1 and conv.padding == (2, 2)
    x = rng.normal(size=(7, 9))
    want = scipy.signal.correlate2d(x, conv.weight.detach().numpy()[0, 0], mode="full")
    got = conv(torch.tensor(x, dtype=torch.float32)[None, None])[0, 0].detach().numpy()
    assert got.shape == (9, 11)  # (H + k − 1, W + k − 1)
    np.testing.assert_allclose(got, want, atol=1e-5)
    # every filter value meets every pixel: the outputs sum to Σx · Σw (not so with 'same' padding)
    assert got.sum() == pytest.approx(x.sum() * conv.weight.sum().item(), rel=1e-4)


@pytest.mark.parametrize("name", ["cnn28", "resnet18", "resnet32", "wrn16_8", "resnet50"])
def test_fconv_backbones_grow_their_maps_and_run(name):
    m = build_model(name, num_classes=3, in_channels=1, image_size=16, seed=0)
    n = full_padding(m)
    assert n == sum(isinstance(c, torch.nn.Conv2d) and c.kernel_size[0] > 1 for c in m.modules())
    assert m(torch.randn(2, 1, 16, 16)).shape == (2, 3)


def test_fconv_residual_block_output_size():
    m = build_model("resnet18", num_classes=3, in_channels=1, image_size=16, seed=0)
    full_padding(m)
    plain, strided = m.stages[0][0], m.stages[1][0]
    assert plain(torch.randn(1, 64, 10, 10)).shape[-1] == 14  # two full 3x3 convs: +2 +2
    assert strided(torch.randn(1, 64, 10, 10)).shape[-1] == (10 + 1) // 2 + 3  # ⌊(H+1)/2⌋+1, then +2


def test_fconv_is_translation_equivariant_up_to_the_border():
    """Shifting the input shifts the output of a full-conv stack exactly, even for content at the
    border (a 'same'-padded stack crops border content differently after the shift)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1, bias=False), torch.nn.ReLU(),
                              torch.nn.Conv2d(4, 2, 3, padding=1, bias=False))
    full_padding(net)
    x = torch.randn(1, 1, 8, 8)
    shifted = torch.nn.functional.pad(x, (3, 0, 2, 0))  # image moved by (2, 3) on a larger canvas
    base = torch.nn.functional.pad(x, (0, 3, 0, 2))
    a, b = net(base), net(shifted)
    torch.testing.assert_close(b[..., 2:, 3:], a[..., :-2, :-3], atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------------- DSKN
def test_selective_kernel_attention_sums_to_one_over_branches():
    torch.manual_seed(0)
    sk = SKBlock(16, 32, stride=2, groups=8).eval()
    out = sk(torch.randn(3, 16, 8, 8))
    assert out.shape == (3, 32, 4, 4)
    a = sk.last_attention
    assert a.shape == (3, 2, 32, 1, 1)
    torch.testing.assert_close(a.sum(1), torch.ones(3, 32, 1, 1))
    assert (a > 0).all()


def test_sk_block_parameter_count():
    cin, c, g, branches = 16, 32, 8, 2
    d = max(c // 16, 32)
    conv = c * (cin // g) * 9  # one grouped 3x3 conv, no bias
    want = branches * (conv + 2 * c) + (c * d + 2 * d) + branches * (d * c + c)  # + BN affine, fc, fcs
    assert sum(p.numel() for p in SKBlock(cin, c, groups=g).parameters()) == want


def test_dual_block_uses_one_branch_in_training_and_the_mean_at_inference():
    torch.manual_seed(0)
    blk = DSKBasicBlock(16, 16, 1, groups=8)
    x = torch.randn(2, 16, 6, 6)
    blk.eval()
    b1, b2 = blk.branch1(x), blk.branch2(x)
    torch.testing.assert_close(blk(x), torch.relu(0.5 * b1 + 0.5 * b2 + x))
    blk.train()  # batch-norm uses batch statistics: each branch's output is a function of x alone
    torch.manual_seed(1)
    pick = float(torch.randint(0, 2, ()))
    torch.manual_seed(1)
    out = blk(x)
    with torch.no_grad():
        ref = torch.relu((blk.branch1(x) if pick == 1.0 else blk.branch2(x)) + x)
    torch.testing.assert_close(out, ref)


def test_dskn_replaces_the_backbone_and_trains():
    model, loss = build_method("dskn", Recipe(model="cnn28"), {"loss": "ce"}, num_classes=4, in_channels=1, image_size=8, seed=0)
    assert loss is None
    assert sum(isinstance(m, DSKBasicBlock) for m in model.modules()) == 3
    assert model(torch.randn(2, 1, 8, 8)).shape == (2, 4)


@pytest.mark.parametrize("name,width", [("wrn16_8", 128), ("resnet32", 16), ("resnet18", 256)])
def test_dhn_keeps_the_backbones_later_stages_at_the_scattering_resolution(name, width):
    model, _ = build_method("dhn", Recipe(model=name), {"scattering_J": 2}, num_classes=3, in_channels=3, image_size=32, seed=0)
    assert model.stem[0].in_channels == 3 * 81 and model.stem[0].out_channels == width
    seen = []
    model.blocks.register_forward_hook(lambda m, i, o: seen.append(o.shape[-1]))
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 3)
    # stride removed where the reference removes it: 32 / 2^J = 8; ResNet-18 keeps stage 4's stride
    assert seen == [4 if name == "resnet18" else 8]


@pytest.mark.parametrize("name,block,count", [("wrn16_8", "DSKWideBlock", 6), ("resnet32", "DSKBasicBlock", 15),
                                              ("resnet18", "DSKBasicBlock", 8), ("resnet50", "DSKBottleneck", 16)])
def test_dskn_copies_the_backbone_layout(name, block, count):
    base = build_model(name, num_classes=3, in_channels=3, image_size=32, seed=0)
    model, _ = build_method("dskn", Recipe(model=name), {}, num_classes=3, in_channels=3, image_size=32, seed=0)
    assert sum(type(m).__name__ == block for m in model.modules()) == count
    assert model.feature_dim == base.feature_dim
    blk = next(m for m in model.modules() if type(m).__name__ == block).eval()
    x = torch.randn(2, blk.branch1.conv1[0].in_channels if block == "DSKBottleneck" else
                    (blk.branch1.bn1.num_features if block == "DSKWideBlock" else blk.branch1.sk1.convs[0][0].in_channels),
                    8, 8)
    mean = 0.5 * blk.branch1(x) + 0.5 * blk.branch2(x) + blk.shortcut(x)
    torch.testing.assert_close(blk(x), mean if block == "DSKWideBlock" else torch.relu(mean))


@pytest.mark.parametrize("name", ["resnet18", "resnet50"])
def test_dhn_gem_stem_on_imagenet_resnets_has_bn_momentum_0_9_and_a_conv_bias(name):
    # gem pipelines/scattering.py (torchvision ResNets): BatchNorm2d(k, eps=1e-5, momentum=0.9, affine=False),
    # then nn.Conv2d(k, width, 3, padding=1) - bias on, PyTorch's default init (built after the backbone's)
    model, _ = build_method("dhn", Recipe(model=name), {"scattering_J": 2}, num_classes=3, in_channels=3, image_size=32, seed=0)
    assert model.norm.momentum == 0.9 and model.stem[0].bias is not None
    w = model.stem[0].weight.detach()
    fan_in = w[0].numel()
    assert float(w.abs().max()) <= 1 / fan_in ** 0.5 + 1e-7  # kaiming_uniform(a=√5): U(±1/√fan_in)
    # PyTorch's convention, as the code reads: one training forward leaves 0.9 × the batch mean
    x = torch.rand(4, 3, 32, 32)
    model.train()
    with torch.no_grad():
        feats = model.scattering(x)
        model.norm(feats)
    torch.testing.assert_close(model.norm.running_mean, 0.9 * feats.mean((0, 2, 3)), rtol=1e-4, atol=1e-6)
    plain, _ = build_method("dhn", Recipe(model=name), {"scattering_J": 2, "hybrid_stem": "plain"}, num_classes=3, in_channels=3,
                            image_size=32, seed=0)
    assert plain.norm.momentum == 0.1 and plain.stem[0].bias is None


def test_dhn_gem_stem_on_cifar_backbones_keeps_bn_momentum_and_no_bias():
    model, _ = build_method("dhn", Recipe(model="resnet32"), {"scattering_J": 2}, num_classes=3, in_channels=3, image_size=32,
                            seed=0)
    assert model.norm.momentum == 0.1 and model.stem[0].bias is None
