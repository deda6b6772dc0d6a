"""The stream learners' contract: the context a learner sees (:class:`TaskView`), the compute
ledger it charges (:class:`ComputeLedger`) and the base class (:class:`StreamLearner`).

A learner implements ``init() -> state``, ``train(task, data, state, ledger) -> (state, predictor)``
and ``predict(predictor, images) -> scores`` (docs/stream.md). It sees one :class:`TaskView` (the
current task's metadata) and a read-only copy of the current task's training data; every training
step and every forward pass spent on search or model selection is charged to the
:class:`ComputeLedger` the runner hands it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ..flops import count_forward_flops, count_train_step_flops
from .options import LearnerConfig

__all__ = ["TaskView", "ComputeLedger", "StreamLearner", "save_checkpoint"]


@dataclass(frozen=True)
class TaskView:
    """What a learner may know about the current task (never the stream, never a future task)."""

    uid: str
    name: str
    year: int
    domain: str
    kind: str
    num_classes: int
    class_names: tuple[str, ...]
    seed: int


class ComputeLedger:
    """FLOPs charged while learning one task: training steps and model-selection forward passes.

    One step is counted with :func:`~vistabench.learners.flops.count_train_step_flops` on the meta
    device (which caches each count by architecture, input shape, batch size and loss: the one cache)
    and multiplied by the number of steps, so accounting costs no arithmetic on real data. (The count is linear
    in the number of images for convolutions and linear layers, so a forward pass on n images is
    charged as n times the one-image count.)
    """

    def __init__(self) -> None:
        self.train_flops = 0
        self.eval_flops = 0
        self.train_steps = 0
        self.items: list[dict[str, Any]] = []

    @property
    def total(self) -> int:
        return self.train_flops + self.eval_flops

    def charge_train(self, model: nn.Module, input_shape: tuple[int, int, int], batch_size: int, steps: int,
                     *, loss_fn: Callable | None = None, what: str = "train") -> int:
        """Charge ``steps`` training steps of ``model`` on batches of ``batch_size`` images."""
        per_step = int(count_train_step_flops(model, input_shape, batch_size, loss_fn=loss_fn))  # cached there
        f = per_step * int(steps)
        self.train_flops += f
        self.train_steps += int(steps)
        self.items.append({"what": what, "per_step": per_step, "steps": int(steps), "flops": f})
        return f

    def charge_forward(self, model: nn.Module, input_shape: tuple[int, int, int], n_images: int,
                       *, what: str = "eval") -> int:
        """Charge inference forward passes of ``model`` on ``n_images`` images."""
        per_image = int(count_forward_flops(model, input_shape, batch_size=1))  # cached there
        f = per_image * int(n_images)
        self.eval_flops += f
        self.items.append({"what": what, "per_image": per_image, "images": int(n_images), "flops": f})
        return f


class StreamLearner:
    """Base class of stream learners. Subclasses implement :meth:`init`, :meth:`train`, :meth:`predict`.

    ``state_to_dict`` / ``state_from_dict`` turn the state into tensors and plain Python values
    (saved with ``torch.save`` and loaded with ``weights_only=True``) so a run can resume.
    """

    name = "base"

    def __init__(self, config: LearnerConfig | None = None) -> None:
        self.config = config or LearnerConfig()

    def init(self) -> Any:
        raise NotImplementedError

    def train(self, task: TaskView, data: Any, state: Any, ledger: ComputeLedger) -> tuple[Any, Any]:
        raise NotImplementedError

    def predict(self, predictor: Any, images: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def num_parameters(self, predictor: Any) -> int:
        return 0

    def state_to_dict(self, state: Any) -> dict:
        return {}

    def state_from_dict(self, d: dict) -> Any:
        return self.init()

    def settings(self) -> dict:
        out = self.config.settings() if hasattr(self.config, "settings") else dict(vars(self.config))
        out["learner"] = self.name
        return out


def save_checkpoint(model: nn.Module, path: str | Path) -> Path:
    """Save a model's state dict for the ``pt`` learner (tensors only, loadable with weights_only=True)."""
    from ...atomic import write_with

    p = Path(path)
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    write_with(p, lambda f: torch.save(state, f), what="checkpoint file")
    return p


