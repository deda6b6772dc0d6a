"""Which images each training step sees: the epoch's order and its split into batches.

>>> import numpy as np
>>> [len(b) for b in batch_indices(np.arange(33), 16)]  # a last batch of one joins the previous
[16, 17]
"""

from __future__ import annotations

import numpy as np

__all__ = ["epoch_order", "batch_indices"]


def epoch_order(labels: np.ndarray, rng: np.random.Generator, sampler: str) -> np.ndarray:
    """Indices of one epoch, shape (N,).

    ``"uniform"``: a permutation of 0..N-1. ``"class_balanced"``: N draws with replacement,
    index i with probability ``1 / (C' · n_{y_i})`` (C' = number of classes present), so each
    present class is drawn with probability 1/C'.
    """
    n = len(labels)
    if sampler == "class_balanced":
        counts = np.bincount(labels)
        w = 1.0 / counts[labels]
        return rng.choice(n, size=n, replace=True, p=w / w.sum())
    return rng.permutation(n)


def batch_indices(order: np.ndarray, batch_size: int, *, drop_last: bool = False,
                  min_batch: int = 2) -> list[np.ndarray]:
    """``order`` cut into consecutive batches of ``batch_size``; a last batch of fewer than
    ``min_batch`` images (one image by default: batch norm cannot train on one sample; fewer than
    the devices of a data-parallel fit) is merged into the one before. ``drop_last``: a last
    incomplete batch is left out instead (PyTorch's ``DataLoader(drop_last=True)``), unless it is
    the only batch.

    >>> [len(b) for b in batch_indices(np.arange(33), 16, drop_last=True)]
    [16, 16]
    """
    batches = [order[s:s + batch_size] for s in range(0, len(order), batch_size)]
    if drop_last and len(batches) > 1 and len(batches[-1]) < batch_size:
        batches.pop()
    if len(batches) > 1 and len(batches[-1]) < min_batch:
        last = batches.pop()
        batches[-1] = np.concatenate([batches[-1], last])
    return batches
