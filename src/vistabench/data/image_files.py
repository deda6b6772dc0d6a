"""Images kept as files on disk and decoded when a batch asks for them: :class:`ImageFiles`.

An :class:`ImageFiles` stands where a :class:`~vistabench.data.Dataset` holds its (N, H, W, B)
uint8 array, with the same ``shape``, ``dtype``, ``ndim`` and ``len``; indexing it decodes only the
images asked for:

>>> import tempfile, numpy as np
>>> from pathlib import Path
>>> from PIL import Image
>>> d = Path(tempfile.mkdtemp())
>>> for i in range(3):
...     Image.fromarray(np.full((10, 14, 3), 40 * i, np.uint8)).save(d / f"{i}.png")
>>> files = ImageFiles([str(d / f"{i}.png") for i in range(3)], size=(8, 8))
>>> files.shape, files[np.array([2, 0])].shape, int(files[2][0, 0, 0])
((3, 8, 8, 3), (2, 8, 8, 3), 80)
>>> files.take([1]).shape
(1, 8, 8, 3)

Decoding: PIL, converted to RGB (``channels=3``) or greyscale (``channels=1``); an image of
another size is resized (bilinear) so that its shorter side matches the target's and then cut to
(H, W) at its centre (for a square target: "resize the shorter side, centre crop", the usual
evaluation transform). Random augmentation is the trainer's, applied to the decoded batch
(:mod:`vistabench.learners.tensors`), so files and in-memory arrays of the same pixels give the
same batches.

Memory: the object holds only the paths; a batch of n images costs n x H x W x B bytes. Turning
the whole set into an array (``np.asarray(files)``) decodes everything: only for sets that fit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import InputError

__all__ = ["ImageFiles", "decode_image"]


def decode_image(path: str, size: tuple[int, int], channels: int) -> np.ndarray:
    """One image file as a (H, W, channels) uint8 array of ``size`` (see the module docstring)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            im = im.convert("RGB" if channels == 3 else "L")
            h, w = size
            if (im.height, im.width) != (h, w):
                scale = max(h / im.height, w / im.width)
                nh, nw = max(h, round(im.height * scale)), max(w, round(im.width * scale))
                im = im.resize((nw, nh), Image.BILINEAR)
                top, left = (nh - h) // 2, (nw - w) // 2
                im = im.crop((left, top, left + w, top + h))
            arr = np.asarray(im, dtype=np.uint8)
    except FileNotFoundError:
        raise InputError(f"image {path!r}: no such file") from None
    except UnidentifiedImageError:
        raise InputError(f"image {path!r}: not a readable image (corrupt or another format)") from None
    except (OSError, SyntaxError, ValueError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"image {path!r}: corrupt or truncated image ({why})") from None
    return arr[:, :, None] if arr.ndim == 2 else arr


class ImageFiles:
    """N image files decoded on demand to (H, W, ``channels``) uint8 (see the module docstring).

    Parameters
    ----------
    paths : sequence of str
        One file per image.
    size : (H, W)
        The size every image is decoded to.
    channels : {1, 3}
        Greyscale or RGB.
    """

    dtype = np.dtype(np.uint8)
    ndim = 4

    def __init__(self, paths: Sequence[str], *, size: tuple[int, int], channels: int = 3) -> None:
        if channels not in (1, 3):
            raise InputError(f"channels: expected 1 or 3, got {channels!r}")
        h, w = (int(s) for s in size)
        if h < 1 or w < 1:
            raise InputError(f"size: expected a positive (height, width), got {size!r}")
        self.paths = np.asarray([str(p) for p in paths], dtype=object)
        self.size = (h, w)
        self.channels = channels

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (len(self.paths), self.size[0], self.size[1], self.channels)

    @property
    def size_bytes(self) -> int:
        """Bytes of the whole set once decoded (N x H x W x B)."""
        return int(np.prod(self.shape))

    def __len__(self) -> int:
        return len(self.paths)

    def __repr__(self) -> str:
        return f"ImageFiles({len(self)} files, size={self.size}, channels={self.channels})"

    def decode(self, i: int) -> np.ndarray:
        """Image ``i`` as a (H, W, B) uint8 array."""
        return decode_image(self.paths[i], self.size, self.channels)

    def _positions(self, idx: Any) -> np.ndarray:
        return np.arange(len(self))[idx] if isinstance(idx, slice) else np.asarray(idx).reshape(-1)

    def __getitem__(self, idx: Any) -> np.ndarray:
        """``files[i]``: one decoded (H, W, B) image; ``files[indices]``, ``files[mask]`` or
        ``files[a:b]``: the decoded (n, H, W, B) batch."""
        if isinstance(idx, (int, np.integer)):
            return self.decode(int(idx))
        pos = self._positions(idx)
        if pos.dtype == bool:
            pos = np.flatnonzero(pos)
        out = np.empty((len(pos), *self.shape[1:]), dtype=np.uint8)
        for k, i in enumerate(pos):
            out[k] = self.decode(int(i))
        return out

    def take(self, indices: Any) -> "ImageFiles":
        """The files at ``indices`` (int positions or a boolean mask), still on disk."""
        pos = self._positions(indices)
        if pos.dtype == bool:
            pos = np.flatnonzero(pos)
        out = ImageFiles.__new__(ImageFiles)
        out.paths, out.size, out.channels = self.paths[pos.astype(np.int64)], self.size, self.channels
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self[slice(None)]
        return a if dtype is None else a.astype(dtype)

    def __reduce__(self) -> tuple:  # worker processes get the paths, never decoded pixels
        return (_rebuild, (list(self.paths), self.size, self.channels))


def _rebuild(paths: list[str], size: tuple[int, int], channels: int) -> ImageFiles:
    return ImageFiles(paths, size=size, channels=channels)


def first_image_size(path: str | Path) -> tuple[int, int]:
    """(H, W) of an image file, read from its header."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            return im.height, im.width
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError):
        raise InputError(f"image {str(path)!r}: not a readable image (corrupt or another format)") from None
