"""``mt``: the Nevis'22 multi-task baseline.

Each task starts like FT-d, from the past network whose features give the best k-NN accuracy on
the new task (charged), and is co-trained with that past task (top-1): every SGD step takes ``B``
images of the current task and ``B`` images of the auxiliary task, the network has one output
block per task, and the loss is ``(1/2B) * (sum_cur loss + w * sum_aux loss)``. The auxiliary
weight ``w`` is searched with the other hyper-parameters (log-uniform in ``mt_weight_range``).
Both halves of every step are charged to the ledger (the auxiliary half as its own item).

To co-train with a past task the learner keeps, in its state, up to ``mt_memory`` training
examples of every task it has seen (uint8 images and integer labels; a multilabel task keeps its
label-pattern index, which the auxiliary block learns with a cross-entropy over patterns).
"""

from __future__ import annotations

import math

import numpy as np

from .baselines import FTD

__all__ = ["MT"]


class MT(FTD):
    """Multi-task: FT-d initialisation + co-training with the most related past task."""

    name = "mt"

    def _sample(self, rng: np.random.Generator) -> dict:
        hp = super()._sample(rng)
        lo, hi = self.config.mt_weight_range
        hp["aux_weight"] = float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
        return hp

    def _aux_for(self, task, init_from, state):
        mem = state.get("memory", {})
        if init_from not in mem:  # first task (random init), or the related task was not kept
            return None
        m = mem[init_from]
        images = np.asarray(m["images"].numpy() if hasattr(m["images"], "numpy") else m["images"])
        labels = np.asarray(m["labels"].numpy() if hasattr(m["labels"], "numpy") else m["labels"], dtype=np.int64)
        return {"uid": init_from, "images": images, "labels": labels, "n_labels": int(m["n_labels"]),
                "n_out": int(m["n_labels"])}

    def _remember(self, task, images, labels, rng):
        import torch

        k = min(len(labels), self.config.mt_memory)
        idx = np.sort(rng.permutation(len(labels))[:k])
        return {"images": torch.from_numpy(np.ascontiguousarray(images[idx])),
                "labels": torch.from_numpy(np.asarray(labels[idx], dtype=np.int64)),
                "n_labels": int(labels.max()) + 1}
