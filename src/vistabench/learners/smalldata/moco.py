"""MoCo v2 pieces of DVP's contrastive pre-training, as in gem (lorenzobrigato/gem,
``pipelines/distill_visual_priors/distill_pretraining.py`` and ``contrastive_augmentation.py``).

- :class:`SplitBatchNorm2d`: gem's single-GPU stand-in for MoCo's shuffled multi-GPU BN. The batch
  (N, C, H, W) is read as ``view(N / S, S·C, H, W)``, so split ``s`` holds the samples ``n`` with
  ``n mod S = s``; each split is normalised with its own statistics; the running statistics are
  updated per split and averaged over the splits. In eval mode it is a plain BatchNorm2d.
  :func:`use_split_batchnorm` swaps every BatchNorm2d of a network for one (state kept).
- :func:`enqueue`: the queue of negatives, written in place at a cyclic pointer (gem:
  ``queue[:, ptr:ptr + B] = keys.T; ptr = (ptr + B) % K``, with ``K % B == 0`` asserted; here a
  batch that would pass the end wraps around).
- :class:`ColourAugmentation`: the part of MoCo v2's augmentation gem adds to the dataset's
  crop/shift and flips, for images of 1 or 3 channels (multi-spectral images get none):
  ``RandomApply([ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8)``, ``RandomGrayscale(p=0.2)``,
  ``RandomApply([GaussianBlur(σ ~ U[0.1, 2])], p=0.5)``, between the crop and the flips.
  Re-written vectorised on float [0, 1] tensors after torchvision's tensor functions (brightness,
  contrast, saturation and hue in a random order per image; saturation and hue leave 1-channel
  images unchanged; grey = 0.2989 R + 0.587 G + 0.114 B). gem applies them to PIL images (8-bit
  rounding) and blurs with PIL's box-blur approximation of the Gaussian; here a sampled Gaussian
  kernel of radius ⌈3σ⌉ with replicated edges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from ...data.augment import Augmentation
from ..tensors import augment_batch

__all__ = ["SplitBatchNorm2d", "use_split_batchnorm", "enqueue", "ColourAugmentation", "ColourDraw",
           "colour_jitter", "gaussian_blur", "rgb_to_grey", "MoCoViews", "JITTER_STRENGTH", "BLUR_SIGMA"]

#: ColorJitter(brightness, contrast, saturation, hue) of MoCo v2 / gem ("not strengthened")
JITTER_STRENGTH = (0.4, 0.4, 0.4, 0.1)
#: the range σ of gem's GaussianBlur is drawn from, uniformly
BLUR_SIGMA = (0.1, 2.0)


class SplitBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm2d with statistics per split of the batch (see the module docstring)."""

    def __init__(self, num_features: int, num_splits: int, **kw: Any) -> None:
        super().__init__(num_features, **kw)
        self.num_splits = int(num_splits)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.training or not self.track_running_stats):
            return super().forward(x)
        n, c, h, w = x.shape
        s = self.num_splits
        mean = self.running_mean.repeat(s)
        var = self.running_var.repeat(s)
        weight = None if self.weight is None else self.weight.repeat(s)
        bias = None if self.bias is None else self.bias.repeat(s)
        out = F.batch_norm(x.reshape(-1, c * s, h, w), mean, var, weight, bias, True, self.momentum,
                           self.eps).view(n, c, h, w)
        with torch.no_grad():
            self.running_mean.copy_(mean.view(s, c).mean(0))
            self.running_var.copy_(var.view(s, c).mean(0))
        return out


def use_split_batchnorm(module: nn.Module, num_splits: int) -> nn.Module:
    """Replace every ``nn.BatchNorm2d`` of ``module`` (in place) by a :class:`SplitBatchNorm2d` with the
    same parameters and buffers; returns ``module``. ``num_splits = 1``: nothing changes."""
    if num_splits <= 1:
        return module
    for name, child in module.named_children():
        if isinstance(child, nn.BatchNorm2d) and not isinstance(child, SplitBatchNorm2d):
            new = SplitBatchNorm2d(child.num_features, num_splits, eps=child.eps, momentum=child.momentum,
                                   affine=child.affine, track_running_stats=child.track_running_stats)
            new.load_state_dict(child.state_dict())
            new.to(next(iter(child.state_dict().values())).device)
            new.train(child.training)
            setattr(module, name, new)
        else:
            use_split_batchnorm(child, num_splits)
    return module


