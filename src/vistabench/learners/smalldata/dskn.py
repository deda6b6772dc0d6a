"""Dual Selective Kernel Networks (Sun et al., ECCV-W 2020), with gem's composite loss by default.

Following the reference implementation (github.com/lorenzobrigato/gem, ``pipelines/dsk/``):

- :class:`SKBlock` (selective kernel, Li et al. CVPR 2019): M = 2 grouped 3 x 3 branches with
  dilation 1 and 2 (anti-aliased :class:`BlurPool` when strided), U = Σ branches, s = GAP(U),
  z = ReLU(BN(W s)) with ``d = max(channels / r, L)`` (r = 16, L = 32), per-branch attention
  ``a_m = softmax_m(W_m z)`` (the M weights of every channel sum to one), output Σ_m a_m · branch_m.
- :class:`DSKBasicBlock`: two residual SK branches (SK → BN → ReLU → SK → BN); during training
  ONE of them, drawn at random, is used, at inference both with weight 1/2; shortcut with a
  1 x 1 conv + BlurPool when the shape changes. As gem, both branches run in training and the
  one not drawn is multiplied by 0 (``dual_forward="both"``; ``"drawn"`` runs only the drawn one).
- Each basic/bottleneck branch ends in a ReLU before the branches are summed (gem's
  ``SKBasicBlock``/``SKBottleneck`` apply ``relu(out + 0)``; ``branch_relu=False``: no ReLU).
- :class:`DSKBottleneck` (ResNet-50): two branches of 1 x 1 → SK (on 2·planes channels) → 1 x 1;
  :class:`DSKWideBlock` (WRN): two pre-activation branches BN → ReLU → SK → BN → ReLU → SK, no
  ReLU after the sum, shortcut without BN: 1 x 1 conv + BlurPool at the block's stride, also 1
  where only the width changes (gem; ``wide_shortcut="plain"``: BlurPool only when strided).
- The network copies the backbone's layout: ResNet-18/50 → same stages with DSK basic/bottleneck
  blocks (groups 32); WRN-16-8 → same widths with DSK wide blocks (groups 8); ResNet-32 → 3 x 5
  DSK basic blocks of 16/32/64 channels (groups 8); ``cnn28`` (not in the reference) → one DSK
  basic block per 16/32/64 stage; other backbones (``vit_small``) are refused.
- Loss (gem's default, ``loss="composite"``): an extra linear projection before the classifier,
  ``positive_class_loss(z, y) + 0.5 · centre_loss(projection, y)`` with the class centres trained by
  SGD at lr 0.5 (:class:`DSKNCompositeLoss`); ``loss="ce"``: cross-entropy on the plain network.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import InputError
from .. import models as backbones
from .registry import MethodContext

__all__ = ["BlurPool", "SKBlock", "DSKBasicBlock", "DSKBottleneck", "DSKWideBlock", "DSKNet", "DSKNCompositeModel",
           "DSKNCompositeLoss", "positive_class_loss", "centre_loss", "build"]


class BlurPool(nn.Module):
    """Anti-aliased down-sampling (Zhang 2019): [1, 2, 1]ᵀ[1, 2, 1] / 16 blur, reflection pad, stride."""

    def __init__(self, channels: int, stride: int = 2) -> None:
        super().__init__()
        a = torch.tensor([1.0, 2.0, 1.0])
        filt = (a[:, None] * a[None, :]) / 16.0
        self.register_buffer("filt", filt[None, None].repeat(channels, 1, 1, 1))
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), self.filt, stride=self.stride, groups=x.shape[1])


class SKBlock(nn.Module):
    """Selective kernel convolution ``cin -> cout`` with ``branches`` dilations 1..M."""

    def __init__(self, cin: int, cout: int, *, stride: int = 1, branches: int = 2, groups: int = 8,
                 r: int = 16, min_dim: int = 32) -> None:
        super().__init__()
        d = max(cout // r, min_dim)
        self.branches, self.cout = branches, cout
        self.convs = nn.ModuleList()
        for i in range(branches):
            layers: list[nn.Module] = [nn.Conv2d(cin, cout, 3, padding=1 + i, dilation=1 + i, groups=groups, bias=False)]
            if stride > 1:
                layers.append(BlurPool(cout, stride))
            layers += [nn.BatchNorm2d(cout), nn.ReLU(inplace=False)]
            self.convs.append(nn.Sequential(*layers))
        self.fc = nn.Sequential(nn.Conv2d(cout, d, 1, bias=False), nn.BatchNorm2d(d), nn.ReLU(inplace=False))
        self.fcs = nn.ModuleList(nn.Conv2d(d, cout, 1) for _ in range(branches))
        self.last_attention: torch.Tensor | None = None

    def attention(self, feats: torch.Tensor) -> torch.Tensor:
        """Branch weights, shape (N, M, C, 1, 1), for branch outputs ``feats`` (N, M, C, H, W)."""
        z = self.fc(feats.sum(1).mean((2, 3), keepdim=True))
        return torch.softmax(torch.stack([fc(z) for fc in self.fcs], 1), dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = torch.stack([c(x) for c in self.convs], 1)
        a = self.attention(feats)
        self.last_attention = a.detach()
        return (feats * a).sum(1)


class _SKBasic(nn.Module):
    """SK -> BN -> ReLU -> SK -> BN, then a ReLU when ``relu_out`` (gem: its ``SKBasicBlock`` ends in
    ``relu(out + downsample(x))`` with the branch's downsample the constant 0)."""

    relu_out = True

    def __init__(self, cin: int, cout: int, stride: int, groups: int) -> None:
        super().__init__()
        self.sk1 = SKBlock(cin, cout, stride=stride, groups=groups)
        self.bn1 = nn.BatchNorm2d(cout)
        self.sk2 = SKBlock(cout, cout, groups=groups)
        self.bn2 = nn.BatchNorm2d(cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.sk2(F.relu(self.bn1(self.sk1(x)))))
        return F.relu(out) if self.relu_out else out


def _shortcut(cin: int, cout: int, stride: int, *, bn: bool = True, blur_always: bool = False) -> nn.Module:
    """Identity, or a 1 x 1 conv (+ BlurPool when strided, or always with ``blur_always``: gem's wide
    block, ``BlurPool(stride=1)`` a plain blur) (+ BN) — the reference's blur_downsampling."""
    if stride == 1 and cin == cout:
        return nn.Identity()
    sc: list[nn.Module] = [nn.Conv2d(cin, cout, 1, bias=False)]
    if stride > 1 or blur_always:
        sc.append(BlurPool(cout, stride))
    if bn:
        sc.append(nn.BatchNorm2d(cout))
    return nn.Sequential(*sc)


class _SKBottleneck(nn.Module):
    """1 x 1 (cin -> M·planes) -> SK -> 1 x 1 (-> 4·planes), BN after each; no residual of its own;
    a final ReLU when ``relu_out`` (gem's ``SKBottleneck``: ``relu(out + 0)``)."""

    relu_out = True

    def __init__(self, cin: int, planes: int, stride: int, groups: int, branches: int = 2) -> None:
        super().__init__()
        mid = planes * branches
        self.conv1 = nn.Sequential(nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True))
        self.sk = SKBlock(mid, mid, stride=stride, branches=branches, groups=groups)
        self.conv3 = nn.Sequential(nn.Conv2d(mid, planes * 4, 1, bias=False), nn.BatchNorm2d(planes * 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv3(self.sk(self.conv1(x)))
        return F.relu(out) if self.relu_out else out


class _SKWide(nn.Module):
    """Pre-activation: BN -> ReLU -> SK(stride) -> BN -> ReLU -> SK."""

    def __init__(self, cin: int, cout: int, stride: int, groups: int) -> None:
        super().__init__()
        self.bn1, self.sk1 = nn.BatchNorm2d(cin), SKBlock(cin, cout, stride=stride, groups=groups)
        self.bn2, self.sk2 = nn.BatchNorm2d(cout), SKBlock(cout, cout, groups=groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.sk2(F.relu(self.bn2(self.sk1(F.relu(self.bn1(x))))))


class _Dual(nn.Module):
    """Two branches, one drawn at random per training forward, averaged at inference, + shortcut.

    ``both_branches`` (gem, ``selective_kernel.py``): a training forward runs both branches and
    multiplies the one not drawn by 0 — it still receives a (zero) gradient, hence weight decay and
    momentum, and its BN statistics move; False: only the drawn branch runs."""

    relu_out = True
    both_branches = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and self.both_branches:
            w = torch.randint(0, 2, ()).to(x.dtype)
            out = w * self.branch1(x) + (1 - w) * self.branch2(x)
        elif self.training:
            w = float(torch.randint(0, 2, ()))
            out = self.branch1(x) if w == 1.0 else self.branch2(x)
        else:
            out = 0.5 * self.branch1(x) + 0.5 * self.branch2(x)
        out = out + self.shortcut(x)
        return F.relu(out) if self.relu_out else out


class DSKBasicBlock(_Dual):
    """Two SK residual branches, one drawn at random per training forward, averaged at inference."""

    def __init__(self, cin: int, cout: int, stride: int = 1, groups: int = 8) -> None:
        super().__init__()
        self.branch1 = _SKBasic(cin, cout, stride, groups)
        self.branch2 = _SKBasic(cin, cout, stride, groups)
        self.shortcut = _shortcut(cin, cout, stride)


class DSKBottleneck(_Dual):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1, groups: int = 32) -> None:
        super().__init__()
        self.branch1 = _SKBottleneck(cin, planes, stride, groups)
        self.branch2 = _SKBottleneck(cin, planes, stride, groups)
        self.shortcut = _shortcut(cin, planes * 4, stride)


class DSKWideBlock(_Dual):
    """The reference's wide dual block: no ReLU after the sum (pre-activation network)."""

    relu_out = False

    def __init__(self, cin: int, cout: int, stride: int = 1, groups: int = 8, blur_shortcut: bool = True) -> None:
        super().__init__()
        self.branch1 = _SKWide(cin, cout, stride, groups)
        self.branch2 = _SKWide(cin, cout, stride, groups)
        self.shortcut = _shortcut(cin, cout, stride, bn=False, blur_always=blur_shortcut)


class DSKNet(backbones.Backbone):
    """Stem + stages of dual selective kernel blocks; global average pooling; linear head.

    ``block``: ``"basic"`` (:class:`DSKBasicBlock`), ``"bottleneck"`` (:class:`DSKBottleneck`,
    4x expansion) or ``"wide"`` (:class:`DSKWideBlock`, pre-activation, final BN + ReLU).
    """

    def __init__(self, num_classes: int, in_channels: int, *, widths: tuple[int, ...], blocks: tuple[int, ...],
                 groups: int, stem: str, block: str = "basic", stem_width: int | None = None,
                 blur_shortcut: bool = True) -> None:
        super().__init__()
        w0 = stem_width or widths[0]
        if stem == "imagenet":
            self.stem = nn.Sequential(nn.Conv2d(in_channels, w0, 7, stride=2, padding=3, bias=False),
                                      nn.BatchNorm2d(w0), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        elif block == "wide":
            self.stem = nn.Conv2d(in_channels, w0, 3, padding=1, bias=False)
        else:
            self.stem = nn.Sequential(nn.Conv2d(in_channels, w0, 3, padding=1, bias=False), nn.BatchNorm2d(w0),
                                      nn.ReLU(inplace=True))
        layers: list[nn.Module] = []
        cin = w0
        for i, (w, n) in enumerate(zip(widths, blocks)):
            for b in range(n):
                stride = 2 if (i > 0 and b == 0) else 1
                if block == "bottleneck":
                    layers.append(DSKBottleneck(cin, w, stride, groups))
                    cin = 4 * w
                elif block == "wide":
                    layers.append(DSKWideBlock(cin, w, stride, groups, blur_shortcut))
                    cin = w
                else:
                    layers.append(DSKBasicBlock(cin, w, stride, groups))
                    cin = w
        self.stages = nn.Sequential(*layers)
        self.post: nn.Module = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU()) if block == "wide" else nn.Identity()
        self._init_head(cin, num_classes, in_channels)
        backbones.kaiming_init(self)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(F.adaptive_avg_pool2d(self.post(self.stages(self.stem(x))), 1), 1)


def dskn_like(base: nn.Module, model_name: str = "the model", *, blur_shortcut: bool = True) -> DSKNet:
    """The DSK network with ``base``'s layout (see the module docstring); other backbones are refused.
    ``blur_shortcut``: the WRN blocks' shortcut blurs at stride 1 too (gem)."""
    c, k = base.num_classes, base.in_channels
    if isinstance(base, backbones.ResNet):
        bottleneck = isinstance(base.stages[0][0], backbones.Bottleneck)
        return DSKNet(c, k, widths=(64, 128, 256, 512), blocks=tuple(len(s) for s in base.stages), groups=32,
                      stem="cifar" if base.small_input else "imagenet",
                      block="bottleneck" if bottleneck else "basic", stem_width=64)
    if isinstance(base, backbones.WideResNet):
        n = len(base.blocks) // 3
        widths = tuple(base.blocks[i * n].conv1.out_channels for i in range(3))
        return DSKNet(c, k, widths=widths, blocks=(n, n, n), groups=8, stem="cifar", block="wide", stem_width=16,
                      blur_shortcut=blur_shortcut)
    if isinstance(base, backbones.CifarResNet):
        n = len(base.layers) // 3
        return DSKNet(c, k, widths=(16, 32, 64), blocks=(n, n, n), groups=8, stem="cifar")
    if isinstance(base, backbones.CNN28):
        return DSKNet(c, k, widths=(16, 32, 64), blocks=(1, 1, 1), groups=8, stem="cifar")
    raise InputError(f"model: method 'dskn' replaces the blocks of a convolutional backbone (resnet18, resnet50, "
                     f"resnet32, wrn16_8, cnn28); {model_name!r} has none")


class DSKNCompositeModel(nn.Module):
    """gem's ``FeatureModelWrapper``: backbone features -> ``projection`` (linear, the centre loss's
    space) -> ``classifier`` (linear). A training forward keeps the projected features."""

    def __init__(self, net: DSKNet, dim: int | None = None) -> None:
        super().__init__()
        self.base = net
        self.in_channels, self.num_classes = net.in_channels, net.num_classes
        self.feature_dim = int(dim or net.feature_dim)
        self.projection = nn.Linear(net.feature_dim, self.feature_dim)
        self.classifier = nn.Linear(self.feature_dim, net.num_classes)
        self.last_features: torch.Tensor | None = None

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.projection(self.base.features(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.features(x)
        self.last_features = f if (self.training and torch.is_grad_enabled()) else None
        return self.classifier(f)


def positive_class_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """gem's ``PositiveClassLoss``: ``mean(−log σ(z_y)) + mean(1 − z_y / ‖z‖)``."""
    zy = logits.gather(1, y[:, None]).squeeze(1)
    return (-F.logsigmoid(zy)).mean() + (1.0 - zy / logits.norm(dim=1)).mean()


def centre_loss(features: torch.Tensor, centres: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """gem's ``CenterLoss``: ``mean(clamp(2 − 2 cos(f_i, c_{y_i}), 1e-12, 1e12))`` (norms clamped at 1e-8)."""
    fn = features / features.norm(dim=1, keepdim=True).clamp(min=1e-8)
    cn = centres / centres.norm(dim=1, keepdim=True).clamp(min=1e-8)
    return (2 - 2 * (fn * cn[y]).sum(1)).clamp(min=1e-12, max=1e12).mean()


class DSKNCompositeLoss(nn.Module):
    """``positive_class_loss + centre_weight · centre_loss`` with learned class centres (randn init).

    The centres take plain SGD steps (no momentum, no weight decay) of ``centre_lr`` times their
    gradient of the total loss, as gem's ``SGDWithCenterLoss`` does in effect (its division of that
    gradient by the weight loops over a generator the optimiser already consumed, so it never runs).
    The trainer's optimiser holds the model's parameters only: a step's centre update is applied at
    the start of the next forward, before the centres are used again (the same sequence of values).
    """

    def __init__(self, model: DSKNCompositeModel, *, centre_weight: float, centre_lr: float) -> None:
        super().__init__()
        self._model = [model]
        self.centre_weight, self.centre_lr = float(centre_weight), float(centre_lr)
        self.centres = nn.Parameter(torch.randn(model.num_classes, model.feature_dim))

    def _apply_centre_step(self) -> None:
        if self.centres.grad is not None:
            with torch.no_grad():
                self.centres -= self.centre_lr * self.centres.grad
            self.centres.grad = None

    def forward(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self._apply_centre_step()
        loss = positive_class_loss(logits, y)
        feats = self._model[0].last_features
        if feats is None:  # an evaluation forward: no centre term
            return loss
        return loss + self.centre_weight * centre_loss(feats, self.centres, y)


def build(base: nn.Module, config: dict, ctx: MethodContext) -> tuple[nn.Module, nn.Module | None]:
    net = dskn_like(base, ctx.recipe.model, blur_shortcut=config.get("wide_shortcut", "blur") == "blur")
    both = config.get("dual_forward", "both") == "both"
    branch_relu = bool(config.get("branch_relu", True))
    for m in net.modules():
        if isinstance(m, _Dual):
            m.both_branches = both
        if isinstance(m, (_SKBasic, _SKBottleneck)):
            m.relu_out = branch_relu
    if config.get("loss", "composite") == "ce":
        return net, None
    model = DSKNCompositeModel(net, config.get("centre_dim"))
    return model, DSKNCompositeLoss(model, centre_weight=float(config.get("centre_weight", 0.5)),
                                    centre_lr=float(config.get("centre_lr", 0.5)))
