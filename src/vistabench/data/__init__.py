"""Data layer: datasets, predictions files, split files.

The names below are imported on first use, so a verb that reads only a detection JSON
(:mod:`vistabench.data.coco`) does not pay for the image readers, predictions files, split files
and the small-data presets. The dataset registry is ``vistabench.data.readers.readers``; it imports
:mod:`vistabench.data.smalldata` on its first lookup, which registers cifair10, cub200, isic2018,
eurosat and clamm.
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "Dataset": "dataset", "DataSplits": "dataset",
    "Predictions": "predictions", "load_predictions": "predictions", "save_predictions": "predictions",
    "write_predictions": "predictions",
    "load_dataset": "readers", "read_cifar": "readers", "read_image_folder": "readers", "read_npz": "readers",
    "safe_unpickle": "readers",
    "content_hash": "splits", "read_split": "splits", "seal": "splits", "write_split": "splits",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
