"""Reference backbones for every protocol (torch; no torchvision).

Every model built here is a :class:`Backbone`: ``features(x) -> (N, D)``, a linear head
``classifier`` (``nn.Linear(D, C)``; long-tail methods such as LDAM may swap it for a cosine head),
``feature_dim = D`` and ``forward(x) = classifier(features(x))``. Inputs are float tensors of shape
(N, in_channels, H, W) already standardised (see :mod:`vistabench.learners.tensors`).

The built-in factories here are entries of the one model registry, :data:`.model_options.models`
(torch-free: each entry holds its factory and its options class; ``models.names()``); build with
:func:`build_model`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .._validation import check_value
from ..errors import InputError
from .lanes import seeded
from .model_options import models, small_stem

# the building blocks are public: method packages extend them (learners/smalldata/: full convolution,
# dual selective kernels, hybrid scattering networks)
__all__ = ["Backbone", "build_model", "models", "NormedLinear", "kaiming_init", "BasicBlock", "Bottleneck",
           "CifarBlock", "WideBlock", "CNN28", "CifarResNet", "ResNet", "WideResNet"]
# the Vision Transformer (vit_small): :mod:`.vit`

# ``models`` (the one model registry, torch-free): :mod:`.model_options`; the factories below are its
# built-in entries' (``"vistabench.learners.models:_cnn28"``, ...)


class Backbone(nn.Module):
    """Base class: subclasses define ``features`` and call :meth:`_init_head`."""

    feature_dim: int
    in_channels: int
    num_classes: int

    def _init_head(self, feature_dim: int, num_classes: int, in_channels: int) -> None:
        self.feature_dim = int(feature_dim)
        self.num_classes = int(num_classes)
        self.in_channels = int(in_channels)
        self.classifier: nn.Module = nn.Linear(self.feature_dim, self.num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class NormedLinear(nn.Module):
    """Cosine classifier ``logits = normalize(f) @ normalize(W)`` (no bias), as in LDAM (Cao et al.).

    Logits lie in [-1, 1]; the LDAM loss multiplies them by its scale ``s``. ``init``: ``"unit"``
    draws each class vector uniformly in [-1, 1] and rescales it to norm 1, as the references'
    ``NormedLinear`` (LDAM-DRW ``models/resnet_cifar.py:42``, RIDE, SADE); ``"kaiming_uniform"``
    is PyTorch's linear-layer default (class vectors of norm ≈ 0.58). The direction is uniform
    in both; the norm sets the size of the first steps (the gradient through the normalisation
    scales as 1/‖w‖).
    """

    def __init__(self, in_features: int, out_features: int, *, init: str = "kaiming_uniform") -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        if init == "unit":
            with torch.no_grad():
                self.weight.uniform_(-1, 1)
                self.weight.div_(self.weight.norm(dim=1, keepdim=True).clamp_min(1e-12))
        elif init == "kaiming_uniform":
            nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        else:
            raise InputError(f"init: expected 'unit' or 'kaiming_uniform', got {init!r}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(F.normalize(x, dim=1), F.normalize(self.weight, dim=1))


def kaiming_init(module: nn.Module) -> None:
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm, nn.LayerNorm)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


# --------------------------------------------------------------------------------------- cnn28


class CNN28(Backbone):
    """Small fast CNN for 28 px (MNIST) down to 8 px (sklearn digits) inputs.

    Three 3x3 conv stages (widths w, 2w, 4w; BN + ReLU), 2x2 max-pool (ceil mode, so odd sizes
    work) after the first two, then adaptive average pooling to a 2x2 grid (keeps coarse layout,
    which digits need; a global pool trains much slower): feature_dim = 16w (default 256).
    Any input of at least 1x1 pixels works; 28 px -> 14 -> 7 -> 2x2, 8 px -> 4 -> 2 -> 2x2.
    """

    def __init__(self, num_classes: int, in_channels: int, width: int = 16) -> None:
        super().__init__()
        w = int(width)
        self.body = nn.Sequential(
            nn.Conv2d(in_channels, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True),
            nn.MaxPool2d(2, ceil_mode=True),
            nn.Conv2d(w, 2 * w, 3, padding=1, bias=False), nn.BatchNorm2d(2 * w), nn.ReLU(inplace=True),
            nn.MaxPool2d(2, ceil_mode=True),
            nn.Conv2d(2 * w, 4 * w, 3, padding=1, bias=False), nn.BatchNorm2d(4 * w), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(2),
        )
        self._init_head(16 * w, num_classes, in_channels)
        kaiming_init(self)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.body(x), 1)


def _cnn28(num_classes: int, in_channels: int, image_size: int | None = None, *, width: int = 16) -> Backbone:
    return CNN28(num_classes, in_channels, width=width)


# ------------------------------------------------------------------------------------ resnet32


class CifarBlock(nn.Module):
    """He et al. (2016) CIFAR basic block; option-A shortcut (stride-2 subsample + zero-pad channels)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.stride = stride
        self.pad = cout - cin

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride != 1:
            x = x[:, :, :: self.stride, :: self.stride]
        if self.pad:
            x = F.pad(x, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet(Backbone):
    """CIFAR ResNet-(6n+2) of He et al. (2016): 3 stages x n basic blocks, widths 16/32/64.

    ``n = 5`` gives ResNet-32, the backbone of the long-tailed CIFAR literature (LDAM, BALMS, ...).
    Option-A (parameter-free) shortcuts as in the paper and in LDAM-DRW's public code.
    """

    def __init__(self, num_classes: int, in_channels: int, n: int = 5) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        layers: list[nn.Module] = []
        cin = 16
        for stage, cout in enumerate((16, 32, 64)):
            for b in range(n):
                layers.append(CifarBlock(cin, cout, 2 if (stage > 0 and b == 0) else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self._init_head(64, num_classes, in_channels)
        kaiming_init(self)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layers(x)
        return torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)


def _resnet32(num_classes: int, in_channels: int, image_size: int | None = None) -> Backbone:
    return CifarResNet(num_classes, in_channels, n=5)


# ------------------------------------------------------------------------- resnet18 / resnet50


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int) -> None:
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idt = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + idt)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int) -> None:
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)  # torchvision v1.5
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idt = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + idt)


