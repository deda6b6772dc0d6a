"""The one place where dataset arrays become model inputs.

Images arrive as the :class:`~vistabench.data.Dataset` stores them: (N, H, W, B) channels-last,
uint8 for ordinary images or any numeric dtype for multispectral bands. The pipeline per batch is

1. ``x = images`` as a float32 (n, B, H, W) tensor (:func:`to_float_nchw`; the trainer keeps the
   channels-last memory of the arrays on a CPU); uint8 is divided by 255 (so values lie in [0, 1]);
2. optional augmentation (:func:`augment_batch`: random crop after zero padding, horizontal flip);
3. per-channel standardisation ``(x - mean_b) / std_b`` with mean and std measured on the
   *training* images after step 1 (:class:`Normaliser`), reused unchanged at prediction time.

A channel with zero variance on the training set gets ``std_b = 1`` (it is only centred), since
dividing by zero would make every input of that channel NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .._validation import check_array
from ..errors import InputError

__all__ = ["Normaliser", "check_images", "augment_batch", "to_float_nchw", "resize_center_crop"]

_CHUNK = 4096


def check_images(images: object, name: str = "images", *, in_channels: int | None = None,
                 allow_empty: bool = False) -> np.ndarray:
    """Validate a (N, H, W, B) numeric image array (not copied); image files on disk
    (:class:`~vistabench.data.image_files.ImageFiles`) are checked by their shape, not decoded."""
    from ..data.image_files import ImageFiles

    if isinstance(images, ImageFiles):
        if not allow_empty and len(images) == 0:
            raise InputError(f"{name}: expected at least one image, got shape {images.shape}")
        if in_channels is not None and images.shape[3] != in_channels:
            raise InputError(f"{name}: expected {in_channels}-channel images for a model with "
                             f"in_channels={in_channels}, got image files of shape {images.shape}")
        return images  # type: ignore[return-value]
    a = check_array(images, name, ndim=4, finite=False, allow_empty=True)
    if a.dtype.kind == "b":
        raise InputError(f"{name}: expected uint8 or numeric image values, got dtype bool")
    if not allow_empty and a.shape[0] == 0:
        raise InputError(f"{name}: expected at least one image, got shape {a.shape}")
    if in_channels is not None and a.shape[3] != in_channels:
        raise InputError(
            f"{name}: expected (N, H, W, {in_channels}) channels-last images for a model with "
            f"in_channels={in_channels}, got shape {a.shape}"
        )
    if a.dtype.kind == "f" and a.size:
        for s in range(0, len(a), _CHUNK):
            if not np.all(np.isfinite(a[s:s + _CHUNK])):
                raise InputError(f"{name}: expected finite pixel values, found NaN/inf")
    return a


def to_float_nchw(batch: np.ndarray, *, channels_last: bool = False) -> torch.Tensor:
    """(n, H, W, B) array -> a new float32 (n, B, H, W) tensor; uint8 is scaled by 1/255.

    ``channels_last=False``: contiguous (NCHW memory). ``channels_last=True``: the same values in
    channels-last memory (``torch.channels_last``, the layout the arrays are stored in, so no
    transposing copy); a model fed such batches runs its convolutions channels-last, which on a
    CPU takes ~20% less time for ResNet-32 on 32 px RGB (``benchmarks/bench_trainer_overhead.py``).
    Never a view of ``batch``: callers may standardise the result in place.
    """
    src = torch.from_numpy(np.ascontiguousarray(batch))
    if channels_last:  # (n, H, W, B) memory viewed as (n, B, H, W)
        t = torch.empty(src.shape, dtype=torch.float32).copy_(src).permute(0, 3, 1, 2)
    else:  # one pass: the conversion writes straight into the NCHW layout
        src = src.permute(0, 3, 1, 2)
        t = torch.empty(src.shape, dtype=torch.float32).copy_(src)
    if batch.dtype == np.uint8:
        t.div_(255.0)
    return t


@dataclass
class Normaliser:
    """Per-channel mean and std measured on training images (after uint8 -> [0, 1] scaling).

    Attributes
    ----------
    mean, std : ndarray of float64, shape (B,)
    dtype : str
        The dtype of the images it was fitted on; predicting on another dtype is an error
        (uint8 vs float data would be scaled differently).
    """

    mean: np.ndarray
    std: np.ndarray
    dtype: str

    @classmethod
    def fit(cls, images: np.ndarray) -> "Normaliser":
        """Measure per-channel mean and (population) std over all pixels of ``images`` (N, H, W, B)."""
        b = images.shape[3]
        # files on disk are decoded in chunks of ~1 MB (memory independent of the set's size);
        # arrays keep the chunk of 4096 images (the same float sums as before)
        step = _CHUNK if isinstance(images, np.ndarray) else max(1, (1 << 20) // max(1, int(np.prod(images.shape[1:]))))
        total = np.zeros(b)
        total_sq = np.zeros(b)
        count = 0
        for s in range(0, len(images), step):
            chunk = images[s:s + step].reshape(-1, b).astype(np.float64)
            if images.dtype == np.uint8:
                chunk /= 255.0
            total += chunk.sum(axis=0)
            total_sq += np.square(chunk).sum(axis=0)
            count += chunk.shape[0]
        mean = total / count
        var = np.maximum(total_sq / count - mean**2, 0.0)
        std = np.sqrt(var)
        std = np.where(std > 1e-12 * np.maximum(1.0, np.abs(mean)), std, 1.0)
        return cls(mean=mean, std=std, dtype=str(images.dtype))

    def check_compatible(self, images: np.ndarray, name: str) -> None:
        if images.shape[3] != len(self.mean):
            raise InputError(f"{name}: expected {len(self.mean)} channels (as in training), got shape {images.shape}")
        if (images.dtype == np.uint8) != (self.dtype == "uint8"):
            raise InputError(
                f"{name}: training images were {self.dtype} but these are {images.dtype}; "
                "uint8 and other dtypes are scaled differently"
            )

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """Standardise a float (n, B, H, W) tensor in place and return it."""
        # torch.tensor copies (a few floats): the arrays may be read-only, e.g. after a Ray transfer
        mean = torch.tensor(self.mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        std = torch.tensor(self.std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        return x.sub_(mean).div_(std)

    def to_dict(self) -> dict:
        return {"mean": self.mean.tolist(), "std": self.std.tolist(), "dtype": self.dtype}


def augment_batch(x: torch.Tensor, generator: torch.Generator, *, padding: int = 4,
                  flip: bool = True) -> torch.Tensor:
    """Random crop of the original size after zero padding, and a random horizontal flip.

    The standard CIFAR augmentation (``RandomCrop(size, padding=4)`` + ``RandomHorizontalFlip``),
    applied per sample, vectorised. ``x`` is a float (n, B, H, W) tensor on the CPU before
    standardisation, so padding is black (0). Randomness comes only from ``generator``.
    """
    n, b, h, w = x.shape
    dev = x.device  # draws come from the (CPU) generator, so every device sees the same crops and flips
    if padding > 0:
        xp = torch.nn.functional.pad(x, (padding, padding, padding, padding))
        oy = torch.randint(0, 2 * padding + 1, (n,), generator=generator).to(dev)
        ox = torch.randint(0, 2 * padding + 1, (n,), generator=generator).to(dev)
        rows = (oy[:, None] + torch.arange(h, device=dev))[:, None, :, None]
        cols = (ox[:, None] + torch.arange(w, device=dev))[:, None, None, :]
        x = xp[torch.arange(n, device=dev)[:, None, None, None], torch.arange(b, device=dev)[None, :, None, None],
               rows, cols]
    if flip:
        mask = (torch.rand(n, generator=generator) < 0.5).to(dev)
        x = torch.where(mask[:, None, None, None], x.flip(3), x)
    return x


def resize_center_crop(images: np.ndarray, *, scale: float = 1.15) -> np.ndarray:
    """Each image resized to ``int(scale · s)`` px (bilinear, half-pixel centres) and centre-cropped
    back to its side ``s``: the evaluation view of the FSCIL references (Revisting_FSCIL
    ``dataloader/cifar100/cifar.py:82–86``, ``Resize(int(s · 1.15)) + CenterCrop(s)``).

    Parameters
    ----------
    images : ndarray, shape (N, s, s, B)
        Square images, uint8 (rounded back to uint8, as the reference's PIL resize) or float.

    Returns
    -------
    ndarray, shape (N, s, s, B), the dtype of ``images``

    >>> x = np.arange(16, dtype=np.uint8).reshape(1, 4, 4, 1) * 10
    >>> resize_center_crop(x, scale=1.5).shape
    (1, 4, 4, 1)
    """
    n, h, w = images.shape[:3]
    if h != w:
        raise InputError(f"images: the resize-and-crop view needs square images, got {h}x{w}")
    big = int(h * scale)
    if big == h or n == 0:
        return images.copy()
    top = int(round((big - h) / 2.0))
    out = np.empty_like(images)
    for s in range(0, n, _CHUNK):
        x = torch.from_numpy(np.ascontiguousarray(images[s:s + _CHUNK])).permute(0, 3, 1, 2).float()
        y = torch.nn.functional.interpolate(x, size=(big, big), mode="bilinear", align_corners=False)
        y = y[:, :, top:top + h, top:top + h].permute(0, 2, 3, 1)
        if images.dtype == np.uint8:
            y = y.round().clamp(0, 255)
        out[s:s + _CHUNK] = y.numpy().astype(images.dtype)
    return out
