"""Data layer: datasets, predictions files, split files.

The names below are imported on first use (PEP 562), so a verb that reads only a detection JSON
(:mod:`vistabench.data.coco`) does not pay for predictions files, split files and the small-data
presets. The ``dataset`` registry imports :mod:`vistabench.data.smalldata` on its first lookup, which
registers cifair10, cub200, isic2018, eurosat and clamm.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Dataset": "dataset", "DataSplits": "dataset",
    "Predictions": "predictions", "load_predictions": "predictions", "save_predictions": "predictions",
    "load_dataset": "readers", "read_cifar": "readers", "read_image_folder": "readers", "read_npz": "readers",
    "readers": "readers", "safe_unpickle": "readers",
    "content_hash": "splits", "read_split": "splits", "seal": "splits", "write_split": "splits",
}

__all__ = sorted(_EXPORTS)

# Bound now, not lazily: the registry ``readers`` has the name of its submodule, and importing the
# submodule (``import vistabench.data.readers``) would otherwise leave the module under that name.
from .readers import readers  # noqa: E402


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
