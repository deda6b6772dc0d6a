"""gem's full convolution (``pipelines/fconv.py``) executed beside ours (``learners/smalldata/fconv.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

_spec = importlib.util.spec_from_file_location("_fidelity_compare", Path(__file__).with_name("_compare.py"))
C = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(C)


def _gem(load_reference, arch: str, in_channels: int = 3):
    fconv = load_reference("gem", "gem/pipelines/fconv.py")
    if arch.startswith("wrn"):
        wrn = load_reference("gem", "gem/architectures/wrn_cifar.py")
        base = wrn.WideResNet.build_architecture(arch, 10, in_channels)
    else:
        rn = load_reference("gem", "gem/architectures/rn.py")
        base = rn.ResNet.build_architecture(arch, 10, in_channels)
    return fconv.FConvModel(base)


def _ours(model: str, options: dict, in_channels: int = 3, seed: int = 0):
    from vistabench.learners.smalldata.build import build_method
    from vistabench.learners.recipe import Recipe

    net, _ = build_method("fconv", Recipe(model=model), options, num_classes=10, in_channels=in_channels, image_size=None,
                          seed=seed, model_options={"small_input": False} if model.startswith("resnet") else None)
    return net


@pytest.mark.parametrize("gem_arch,ours", [("rn18", "resnet18"), ("rn50", "resnet50"), ("wrn-16-8", "wrn16_8")])
def test_fconv_shapes_init_and_forward(load_reference, gem_arch, ours):
    ref = _gem(load_reference, gem_arch)
    net = _ours(ours, {})
    # parameter shapes, in order (stem, blocks, head), and counts
    assert C.shapes(net) == C.shapes(ref)
    assert sum(p.numel() for p in net.parameters()) == sum(p.numel() for p in ref.parameters())
    # initial weights: per-layer statistics of every sizeable convolution (gem: new blocks at PyTorch's default)
    C.assert_same_init(C.conv_weight_stats(net), C.conv_weight_stats(ref))
    # the same weights give the same outputs, in eval and in train mode
    C.copy_state(ref, net)
    x = torch.randn(2, 3, 32, 32)
    for train in (False, True):
        ref.train(train)
        net.train(train)
        torch.testing.assert_close(net(x), ref(x), rtol=1e-4, atol=1e-4)


def test_fconv_init_differs_under_the_kaiming_option(load_reference):
    """The earlier variant (``block_init="kaiming"``) is the one the statistics check catches."""
    ref = _gem(load_reference, "rn18")
    net = _ours("resnet18", {"block_init": "kaiming"})
    with pytest.raises(AssertionError, match="std"):
        C.assert_same_init(C.conv_weight_stats(net), C.conv_weight_stats(ref))
