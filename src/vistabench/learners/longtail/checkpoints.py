"""Which weights of a training predict (``select_checkpoint``) and the references' input conventions.

:class:`CheckpointSelector` scores the network after every epoch on a selection set and keeps the
state of the best epoch (the first one on a tie, as the references' ``acc > best``); after the
stage it loads that state back and records both the selected and the last epoch's accuracy, so a
test-selected number always travels with the honest one it inflates.

:func:`fan_in_init` is the references' ``_weights_init`` (LDAM-DRW ``models/resnet_cifar.py``, BBN
``lib/backbone/resnet_cifar.py``, TDE/LADE ``models/ResNet32Feature.py``):
``init.kaiming_normal_(m.weight)`` — fan-in, gain √2 — on every convolution and linear layer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ..train_config import TrainResult
from ..lanes import seeded

__all__ = ["CheckpointSelector", "fan_in_init", "fan_in_weights"]


class CheckpointSelector:
    """Keep the best-scoring epoch's weights of each training stage.

    Parameters
    ----------
    images, labels : the selection set (held-out validation images, or the test pool for
        ``best_test``), scored by the trainer after every epoch (``val_acc``).
    what : ``"best_val"`` or ``"best_test"`` (stored with the result).
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray, what: str) -> None:
        self.data = (images, labels)
        self.what = what
        self.stages: list[dict[str, Any]] = []
        self._best: tuple[float, int, dict[str, torch.Tensor]] | None = None

    def callback(self, model: nn.Module):
        """The trainer's epoch callback for ``model``: copies its state when ``val_acc`` improves."""
        self._best = None

        def on_epoch(epoch: int, metrics: dict) -> None:
            acc = float(metrics["val_acc"])
            if self._best is None or acc > self._best[0]:
                state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                self._best = (acc, epoch, state)
        return on_epoch

    def finish(self, model: nn.Module, result: TrainResult) -> None:
        """Load the best epoch's state into ``model`` and record the stage's selection."""
        if self._best is None:
            return
        acc, epoch, state = self._best
        model.load_state_dict(state)
        last = result.history[-1]
        self.stages.append({"epoch": epoch, "epochs": len(result.history), "selected_acc": acc,
                            "last_epoch_acc": float(last["val_acc"])})
        self._best = None

    def summary(self) -> dict[str, Any]:
        """What was selected: the last stage's epoch and accuracies on the selection set, and every stage's."""
        out: dict[str, Any] = {"select": self.what, "selection_set": "test" if self.what == "best_test" else "val"}
        if self.stages:
            out.update({k: self.stages[-1][k] for k in ("epoch", "selected_acc", "last_epoch_acc")})
        out["stages"] = list(self.stages)
        return out


def fan_in_init(model: nn.Module, seed: int) -> None:
    """Kaiming-normal fan-in weights (std √(2 / fan_in)) on every ``Conv2d`` and ``Linear`` of
    ``model``, drawn from ``seed`` without touching the global RNG; biases, batch norms and other
    layers keep their initialisation."""
    with seeded(seed):
        fan_in_weights(model)


def fan_in_weights(model: nn.Module) -> None:
    """:func:`fan_in_init`'s weights drawn from the current RNG (for parts built inside an already
    seeded block: BBN's branch blocks, RIDE/SADE's expert stages, which the references build before
    their ``self.apply(_weights_init)``)."""
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight)
