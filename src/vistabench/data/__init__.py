"""Data layer: datasets, predictions files, split files."""

from .dataset import DataSplits, Dataset
from .predictions import Predictions, load_predictions, save_predictions
from .readers import load_dataset, read_cifar, read_image_folder, read_npz, readers, safe_unpickle
from .splits import content_hash, read_split, seal, write_split

__all__ = [
    "Dataset", "DataSplits", "Predictions", "load_predictions", "save_predictions", "load_dataset",
    "read_cifar", "read_image_folder", "read_npz", "readers", "safe_unpickle", "content_hash",
    "read_split", "seal", "write_split",
]

from . import smalldata as _smalldata_presets  # noqa: E402,F401  registers cifair10, cub200, isic2018, eurosat, clamm
