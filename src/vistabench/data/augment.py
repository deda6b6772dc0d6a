"""Training-time augmentation specs, applied per sample to a batch (torch, vectorised).

An :class:`Augmentation` is plain data (picklable, JSON-able through ``to_dict``) that a dataset
preset carries and the trainer calls on each float (n, C, H, W) batch *before* standardisation:

- ``crop="shift"``: ``RandomCrop(size, padding=shift)``: pad by ``shift`` pixels (``pad_mode``
  "reflect", as gem's ``--rand-shift``, or "zeros") and cut a window of the original size at a
  uniformly random offset, i.e. a random translation by −shift..+shift pixels in each axis;
- ``crop="resized"``: ``RandomResizedCrop(size, scale=(min_scale, 1), ratio=(3/4, 4/3))``: a box
  of area ``s · H·W`` with ``s ~ U(min_scale, 1)`` and aspect ratio ``r`` with
  ``log r ~ U(log 3/4, log 4/3)`` (up to 10 draws until the box fits, else the whole image), at a
  uniformly random position, resized back to H x W (bilinear);
- ``crop="resize"``: ``Resize(size + 2·shift)`` + ``RandomCrop(size)``: the image enlarged
  bilinearly (``align_corners=False``) by 2·``shift`` pixels, then a window of the original size at
  a uniformly random offset — gem's ``BasicAugmentation`` with an integer ``target_size`` and
  ``rand_shift`` (``pipelines/common.py``), whose evaluation images get ``Resize(size + 2·shift)`` +
  ``CenterCrop(size)``: :func:`resize_center_crop`;
- ``hflip``/``vflip``: flip each sample with probability 1/2 (horizontal first, as in gem).

Randomness comes only from the ``torch.Generator`` passed in.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

from .._validation import check_value

__all__ = ["Augmentation", "NO_AUGMENTATION", "PAD_CROP_FLIP", "resize_center_crop"]


@dataclass(frozen=True)
class Augmentation:
    """See the module docstring. ``Augmentation()`` does nothing."""

    crop: Literal["none", "shift", "resized", "resize"] = "none"
    shift: int = 0
    pad_mode: Literal["reflect", "zeros"] = "reflect"
    min_scale: float = 1.0
    hflip: bool = False
    vflip: bool = False

    def __post_init__(self) -> None:
        check_value(self.crop, "augmentation crop", choices=("none", "shift", "resized", "resize"))
        check_value(self.pad_mode, "augmentation pad_mode", choices=("reflect", "zeros"))
        object.__setattr__(self, "shift", check_value(self.shift, "augmentation shift", type=int, low=0))
        check_value(self.min_scale, "augmentation min_scale", low=0, low_open=True, high=1)

    @property
    def active(self) -> bool:
        return (self.crop in ("shift", "resize") and self.shift > 0) or self.crop == "resized" or self.hflip or self.vflip

    def __bool__(self) -> bool:  # the trainer's "augment or not" test
        return self.active

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        parts = []
        if self.crop == "shift" and self.shift > 0:
            parts.append(f"shift {self.shift}px ({self.pad_mode} pad)")
        elif self.crop == "resize" and self.shift > 0:
            parts.append(f"resize +{2 * self.shift}px + random crop")
        elif self.crop == "resized":
            parts.append(f"resized crop scale {self.min_scale:g}-1")
        if self.hflip:
            parts.append("hflip")
        if self.vflip:
            parts.append("vflip")
        return " + ".join(parts) or "none"

    def __call__(self, x: Any, generator: Any) -> Any:
        """Augment a float (n, C, H, W) tensor (on any device; the random draws come from
        ``generator``, a CPU generator); returns a new tensor of the same shape."""
        import torch

        n, _, h, w = x.shape
        dev = x.device  # draws come from the (CPU) generator: every device sees the same crops and flips
        if self.crop in ("shift", "resize") and self.shift > 0:
            p = self.shift
            mode = "reflect" if self.pad_mode == "reflect" else "constant"
            xp = (torch.nn.functional.pad(x, (p, p, p, p), mode=mode) if self.crop == "shift" else
                  torch.nn.functional.interpolate(x, size=(h + 2 * p, w + 2 * p), mode="bilinear", align_corners=False))
            oy = torch.randint(0, 2 * p + 1, (n,), generator=generator).to(dev)
            ox = torch.randint(0, 2 * p + 1, (n,), generator=generator).to(dev)
            rows = (oy[:, None] + torch.arange(h, device=dev))[:, None, :, None]
            cols = (ox[:, None] + torch.arange(w, device=dev))[:, None, None, :]
            x = xp[torch.arange(n, device=dev)[:, None, None, None],
                   torch.arange(x.shape[1], device=dev)[None, :, None, None], rows, cols]
        elif self.crop == "resized":
            top, left, bh, bw = (t.to(dev) for t in resized_crop_boxes(n, h, w, self.min_scale, generator))
            x = crop_and_resize(x, top, left, bh, bw)
        if self.hflip:
            m = (torch.rand(n, generator=generator) < 0.5).to(dev)
            x = torch.where(m[:, None, None, None], x.flip(3), x)
        if self.vflip:
            m = (torch.rand(n, generator=generator) < 0.5).to(dev)
            x = torch.where(m[:, None, None, None], x.flip(2), x)
        return x


def resize_center_crop(x: Any, shift: int) -> Any:
    """gem's evaluation transform with an integer ``target_size`` and ``rand_shift``:
    ``Resize(size + 2·shift)`` (bilinear, ``align_corners=False``) + ``CenterCrop(size)`` of a float
    (n, C, H, W) batch; the same shape back."""
    import torch

    p = int(shift)
    if p <= 0:
        return x
    h, w = x.shape[-2:]
    big = torch.nn.functional.interpolate(x, size=(h + 2 * p, w + 2 * p), mode="bilinear", align_corners=False)
    return big[..., p:p + h, p:p + w]


def resized_crop_boxes(n: int, h: int, w: int, min_scale: float, generator: Any, *, attempts: int = 10):
    """Boxes ``(top, left, height, width)`` (int tensors, shape (n,)) of ``RandomResizedCrop``."""
    import torch

    area = h * w
    s = min_scale + (1.0 - min_scale) * torch.rand(n, attempts, generator=generator, dtype=torch.float64)
    lr = math.log(3 / 4) + (math.log(4 / 3) - math.log(3 / 4)) * torch.rand(n, attempts, generator=generator,
                                                                            dtype=torch.float64)
    r = torch.exp(lr)
    bw = torch.round(torch.sqrt(area * s * r)).long()
    bh = torch.round(torch.sqrt(area * s / r)).long()
    ok = (bw > 0) & (bh > 0) & (bw <= w) & (bh <= h)
    first = torch.where(ok.any(1), ok.float().argmax(1), torch.full((n,), -1))
    idx = first.clamp(min=0)
    bh = torch.where(first >= 0, bh[torch.arange(n), idx], torch.full((n,), h))
    bw = torch.where(first >= 0, bw[torch.arange(n), idx], torch.full((n,), w))
    u = torch.rand(n, 2, generator=generator, dtype=torch.float64)
    top = torch.floor(u[:, 0] * (h - bh + 1).double()).long()
    left = torch.floor(u[:, 1] * (w - bw + 1).double()).long()
    return top, left, bh, bw


def crop_and_resize(x: Any, top: Any, left: Any, bh: Any, bw: Any) -> Any:
    """Cut each box out and resize it bilinearly to H x W (``align_corners=False`` sampling with
    edges clamped to the box, as ``interpolate`` on the cut-out crop does; boxes are never larger
    than the image, so no anti-aliasing is involved)."""
    import torch

    n, _, h, w = x.shape
    # output pixel j samples the box at source coordinate left + (j + 0.5) · bw / W − 0.5
    dev = x.device
    ys = top[:, None].double() + (torch.arange(h, dtype=torch.float64, device=dev)[None] + 0.5) * bh[:, None].double() / h - 0.5
    xs = left[:, None].double() + (torch.arange(w, dtype=torch.float64, device=dev)[None] + 0.5) * bw[:, None].double() / w - 0.5
    # clamped to the box, as resizing the cut-out crop does at its edges
    ys = torch.minimum(torch.maximum(ys, top[:, None].double()), (top + bh - 1)[:, None].double())
    xs = torch.minimum(torch.maximum(xs, left[:, None].double()), (left + bw - 1)[:, None].double())
    # normalised grid coordinates for grid_sample with align_corners=False: (2c + 1) / size − 1
    gy = (2 * ys + 1) / h - 1
    gx = (2 * xs + 1) / w - 1
    grid = torch.stack([gx[:, None, :].expand(n, h, w), gy[:, :, None].expand(n, h, w)], dim=-1).to(x.dtype)
    return torch.nn.functional.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


NO_AUGMENTATION = Augmentation()
PAD_CROP_FLIP = Augmentation(crop="shift", shift=4, pad_mode="zeros", hflip=True)
"""vistabench's former augmentation for every dataset: zero-pad 4 + random crop + horizontal flip."""
