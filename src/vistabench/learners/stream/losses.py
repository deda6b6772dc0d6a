"""Losses of the stream learners: multilabel targets as label patterns, and the joint loss of one
network with one output block per task (MT's co-training, PT-MT's pre-training)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

__all__ = ["PatternBCE", "LossPart", "JointLoss"]


class PatternBCE(nn.Module):
    """Sigmoid BCE where the integer label indexes a row of a 0/1 pattern matrix (C columns)."""

    def __init__(self, patterns: np.ndarray, label_smoothing: float) -> None:
        super().__init__()
        self.register_buffer("patterns", torch.as_tensor(patterns, dtype=torch.float32))
        self.c = patterns.shape[1]
        self.ls = float(label_smoothing)

    def forward(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        t = self.patterns.to(y.device)[y]
        t = t * (1.0 - self.ls) + 0.5 * self.ls
        return nn.functional.binary_cross_entropy_with_logits(logits[:, : self.c], t)


@dataclass
class LossPart:
    """One task's share of a joint head: labels [label_offset, +n_labels), outputs [out_offset, +n_out)."""

    label_offset: int
    n_labels: int
    out_offset: int
    n_out: int
    weight: float
    patterns: np.ndarray | None  # multilabel: 0/1 row per label index (BCE on the first C outputs)
    label_smoothing: float


class JointLoss(nn.Module):
    """Weighted sum of per-task losses on one network with one head block per task (MT, PT-MT).

    An example whose label falls in part k's label range is scored on part k's output block only
    (cross-entropy, or the sigmoid BCE of :class:`PatternBCE` for a multilabel part); the loss is
    ``(1/B) * sum_i w_{k(i)} * loss_i`` over the batch.
    """

    def __init__(self, parts: list[LossPart]) -> None:
        super().__init__()
        self.parts = parts
        for k, p in enumerate(parts):
            if p.patterns is not None:
                self.register_buffer(f"patterns{k}", torch.as_tensor(p.patterns, dtype=torch.float32))

    def forward(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        total = logits.new_zeros(())
        for k, p in enumerate(self.parts):
            sel = (y >= p.label_offset) & (y < p.label_offset + p.n_labels)
            z = logits[:, p.out_offset: p.out_offset + p.n_out]
            yy = (y - p.label_offset).clamp(0, p.n_labels - 1)
            if p.patterns is not None:
                pat = getattr(self, f"patterns{k}")
                t = pat.to(y.device)[yy] * (1.0 - p.label_smoothing) + 0.5 * p.label_smoothing
                per = nn.functional.binary_cross_entropy_with_logits(z[:, : pat.shape[1]], t, reduction="none").mean(1)
            else:
                per = nn.functional.cross_entropy(z, yy, label_smoothing=p.label_smoothing, reduction="none")
            total = total + p.weight * (per * sel.to(per.dtype)).sum()
        return total / max(1, y.shape[0])

