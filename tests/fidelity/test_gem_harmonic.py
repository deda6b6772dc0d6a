"""gem's harmonic networks (``pipelines/harmonic.py``) executed beside ours
(``learners/smalldata/harmonic.py``) on WRN-16-8: the DCT filters, which convolutions become harmonic
blocks (the first with BN), the 1 x 1 mixes' initialisation, and the forwards with the same weights.
gem orders a layer's k² filters row by row (u, v), ours by (u + v, u): weights are copied through
that permutation."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

_spec = importlib.util.spec_from_file_location("_fidelity_compare", Path(__file__).with_name("_compare.py"))
C = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(C)


def _gem(load_reference):
    harm = load_reference("gem", "gem/pipelines/harmonic.py")
    wrn = load_reference("gem", "gem/architectures/wrn_cifar.py")
    return harm, harm.HarmonicModel(wrn.WideResNet.build_architecture("wrn-16-8", 10, 3))


def _ours():
    from vistabench.learners.smalldata.build import build_method
    from vistabench.learners.recipe import Recipe

    net, _ = build_method("harmonic", Recipe(model="wrn16_8"), {}, num_classes=10, in_channels=3, image_size=32, seed=0)
    return net


def _perm(k: int = 3) -> list[int]:
    """gem's filter index of each of our filters."""
    pairs = sorted(((u, v) for u in range(k) for v in range(k)), key=lambda p: (p[0] + p[1], p[0]))
    return [u * k + v for u, v in pairs]


def _layers(model, cls):
    return [m for m in model.modules() if isinstance(m, cls)]


def _plain(model, harm_cls):
    """Leaf modules with weights or statistics outside the harmonic blocks, in order."""
    inside = {id(c) for h in _layers(model, harm_cls) for c in h.modules()}
    return [m for m in model.modules() if id(m) not in inside and not list(m.children())
            and (list(m.parameters(recurse=False)) or list(m.buffers(recurse=False)))]


def _copy(ref, net, harm):
    from vistabench.learners.smalldata.harmonic import HarmonicConv2d

    p = torch.tensor(_perm())
    with torch.no_grad():
        for h, o in zip(_layers(ref, harm.Harm2d), _layers(net, HarmonicConv2d)):
            ci, m = o.in_channels, o.m
            idx = (torch.arange(ci)[:, None] * m + p[None, :]).flatten()  # gem's channel of each of ours
            if hasattr(h, "bn"):
                o.mix.weight.copy_(h.weight[:, idx])
                o.bn.running_mean.copy_(h.bn.running_mean[idx])
                o.bn.running_var.copy_(h.bn.running_var[idx])
            else:
                o.mix.weight.copy_(h.weight[:, :, p].reshape(o.mix.weight.shape))
        for a, b in zip(_plain(ref, harm.Harm2d), _plain(net, HarmonicConv2d)):
            b.load_state_dict(a.state_dict())


def test_harmonic_wrn_filters_init_forward(load_reference):
    from vistabench.learners.smalldata.harmonic import HarmonicConv2d

    harm, ref = _gem(load_reference)
    net = _ours()
    theirs, ours = _layers(ref, harm.Harm2d), _layers(net, HarmonicConv2d)
    assert len(ours) == len(theirs) > 0
    assert [hasattr(h, "bn") for h in theirs] == [o.bn is not None for o in ours]  # BN on the first only
    assert [(h.stride, h.padding) for h in theirs] == [((o.stride,) * 2, (o.padding,) * 2) for o in ours]
    # the same L1-normalised filters, in another order
    torch.testing.assert_close(ours[1].basis[:9, 0], theirs[1].dct[0, _perm()])
    # the same trainable parameters (gem's DCT bank is a Parameter with requires_grad=False)
    n_ref = sum(p.numel() for p in ref.parameters() if p.requires_grad)
    assert sum(p.numel() for p in net.parameters() if p.requires_grad) == n_ref
    # the mixes' initialisation, layer by layer (Kaiming fan-out over out x filters; the BN layer's over out)
    stats = [(float(o.mix.weight.detach().mean()), float(o.mix.weight.detach().std())) for o in ours if o.mix.weight.numel() >= 2048]
    ref_stats = [(float(h.weight.detach().mean()), float(h.weight.detach().std())) for h in theirs if h.weight.numel() >= 2048]
    C.assert_same_init(stats, ref_stats)
    plain = [m for m in _plain(net, HarmonicConv2d) if isinstance(m, nn.Conv2d)]
    plain_ref = [m for m in _plain(ref, harm.Harm2d) if isinstance(m, nn.Conv2d)]
    C.assert_same_init(C.conv_weight_stats(nn.ModuleList(plain)), C.conv_weight_stats(nn.ModuleList(plain_ref)))
    _copy(ref, net, harm)
    x = torch.randn(2, 3, 32, 32)
    for train in (False, True):
        ref.train(train)
        net.train(train)
        torch.testing.assert_close(net(x), ref(x), rtol=1e-4, atol=1e-4)