@torch.no_grad()
def enqueue(queue: torch.Tensor, ptr: int, keys: torch.Tensor) -> int:
    """Write ``keys`` (B, D) into ``queue`` (K, D) from row ``ptr`` on (cyclically); the new pointer."""
    size = queue.shape[0]
    take = min(len(keys), size)
    rows = (torch.arange(take, device=queue.device) + ptr) % size
    queue[rows] = keys[-take:] if take < len(keys) else keys
    return (ptr + take) % size


# ------------------------------------------------------------------------------ colour ops


def rgb_to_grey(x: torch.Tensor) -> torch.Tensor:
    """(n, 3, H, W) -> (n, 1, H, W), torchvision's weights."""
    return (0.2989 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]).unsqueeze(1)


def _blend(a: torch.Tensor, b: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    return (f * a + (1 - f) * b).clamp(0, 1)


def _rgb2hsv(x: torch.Tensor) -> torch.Tensor:
    r, g, b = x.unbind(1)
    maxc, minc = x.max(1).values, x.min(1).values
    eqc = maxc == minc
    cr = maxc - minc
    ones = torch.ones_like(maxc)
    s = cr / torch.where(eqc, ones, maxc)
    div = torch.where(eqc, ones, cr)
    rc, gc, bc = (maxc - r) / div, (maxc - g) / div, (maxc - b) / div
    hr = (maxc == r) * (bc - gc)
    hg = ((maxc == g) & (maxc != r)) * (2.0 + rc - bc)
    hb = ((maxc != g) & (maxc != r)) * (4.0 + gc - rc)
    h = torch.fmod((hr + hg + hb) / 6.0 + 1.0, 1.0)
    return torch.stack((h, s, maxc), 1)


def _hsv2rgb(x: torch.Tensor) -> torch.Tensor:
    h, s, v = x.unbind(1)
    i = torch.floor(h * 6.0)
    f = h * 6.0 - i
    i = i.to(torch.int64) % 6
    p = (v * (1.0 - s)).clamp(0, 1)
    q = (v * (1.0 - s * f)).clamp(0, 1)
    t = (v * (1.0 - s * (1.0 - f))).clamp(0, 1)
    mask = (i.unsqueeze(1) == torch.arange(6, device=x.device).view(1, -1, 1, 1)).to(x.dtype)
    r = (mask * torch.stack((v, q, p, p, t, v), 1)).sum(1)
    g = (mask * torch.stack((t, v, v, q, p, p), 1)).sum(1)
    b = (mask * torch.stack((p, p, t, v, v, q), 1)).sum(1)
    return torch.stack((r, g, b), 1)


def _jitter_op(x: torch.Tensor, op: int, f: torch.Tensor) -> torch.Tensor:
    """One of torchvision's adjust_brightness (0), _contrast (1), _saturation (2), _hue (3)."""
    f4 = f.view(-1, 1, 1, 1).to(x.dtype)
    c = x.shape[1]
    if op == 0:
        return _blend(x, torch.zeros_like(x), f4)
    if op == 1:
        grey = rgb_to_grey(x) if c == 3 else x
        return _blend(x, grey.mean(dim=(1, 2, 3), keepdim=True), f4)
    if c != 3:  # saturation and hue leave a 1-channel image as it is
        return x
    if op == 2:
        return _blend(x, rgb_to_grey(x), f4)
    hsv = _rgb2hsv(x)
    hsv = torch.stack(((hsv[:, 0] + f4[:, 0]) % 1.0, hsv[:, 1], hsv[:, 2]), 1)
    return _hsv2rgb(hsv)


def colour_jitter(x: torch.Tensor, factors: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """ColorJitter with given ``factors`` (n, 4: brightness, contrast, saturation, hue) applied in
    ``order`` (n, 4: a permutation of 0..3 per image), as torchvision's ``ColorJitter.forward``."""
    x = x.clone()
    for r in range(4):
        for op in range(4):
            sel = (order[:, r] == op).nonzero().flatten()
            if len(sel):
                x[sel] = _jitter_op(x[sel], op, factors[sel, op])
    return x


def gaussian_blur(x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """Blur each image of ``x`` (n, C, H, W) with its own σ (n,): separable Gaussian, radius ⌈3σ_max⌉,
    edges replicated."""
    n, c, h, w = x.shape
    radius = max(1, int(math.ceil(3 * float(sigma.max()))))
    t = torch.arange(-radius, radius + 1, dtype=x.dtype, device=x.device)
    k = torch.exp(-t[None] ** 2 / (2 * sigma.to(x.dtype)[:, None] ** 2))
    k = (k / k.sum(1, keepdim=True)).repeat_interleave(c, 0)  # (n·c, taps)
    y = F.pad(x.reshape(1, n * c, h, w), (radius, radius, radius, radius), mode="replicate")
    y = F.conv2d(y, k[:, None, None, :], groups=n * c)
    y = F.conv2d(y, k[:, None, :, None], groups=n * c)
    return y.view(n, c, h, w)


@dataclass(frozen=True)
class ColourDraw:
    """One batch's random draws of :class:`ColourAugmentation`."""

    jitter: torch.Tensor  # (n,) bool: ColorJitter applied
    factors: torch.Tensor  # (n, 4)
    order: torch.Tensor  # (n, 4)
    grey: torch.Tensor  # (n,) bool
    blur: torch.Tensor  # (n,) bool
    sigma: torch.Tensor  # (n,)


@dataclass(frozen=True)
class ColourAugmentation:
    """MoCo v2's colour part (module docstring); probabilities are gem's ``prob_*`` hyper-parameters."""

    jitter_prob: float = 0.8
    grayscale_prob: float = 0.2
    blur_prob: float = 0.5
    strength: tuple[float, float, float, float] = JITTER_STRENGTH
    sigma: tuple[float, float] = BLUR_SIGMA

    @property
    def active(self) -> bool:
        return self.jitter_prob > 0 or self.grayscale_prob > 0 or self.blur_prob > 0

    def draw(self, n: int, generator: torch.Generator) -> ColourDraw:
        b, c, s, h = self.strength
        u = torch.rand(n, 4, generator=generator, dtype=torch.float64)
        lo = torch.tensor([1 - b, 1 - c, 1 - s, -h], dtype=torch.float64)
        hi = torch.tensor([1 + b, 1 + c, 1 + s, h], dtype=torch.float64)
        return ColourDraw(
            jitter=torch.rand(n, generator=generator) < self.jitter_prob,
            factors=lo + (hi - lo) * u,
            order=torch.argsort(torch.rand(n, 4, generator=generator), dim=1),
            grey=torch.rand(n, generator=generator) < self.grayscale_prob,
            blur=torch.rand(n, generator=generator) < self.blur_prob,
            sigma=self.sigma[0] + (self.sigma[1] - self.sigma[0]) * torch.rand(n, generator=generator,
                                                                               dtype=torch.float64))

    @staticmethod
    def apply(x: torch.Tensor, d: ColourDraw) -> torch.Tensor:
        """Jitter, then grayscale, then blur, each on the images its draw selected."""
        if x.shape[1] not in (1, 3):  # gem: no colour augmentation of multi-spectral images
            return x
        x = x.clone()
        sel = d.jitter.nonzero().flatten()
        if len(sel):
            x[sel] = colour_jitter(x[sel], d.factors[sel], d.order[sel])
        sel = d.grey.nonzero().flatten()
        if len(sel) and x.shape[1] == 3:
            x[sel] = rgb_to_grey(x[sel]).expand(-1, 3, -1, -1)
        sel = d.blur.nonzero().flatten()
        if len(sel):
            x[sel] = gaussian_blur(x[sel], d.sigma[sel])
        return x

    def __call__(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return self.apply(x, self.draw(x.shape[0], generator))


class MoCoViews:
    """A view of a batch as gem's pre-training sees it: the dataset's crop/shift, the colour part,
    then the dataset's flips (``augment``: the trainer's ``cfg.augment``; ``padding``: its ``crop_padding``)."""

    def __init__(self, augment: bool | Callable, colour: ColourAugmentation, *, padding: int = 4) -> None:
        self.colour = colour
        self.crop: Callable | None
        self.flip: Callable | None
        if isinstance(augment, Augmentation):
            self.crop = replace(augment, hflip=False, vflip=False) if augment.crop != "none" else None
            flips = Augmentation(hflip=augment.hflip, vflip=augment.vflip)
            self.flip = flips if flips.active else None
        elif augment is True:  # the trainer's default pad-crop-flip
            self.crop = lambda x, g: augment_batch(x, g, padding=padding, flip=False)
            self.flip = Augmentation(hflip=True)
        elif callable(augment):  # an opaque augmentation: applied whole, before the colour part
            self.crop, self.flip = augment, None
        else:
            self.crop = self.flip = None

    def __call__(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        if self.crop is not None:
            x = self.crop(x, generator)
        if self.colour.active:
            x = self.colour(x, generator)
        if self.flip is not None:
            x = self.flip(x, generator)
        return x
