"""Where the trainer's batches come from: one interface, three data sources (``TrainConfig.loader``).

- ``"memory"`` (default): each batch is cut from the images as they are given (an in-memory array,
  or :class:`~vistabench.data.image_files.ImageFiles` decoded in the training process) and
  converted by :meth:`Trainer.batch <vistabench.learners.trainer.Trainer.batch>`: today's path.
- ``"stream"``: a :class:`torch.utils.data.DataLoader` with ``TrainConfig.workers`` worker
  processes reads and decodes the items of each batch (images on disk: PIL per item, resized to
  the data set's size) while the model trains on the previous one; memory holds a few batches,
  whatever the size of the data set. The batches are the trainer's own index batches (the loader
  gets them as its ``batch_sampler``), and the random augmentation runs in the training process
  on the decoded batch with the trainer's seeded generator, so a seed gives the same batches as
  ``"memory"``.
- ``"device"``: the whole uint8 set is moved to the training device once; batches are cut,
  converted to float, augmented and standardised there (the random draws still come from the
  trainer's seeded CPU generator, so on a CPU the batches equal those of ``"memory"``). For sets
  that fit on the accelerator: N x H x W x B bytes (CIFAR's 50k training images: 150 MB).

A source yields the normalised float batches of one epoch for given index batches
(:meth:`epoch`) and single batches on demand (:meth:`batch`, for a second sampler).
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np
import torch

from ..errors import InputError
from .recipe import LOADERS, Recipe

__all__ = ["LOADERS", "DataSource", "MemorySource", "StreamSource", "DeviceSource", "make_source"]


class DataSource:
    """Normalised float batches of ``images`` for a trainer (see the module docstring); the trainer
    (a :class:`~vistabench.learners.trainer.Trainer`, not imported here: it imports this module)
    gives ``batch``, ``finish_batch`` and ``device``."""

    def __init__(self, trainer: Any, images: Any) -> None:
        self.trainer = trainer
        self.images = images

    def batch(self, idx: np.ndarray, gen: torch.Generator | None) -> torch.Tensor:
        return self.trainer.batch(self.images, idx, gen)

    def epoch(self, batches: Sequence[np.ndarray], gen: torch.Generator | None) -> Iterator[torch.Tensor]:
        for b in batches:
            yield self.batch(b, gen)

    def close(self) -> None:
        """Release worker processes or device memory (the source is not used afterwards)."""


class MemorySource(DataSource):
    """Batches cut from the images in the training process (the default)."""


class _Items(torch.utils.data.Dataset):
    """Item i = image i as a uint8 (H, W, B) array (decoded in a worker for files); a user error is
    returned, not raised, so it reaches the training process as one line."""

    def __init__(self, images: Any) -> None:
        self.images = images

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> Any:
        try:
            return np.asarray(self.images[int(i)])
        except InputError as exc:
            return exc


def _stack(items: list) -> Any:
    for it in items:
        if isinstance(it, InputError):
            return it
    return np.stack(items)


class _EpochBatches(torch.utils.data.Sampler):
    """The current epoch's index batches (set before each epoch; read by the persistent loader)."""

    def __init__(self) -> None:
        self.batches: Sequence[np.ndarray] = []

    def __iter__(self) -> Iterator[list[int]]:
        return iter([b.tolist() for b in self.batches])

    def __len__(self) -> int:
        return len(self.batches)


class StreamSource(DataSource):
    """Items read by a ``DataLoader`` with ``workers`` processes; converted in the training process."""

    def __init__(self, trainer: Any, images: Any, workers: int) -> None:
        super().__init__(trainer, images)
        self.workers = workers
        self._sampler = _EpochBatches()
        self._loader: torch.utils.data.DataLoader | None = None

    def _raw(self, raw: Any) -> np.ndarray:
        if isinstance(raw, InputError):
            raise InputError(str(raw))
        return raw

    def epoch(self, batches: Sequence[np.ndarray], gen: torch.Generator | None) -> Iterator[torch.Tensor]:
        if self._loader is None:
            self._loader = torch.utils.data.DataLoader(
                _Items(self.images), batch_sampler=self._sampler, num_workers=self.workers, collate_fn=_stack,
                persistent_workers=self.workers > 0, prefetch_factor=2 if self.workers > 0 else None)
        self._sampler.batches = batches
        for raw in self._loader:
            yield self.trainer.batch(self._raw(raw), slice(None), gen)

    def predict_batches(self, batch_size: int) -> Iterator[np.ndarray]:
        """The images in order, decoded by the workers, in uint8 batches of ``batch_size``."""
        loader = torch.utils.data.DataLoader(_Items(self.images), batch_size=batch_size, shuffle=False,
                                             num_workers=self.workers, collate_fn=_stack)
        for raw in loader:
            yield self._raw(raw)

    def close(self) -> None:
        self._loader = None  # its persistent workers exit with it


class DeviceSource(DataSource):
    """The whole uint8 set on the training device; batches converted and augmented there."""

    def __init__(self, trainer: Any, images: Any) -> None:
        super().__init__(trainer, images)
        arr = np.ascontiguousarray(np.asarray(images))  # image files are decoded once, here
        self.uint8 = arr.dtype == np.uint8
        self.data = torch.from_numpy(arr).to(trainer.device)

    def batch(self, idx: np.ndarray, gen: torch.Generator | None) -> torch.Tensor:
        dev = self.trainer.device
        src = self.data[torch.from_numpy(np.asarray(idx, dtype=np.int64)).to(dev)]
        x = src.to(torch.float32).permute(0, 3, 1, 2)  # channels-last memory, as Trainer.batch on a CPU
        if dev.type != "cpu":
            x = x.contiguous()
        if self.uint8:
            x.div_(255.0)
        return self.trainer.finish_batch(x, gen)

    def close(self) -> None:
        self.data = torch.empty(0)


def make_source(trainer: Any, images: Any, recipe: Recipe) -> DataSource:
    """The data source of ``images`` for ``trainer`` that ``recipe`` asks for: its ``loader`` (one of
    :data:`LOADERS`, checked when the recipe was made) and, for ``stream``, its ``workers``."""
    if recipe.loader == "stream":
        return StreamSource(trainer, images, recipe.workers)
    if recipe.loader == "device":
        return DeviceSource(trainer, images)
    return MemorySource(trainer, images)
