"""Shared pieces of the long-tail fidelity checks (imported by file path, like ``_compare``): our
networks built as :func:`~vistabench.learners.longtail.fit_predict` builds them under the
``reference`` recipe, and the optimiser's parameter groups at its first step."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import torch
# imported before any load_reference fixture starts: the fixture removes, when a test ends, every
# module imported during it, and torch's distributed tensor package (which torch.testing.assert_close
# and the trainer import lazily) cannot be imported twice in one process
import torch.distributed.tensor  # noqa: F401

from vistabench.data import Dataset
from vistabench.learners.longtail import fit_predict
from vistabench.protocols.longtail.recipes import recipe_fields

_HERE = Path(__file__).resolve().parent


def compare_module():
    """``tests/fidelity/_compare.py`` as a module."""
    spec = importlib.util.spec_from_file_location("_fidelity_compare", _HERE / "_compare.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def toy_train(num_classes: int = 10, side: int = 32, seed: int = 0) -> Dataset:
    """A small long-tailed RGB set (class c has 40 − 3c images, at least 2)."""
    rng = np.random.default_rng(seed)
    labels = np.concatenate([np.full(max(2, 40 - 3 * c), c) for c in range(num_classes)])
    images = rng.integers(0, 256, (len(labels), side, side, 3), dtype=np.uint8)
    return Dataset(images, labels, [f"c{i}" for i in range(num_classes)], name="toy-lt")


_TRAIN_KEYS = ("epochs", "batch_size", "lr", "momentum", "nesterov", "weight_decay", "warmup_epochs",
               "warmup_start", "schedule", "lr_milestones", "lr_factors", "drop_last", "init")


def reference_kwargs(method: str) -> dict:
    """``fit_predict`` keywords of ``method``'s ``reference`` recipe on CIFAR-100 (our values)."""
    r = recipe_fields("reference", method, "cifar100:/nowhere")
    return {k: r[k] for k in _TRAIN_KEYS if k in r}


class _Stop(Exception):
    pass


def first_step_groups(method: str, train: Dataset, **kw) -> list[dict]:
    """The parameter groups (lr, momentum, weight decay, Nesterov, dampening) of the optimiser when
    ``fit_predict(method, ...)`` takes its first step (training stops there)."""
    seen: list[dict] = []
    original = torch.optim.SGD.step

    def spy(self, *a, **k):
        seen.extend({key: g[key] for key in ("lr", "momentum", "weight_decay", "nesterov", "dampening")}
                    for g in self.param_groups)
        raise _Stop

    torch.optim.SGD.step = spy
    try:
        fit_predict(method, train, train.images[:2], **kw)
    except _Stop:
        pass
    finally:
        torch.optim.SGD.step = original
    assert seen, "the optimiser took no step"
    return seen


def fidelity_root(name: str) -> Path:
    """``<cache>/<name>``: where the fetch script put ``name``'s files."""
    import os
    env = os.environ.get("VISTABENCH_FIDELITY_CACHE")
    base = Path(env).expanduser() if env else Path.home() / ".cache" / "vistabench" / "fidelity"
    return base / name
