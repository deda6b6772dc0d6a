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


def reorder_dual(state: dict) -> list:
    """gem's dual blocks register ``downsample`` before ``branch1``/``branch2``, ours the shortcut
    after them: the reference's entries with each block's ``downsample`` moved after its branches."""
    blocks: dict[str, dict[str, list]] = {}
    order: list = []
    for k, v in state.items():
        if k.endswith("num_batches_tracked"):
            continue
        for part in ("downsample", "branch1", "branch2"):
            tag = f".{part}."
            if tag in k:
                pre = k.split(tag)[0]
                if pre not in blocks:
                    blocks[pre] = {"branch1": [], "branch2": [], "downsample": []}
                    order.append(("block", pre))
                blocks[pre][part].append((k, v))
                break
        else:
            order.append(("entry", (k, v)))
    out = []
    for kind, item in order:
        if kind == "entry":
            out.append(item)
        else:
            b = blocks[item]
            out += b["branch1"] + b["branch2"] + b["downsample"]
    return out


def copy_entries(entries: list, dst: nn.Module) -> None:
    """Copy ``(name, tensor)`` entries into ``dst``'s state in its registration order."""
    b = [(k, v) for k, v in dst.state_dict().items() if not k.endswith("num_batches_tracked")]
    assert [tuple(v.shape) for _, v in entries] == [tuple(v.shape) for _, v in b]
    with torch.no_grad():
        for (_, v), (_, w) in zip(entries, b):
            w.copy_(v)


def our_optimizers(model: nn.Module, *, lr: float, weight_decay: float, loss_fn=None, in_channels: int = 3,
                   size: int = 16, num_classes: int = 10, n: int = 4, monkeypatch=None) -> list:
    """Every SGD optimiser a small-data fit makes (the trainer's first, then a loss's own), captured
    from a one-step fit (the small-data recipe's momentum/Nesterov, this lr and weight decay) on
    ``n`` random images."""
    import numpy as np

    from vistabench.learners.trainer import TrainConfig, Trainer
    from vistabench.protocols.smalldata.core import RunPlan

    made = []
    real = torch.optim.SGD

    class Capture(real):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.initial_groups = [dict(g) for g in self.param_groups]  # before any schedule moves lr
            made.append(self)

    monkeypatch.setattr(torch.optim, "SGD", Capture)
    cfg = TrainConfig.from_recipe(RunPlan().recipe, epochs=1, lr=lr, weight_decay=weight_decay, batch_size=min(n, 8), seed=0,
                                  augment=False, count_flops=False)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, size, size, in_channels), dtype=np.uint8)
    Trainer(model, cfg, loss_fn=loss_fn).fit(images, np.arange(n) % num_classes)
    monkeypatch.setattr(torch.optim, "SGD", real)
    return made


def our_optimizer(model: nn.Module, **kw):
    """The trainer's SGD optimiser (:func:`our_optimizers`' first)."""
    return our_optimizers(model, **kw)[0]


def group_settings(opt) -> list[dict]:
    """Each parameter group's lr, weight decay, momentum, dampening and Nesterov flag (as the
    optimiser was built, for one captured by :func:`our_optimizers`)."""
    groups = getattr(opt, "initial_groups", opt.param_groups)
    return [{k: g[k] for k in ("lr", "weight_decay", "momentum", "dampening", "nesterov")} for g in groups]


def entry_conv_stats(entries: list, *, min_size: int = 2048) -> list[tuple[float, float]]:
    """(mean, std) of each 4-d ``*.weight`` entry (a convolution's) with at least ``min_size`` values."""
    out = []
    for k, v in entries:
        if k.endswith("weight") and v.ndim == 4 and v.numel() >= min_size:
            w = v.detach().double()
            out.append((float(w.mean()), float(w.std())))
    return out


def entries(module: nn.Module) -> list:
    return [(k, v) for k, v in module.state_dict().items() if not k.endswith("num_batches_tracked")]
