"""The in-memory dataset type shared by every protocol."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._validation import check_labels
from ..errors import InputError


@dataclass
class Dataset:
    """Images, integer labels and class names.

    Attributes
    ----------
    images : ndarray, shape (N, H, W, B), or ImageFiles
        Channels last; uint8 for ordinary images, any numeric dtype for multispectral bands. An
        :class:`~vistabench.data.image_files.ImageFiles` (images on disk, decoded per batch) has the
        same shape and indexing.
    labels : ndarray of int64, shape (N,)
        Class index per image, in ``[0, len(class_names))``.
    class_names : list of str, length C
    name : str
        Where it came from (e.g. ``"mnist5k"`` or ``"cifar10:/data/cifar"``).
    """

    images: np.ndarray
    labels: np.ndarray
    class_names: list[str]
    name: str = "dataset"
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.images.ndim != 4:
            raise InputError(f"{self.name}: images must be (N, H, W, B), got shape {self.images.shape}")
        self.labels = check_labels(self.labels, f"{self.name} labels", num_classes=len(self.class_names))
        if len(self.labels) != len(self.images):
            raise InputError(
                f"{self.name}: {len(self.images)} images but {len(self.labels)} labels"
            )

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def class_counts(self) -> np.ndarray:
        return np.bincount(self.labels, minlength=self.num_classes)

    def subset(self, indices: np.ndarray, *, name: str | None = None) -> "Dataset":
        idx = np.asarray(indices, dtype=np.int64)
        take = getattr(self.images, "take", None)  # files on disk stay on disk
        images = take(idx) if callable(take) and not isinstance(self.images, np.ndarray) else self.images[idx]
        return Dataset(images, self.labels[idx], list(self.class_names),
                       name or self.name, dict(self.meta))


@dataclass
class DataSplits:
    """A dataset's official train and test parts (``test`` may be None) and, where the data set
    has one, its official validation part (``val``)."""

    train: Dataset
    test: Dataset | None
    val: Dataset | None = None