class ResNet(Backbone):
    """torchvision-style ResNet (v1.5: stride on the 3x3 conv of bottlenecks).

    ``small_input=True`` replaces the 7x7/2 stem and max-pool by a 3x3/1 conv (the usual CIFAR
    adaptation), so 32 px inputs keep a 4x4 map before the global pool.
    """

    def __init__(self, block: type, layers: tuple[int, ...], num_classes: int, in_channels: int,
                 small_input: bool) -> None:
        super().__init__()
        self.small_input = bool(small_input)
        if self.small_input:
            self.stem = nn.Sequential(nn.Conv2d(in_channels, 64, 3, padding=1, bias=False),
                                      nn.BatchNorm2d(64), nn.ReLU(inplace=True))
        else:
            self.stem = nn.Sequential(nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False),
                                      nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                                      nn.MaxPool2d(3, stride=2, padding=1))
        stages: list[nn.Module] = []
        cin = 64
        for i, (planes, n) in enumerate(zip((64, 128, 256, 512), layers)):
            blocks = []
            for b in range(n):
                blocks.append(block(cin, planes, 2 if (i > 0 and b == 0) else 1))
                cin = planes * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self._init_head(cin, num_classes, in_channels)
        kaiming_init(self)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)


def _small(image_size: int | None, small_input: bool | None) -> bool:
    return small_stem(image_size, small_input)  # the one rule (a config resolves the stem with it)


def _resnet18(num_classes: int, in_channels: int, image_size: int | None = None, *,
              small_input: bool | None = None) -> Backbone:
    """ResNet-18; small-input stem when ``image_size <= 64`` unless ``small_input`` says otherwise."""
    return ResNet(BasicBlock, (2, 2, 2, 2), num_classes, in_channels, _small(image_size, small_input))


def _cifar_resnet34(num_classes: int, in_channels: int, image_size: int | None = None) -> Backbone:
    """ResNet-34 with the CIFAR stem at any input size (3x3/1 conv, no max-pool; stages 3-4-6-3 of
    basic blocks, widths 64-512, projection shortcuts where the shape changes): dm_nevis's
    ``CifarResNet34`` (``experiments_jax/training/resnet.py``), the Nevis'22 fine-tuning backbone."""
    return ResNet(BasicBlock, (3, 4, 6, 3), num_classes, in_channels, True)


def _resnet50(num_classes: int, in_channels: int, image_size: int | None = None, *,
              small_input: bool | None = None) -> Backbone:
    """ResNet-50; small-input stem when ``image_size <= 64`` unless ``small_input`` says otherwise."""
    return ResNet(Bottleneck, (3, 4, 6, 3), num_classes, in_channels, _small(image_size, small_input))


# ------------------------------------------------------------------------------------- wrn16_8


