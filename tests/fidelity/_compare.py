"""Comparison helpers of the executed fidelity checks (imported by file path: tests run with
``--import-mode=importlib``)."""

from __future__ import annotations

import torch
from torch import nn


def shapes(module: nn.Module) -> list[tuple[int, ...]]:
    """Every parameter's shape, in registration order."""
    return [tuple(p.shape) for p in module.parameters()]


def state_shapes(module: nn.Module) -> list[tuple[int, ...]]:
    """Every state-dict entry's shape (parameters and buffers, batch counters left out), in order."""
    return [tuple(v.shape) for k, v in module.state_dict().items() if not k.endswith("num_batches_tracked")]


def copy_state(src: nn.Module, dst: nn.Module) -> None:
    """Copy ``src``'s parameters and buffers into ``dst`` entry by entry in registration order (the two
    name their layers differently; shapes must agree one to one)."""
    a = [(k, v) for k, v in src.state_dict().items() if not k.endswith("num_batches_tracked")]
    b = [(k, v) for k, v in dst.state_dict().items() if not k.endswith("num_batches_tracked")]
    assert [tuple(v.shape) for _, v in a] == [tuple(v.shape) for _, v in b]
    with torch.no_grad():
        for (_, v), (_, w) in zip(a, b):
            w.copy_(v)


def conv_weight_stats(module: nn.Module, *, min_size: int = 2048) -> list[tuple[float, float]]:
    """(mean, std) of each convolution's weight with at least ``min_size`` values, in order."""
    out = []
    for m in module.modules():
        if isinstance(m, nn.Conv2d) and m.weight.numel() >= min_size:
            w = m.weight.detach().double()
            out.append((float(w.mean()), float(w.std())))
    return out


def assert_same_init(ours: list[tuple[float, float]], ref: list[tuple[float, float]], *, rtol: float = 0.1) -> None:
    """Per layer: std within ``rtol`` (relative) and mean within 4 standard errors of 0 apart."""
    assert len(ours) == len(ref), (len(ours), len(ref))
    for i, ((m1, s1), (m2, s2)) in enumerate(zip(ours, ref)):
        assert abs(s1 - s2) <= rtol * s2, f"layer {i}: std {s1:.4g} (ours) vs {s2:.4g} (reference)"
        assert abs(m1 - m2) <= 0.25 * s2, f"layer {i}: mean {m1:.4g} (ours) vs {m2:.4g} (reference)"