class WideBlock(nn.Module):
    """Pre-activation wide basic block (Zagoruyko & Komodakis, 2016)."""

    def __init__(self, cin: int, cout: int, stride: int, dropout: float) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.dropout = dropout
        self.shortcut = (nn.Conv2d(cin, cout, 1, stride=stride, bias=False)
                         if stride != 1 or cin != cout else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        o = F.relu(self.bn1(x))
        idt = x if self.shortcut is None else self.shortcut(o)
        out = self.conv1(o)
        out = F.relu(self.bn2(out))
        if self.dropout > 0:
            out = F.dropout(out, p=self.dropout, training=self.training)
        out = self.conv2(out)
        return out + idt


class WideResNet(Backbone):
    """WRN-depth-k: 3 stages of (depth-4)/6 pre-activation blocks, widths 16k/32k/64k."""

    def __init__(self, num_classes: int, in_channels: int, depth: int = 16, widen: int = 8,
                 dropout: float = 0.0) -> None:
        super().__init__()
        if (depth - 4) % 6:
            raise InputError(f"depth: expected 6n+4 for a WideResNet, got {depth}")
        n = (depth - 4) // 6
        widths = (16, 16 * widen, 32 * widen, 64 * widen)
        self.conv1 = nn.Conv2d(in_channels, widths[0], 3, padding=1, bias=False)
        blocks: list[nn.Module] = []
        cin = widths[0]
        for stage in range(3):
            for b in range(n):
                blocks.append(WideBlock(cin, widths[stage + 1], 2 if (stage > 0 and b == 0) else 1, dropout))
                cin = widths[stage + 1]
        self.blocks = nn.Sequential(*blocks)
        self.bn = nn.BatchNorm2d(cin)
        self._init_head(cin, num_classes, in_channels)
        kaiming_init(self)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.conv1(x))
        x = F.relu(self.bn(x))
        return torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)


def _wrn16_8(num_classes: int, in_channels: int, image_size: int | None = None, *,
             dropout: float = 0.0) -> Backbone:
    return WideResNet(num_classes, in_channels, depth=16, widen=8, dropout=dropout)


# ------------------------------------------------------------------------------------ vit_small


def build_model(name: str, *, num_classes: int, in_channels: int, image_size: int | None = None,
                seed: int | None = None, pretrained: str | None = None, **options) -> Backbone:
    """Build a registered backbone with a fresh linear head.

    Parameters
    ----------
    name : str
        Registry name (see ``models.names()``); unknown names raise with suggestions. A name with a
        colon, ``MODULE:FUNCTION`` or ``timm:NAME``, builds a network from that factory wrapped in
        :class:`~.external.ExternalBackbone` (see :mod:`.external`; no ``options``).
    num_classes : int
        Output size C of ``classifier``.
    in_channels : int
        Input bands B (1 for MNIST, 3 for RGB, 13 for EuroSAT).
    image_size : int, optional
        Side length in pixels. ResNet-18/50 use the small-input stem when it is <= 64; ViT uses it
        for its patch size and positional grid. The CNNs adapt to any size.
    seed : int, optional
        When given, the weights are initialised from ``torch.manual_seed(seed)`` without touching
        the global RNG state, so the same seed gives the same weights.
    **options
        Model-specific keyword options (``width`` for cnn28, ``small_input`` for ResNets,
        ``dropout`` for wrn16_8, ``dim``/``depth``/``heads``/``patch_size`` for vit_small).
    pretrained : str, optional
        A local ``.safetensors`` or ``.pt`` state dict loaded after building, the classifier head
        left out (it keeps its fresh ``num_classes`` outputs); see :func:`~.external.load_pretrained`.

    Returns
    -------
    Backbone
        ``model(x)`` maps (N, in_channels, H, W) float -> (N, num_classes) logits.
    """
    from .external import build_external, is_external, load_pretrained

    num_classes = check_value(num_classes, "num_classes", type=int, low=0, low_open=True)
    in_channels = check_value(in_channels, "in_channels", type=int, low=0, low_open=True)
    if image_size is not None:
        image_size = check_value(image_size, "image_size", type=int, low=0, low_open=True)
    if is_external(name):
        if options:
            raise InputError(f"model_opt: {', '.join(options)}: factory model {name!r} takes no vistabench options")

        def factory(c: int, b: int, s: int | None) -> nn.Module:
            return build_external(name, num_classes=c, in_channels=b, image_size=s)
    else:
        factory = models.get(name).load()
    try:
        if seed is None:
            net = factory(num_classes, in_channels, image_size, **options)
        else:
            with seeded(int(seed)):
                net = factory(num_classes, in_channels, image_size, **options)
    except TypeError as exc:
        if "unexpected keyword" in str(exc):
            raise InputError(f"model {name!r}: {exc}") from exc
        raise
    if pretrained is not None:
        load_pretrained(net, pretrained)
    return net  # type: ignore[return-value]  # an ExternalBackbone has the Backbone interface

