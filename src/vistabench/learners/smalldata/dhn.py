"""Deep hybrid networks (Oyallon et al., ICCV 2017 / TPAMI 2019): fixed scattering, then conv blocks.

A second-order 2-D scattering transform with L = 8 orientations and scale J (searched) turns a
C x H x W image into ``C · K`` channels of size H/2^J x W/2^J, ``K = 1 + J L + L² J (J − 1) / 2``;
it is computed by Kymatio (``Scattering2D``, the package the reference implementation
github.com/lorenzobrigato/gem, ``pipelines/scattering.py``, uses). As there, the coefficients
pass a batch norm without affine parameters, then a learned 3 x 3 conv + BN + ReLU and the
convolutional blocks: the residual backbones' later stages at stride 1 (:class:`HybridBackbone`,
the reference's adaptation); for ``cnn28`` (not in the reference) two wide residual blocks of
64/128 channels (:class:`HybridNet`).

Kymatio's ``kymatio.torch`` entry point also imports its 3-D module, which needs
``scipy.special.sph_harm`` (removed in SciPy 1.15); the 2-D front end is imported directly.

Cost. The transform has no parameters, so its output depends on the input image alone: it is
computed at most once per distinct input and kept in a process-wide cache (:class:`ScatteringCache`,
keyed by the scale, the input's shape, dtype, device and a BLAKE2b digest of its bytes; least
recently used entries leave past ``max_bytes``). Inputs of a training step that a random
augmentation touched are computed but not kept (the trainer says so through
``Scattering.inputs_augmented``); validation, test and un-augmented training images (and the same
images again in every epoch, trial and repeat of a run) are computed once, a fit's un-augmented
training set up front in large batches (``warm_inputs``, called by the trainer: Kymatio's cost per
call hardly depends on its size). The filter banks are built once per process. On a CPU, Kymatio runs
with one torch thread: its hundreds of small FFTs (MKL) spin-wait in every multi-threaded call (20x
the processor time on 2 busy cores); a batch of 64 images or more is computed as two halves at once,
in two threads of one OpenMP thread each. Kymatio's output for an image does not depend on the batch
it is computed in, nor on the thread count (bit for bit; tests/smalldata/test_dhn_cache.py), so the
cache, the halves and the thread setting change no number.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import InputError
from .. import models as backbones
from .registry import MethodContext

__all__ = ["scattering_channels", "ScatteringCache", "SCATTERING_CACHE", "Scattering", "HybridNet", "HybridBackbone",
           "build"]

ORIENTATIONS = 8


def scattering_channels(J: int, L: int = ORIENTATIONS) -> int:
    """Coefficients per input channel of an order-2 scattering: ``1 + J L + L² J (J − 1) / 2``."""
    return 1 + J * L + L * L * J * (J - 1) // 2


@dataclass
class ScatteringCache:
    """Scattering outputs per distinct input image, least recently used first out past ``max_bytes``.

    ``enabled=False`` computes every batch anew; ``one_thread=False`` runs Kymatio on torch's
    thread count; ``warm=False`` leaves a fit's training set to its batches (:meth:`Scattering.warm`
    does nothing); ``halves=False`` computes a large batch in one thread (else its two halves at
    once, :func:`_in_two_threads`): each as before, for benchmarks/smalldata_dhn_cache.py.
    ``computed`` counts the images Kymatio transformed, ``hits`` those served from the cache."""

    enabled: bool = True
    max_bytes: int = 512 * 2**20
    one_thread: bool = True
    warm: bool = True
    halves: bool = True
    computed: int = 0
    hits: int = 0

    def __post_init__(self) -> None:
        self._store: OrderedDict[tuple, torch.Tensor] = OrderedDict()
        self._bytes = 0
        #: held while a batch is looked up and its missing rows computed: fits training at once
        #: (lanes, ``vistabench.learners.lanes``) compute an input once, the others find it
        self.lock = threading.RLock()

    def clear(self) -> None:
        """Drop every entry and zero the counters."""
        self._store.clear()
        self._bytes = self.computed = self.hits = 0

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._store)

    def get(self, key: tuple) -> torch.Tensor | None:
        value = self._store.get(key)
        if value is not None:
            self._store.move_to_end(key)
            self.hits += 1
        return value

    def peek(self, key: tuple) -> torch.Tensor | None:
        """The entry of ``key`` without using it (no hit counted, its age unchanged)."""
        return self._store.get(key)

    def put(self, key: tuple, value: torch.Tensor) -> None:
        size = value.numel() * value.element_size()
        if size > self.max_bytes or key in self._store:
            return
        self._store[key] = value
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, old = self._store.popitem(last=False)
            self._bytes -= old.numel() * old.element_size()


SCATTERING_CACHE = ScatteringCache()
_BANKS: dict[tuple, nn.Module] = {}  # Kymatio filter banks by (J, H, W, device), shared by every Scattering


def _image_keys(x: torch.Tensor, J: int) -> list[tuple]:
    """One key per image of the (N, C, H, W) batch: scale, shape, dtype, device, autocast, digest."""
    host = x.detach().contiguous().cpu().reshape(len(x), -1).view(torch.uint8).numpy()  # any dtype's bytes
    head = (J, tuple(x.shape[1:]), str(x.dtype), str(x.device), torch.is_autocast_enabled(x.device.type))
    return [(*head, hashlib.blake2b(host[i], digest_size=16).digest()) for i in range(len(host))]


class Scattering(nn.Module):
    """(N, C, H, W) -> (N, C·K, H/2^J, W/2^J); the Kymatio filter bank is built per input size.

    Outputs are cached per distinct input (:data:`SCATTERING_CACHE`, see the module docstring);
    ``inputs_augmented = True`` (set by the trainer when its batches are randomly augmented) keeps
    the training-mode inputs out of the cache."""

    def __init__(self, J: int) -> None:
        super().__init__()
        self.J = int(J)
        self.inputs_augmented = False

    def _bank(self, h: int, w: int, device: torch.device) -> nn.Module:
        key = (self.J, h, w, str(device))
        if key not in _BANKS:  # built once per process (~0.3 s), shared: the filters never change
            from kymatio.scattering2d.frontend.torch_frontend import ScatteringTorch2D

            if min(h, w) < 2 ** self.J:
                raise InputError(f"method 'dhn': scale J={self.J} needs images of at least {2 ** self.J} px, "
                                 f"got {h}x{w}")
            _BANKS[key] = ScatteringTorch2D(J=self.J, shape=(h, w), L=ORIENTATIONS).to(device)
        return _BANKS[key]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        if x.device.type == "meta":  # FLOP counting: fixed filters, shape only
            k = scattering_channels(self.J)
            return x.new_zeros((n, c * k, -(-h // 2 ** self.J), -(-w // 2 ** self.J)))
        cache = SCATTERING_CACHE
        if not cache.enabled or n == 0 or x.requires_grad or (self.training and self.inputs_augmented):
            cache.computed += n
            return self._compute(x)
        keys = _image_keys(x, self.J)
        with cache.lock:
            found = [cache.get(k) for k in keys]
            fresh = self._fill(x, keys, found)
        found = [fresh[k] if v is None else v for k, v in zip(keys, found)]
        return torch.stack(found)  # type: ignore[arg-type]  # every row found or computed above

    def _fill(self, x: torch.Tensor, keys: list[tuple], found: list) -> dict[tuple, torch.Tensor]:
        """Compute the rows of ``x`` whose key was not ``found`` (each distinct key once) in one
        Kymatio call, put them in the cache and return them by key."""
        first: dict[tuple, int] = {}  # a key missing from the cache -> its first row in the batch
        for i, (k, v) in enumerate(zip(keys, found)):
            if v is None:
                first.setdefault(k, i)
        if not first:
            return {}
        out = self._compute(x[list(first.values())])
        SCATTERING_CACHE.computed += len(first)
        fresh = {k: out[j].clone() for j, k in enumerate(first)}  # own storage, not a view of the batch
        for k, v in fresh.items():
            SCATTERING_CACHE.put(k, v)
        return fresh

    @torch.no_grad()
    def warm(self, x: torch.Tensor) -> bool:
        """Put the coefficients of the (N, C, H, W) inputs ``x`` in the cache ahead of use, the
        missing ones in one Kymatio call (a call costs ~0.15 s of overhead on a CPU whatever its
        size: 16 ms per 8 x 8 image in batches of 10, 2 ms in batches of 250). Returns whether
        they all fit: False when the cache (or its ``warm``) is off, or would evict entries to keep
        them (then the caller should stop warming, and the batches are computed as they come)."""
        cache = SCATTERING_CACHE
        if not (cache.enabled and cache.warm) or len(x) == 0 or x.device.type == "meta":
            return False
        keys = _image_keys(x, self.J)
        with cache.lock:
            found = [cache.peek(k) for k in keys]
            missing = len({k for k, v in zip(keys, found) if v is None})
            if missing:
                per_image = self._bytes_per_image(x)
                if cache.nbytes + missing * per_image > cache.max_bytes:
                    return False
                self._fill(x, keys, found)
        return True

    def _bytes_per_image(self, x: torch.Tensor) -> int:
        k = scattering_channels(self.J) * x.shape[1]
        return k * -(-x.shape[2] // 2 ** self.J) * -(-x.shape[3] // 2 ** self.J) * x.element_size()

    def _compute(self, x: torch.Tensor) -> torch.Tensor:
        """Kymatio on the batch, (N, C·K, H', W'); on a CPU with one torch thread (module docstring)."""
        bank = self._bank(x.shape[2], x.shape[3], x.device)
        threads = torch.get_num_threads()
        single = x.device.type == "cpu" and threads > 1 and SCATTERING_CACHE.one_thread
        if single:
            torch.set_num_threads(1)
        try:
            if single and SCATTERING_CACHE.halves and len(x) >= HALVES_MIN:
                s = _in_two_threads(bank, x)
            else:
                s = bank(x.contiguous())  # (N, C, K, H', W')
        finally:
            if single:
                torch.set_num_threads(threads)
        return s.flatten(1, 2)

    def __deepcopy__(self, memo: dict) -> "Scattering":
        copy = Scattering(self.J)
        copy.inputs_augmented = self.inputs_augmented
        return copy


#: batches of at least this many images are computed as two halves at once (:func:`_in_two_threads`)
HALVES_MIN = 64


def _in_two_threads(bank: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``bank`` (a Kymatio transform) on the two halves of ``x`` at once, this thread and a second,
    each on one OpenMP thread, concatenated: the same bits as one call (an image's coefficients do
    not depend on its batch nor the thread count), on two CPUs. The caller has set torch's threads
    to one; a new thread starts with the OpenMP runtime's default team, so the second sets its own
    (:func:`~vistabench.learners.openmp.one_thread`). One call where that runtime is not found."""
    from concurrent.futures import ThreadPoolExecutor

    from ..openmp import one_thread, runtime

    if runtime() is None:
        return bank(x.contiguous())
    h = len(x) // 2

    def second() -> torch.Tensor:
        with one_thread():
            return bank(x[h:].contiguous())

    with ThreadPoolExecutor(1, thread_name_prefix="vistabench-scattering") as pool:
        later = pool.submit(second)
        first = bank(x[:h].contiguous())
        return torch.cat([first, later.result()])


class _Wide(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.bn1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2, self.conv2 = nn.BatchNorm2d(cout), nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.short = nn.Conv2d(cin, cout, 1, stride, bias=False) if (stride != 1 or cin != cout) else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        o = F.relu(self.bn1(x))
        idt = x if self.short is None else self.short(o)
        return self.conv2(F.relu(self.bn2(self.conv1(o)))) + idt


class _ScatteringFirst:
    """A network whose forward starts with ``self.scattering`` on its input as it is."""

    scattering: Scattering

    def warm_inputs(self, x: torch.Tensor) -> bool:
        """Cache the scattering of inputs ``x`` (as ``forward`` gets them) ahead of use: the trainer
        calls it on a fit's un-augmented training set in large batches (:meth:`Scattering.warm`)."""
        return self.scattering.warm(x)


class HybridNet(_ScatteringFirst, backbones.Backbone):
    """Scattering(J) -> BN (no affine) -> conv3x3 + BN + ReLU -> 2 wide residual blocks -> pool -> linear."""

    def __init__(self, num_classes: int, in_channels: int, *, J: int, widths: tuple[int, int]) -> None:
        super().__init__()
        k = in_channels * scattering_channels(J)
        self.scattering = Scattering(J)
        self.stem = nn.Sequential(nn.Conv2d(k, widths[0], 3, padding=1, bias=False), nn.BatchNorm2d(widths[0]),
                                  nn.ReLU(inplace=True))
        self.blocks = nn.Sequential(_Wide(widths[0], widths[0], 1), _Wide(widths[0], widths[1], 1))
        self.bn = nn.BatchNorm2d(widths[1])
        self._init_head(widths[1], num_classes, in_channels)
        backbones.kaiming_init(self)
        self.norm = nn.BatchNorm2d(k, affine=False)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(self.norm(self.scattering(x)))
        x = F.relu(self.bn(self.blocks(x)))
        return torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)


class HybridBackbone(_ScatteringFirst, backbones.Backbone):
    """The reference's adaptation of a residual backbone: its first stage(s) replaced by
    scattering -> BN (no affine) -> 3x3 conv + BN + ReLU to the next stage's input width, the
    down-sampling of the following stages removed (the scattering already sub-samples by 2^J),
    as in github.com/lorenzobrigato/gem ``pipelines/scattering.py``:

    - ``wrn16_8``: conv1 + stage 1 replaced; stages 2 and 3 at stride 1;
    - ``resnet32``: conv1 + stage 1 replaced; stages 2 and 3 at stride 1;
    - ``resnet18``/``resnet50``: stem + stages 1-2 replaced; stage 3 at stride 1 (ResNet-18: its
      first conv becomes width -> width, identity shortcut), stage 4 unchanged.

    ``stem="gem"``: the new convolutions keep PyTorch's default initialisation (gem builds them
    after the backbone's init); on the ImageNet-style ResNets the scattering BN has ``momentum=0.9``
    (PyTorch's convention: ``running = 0.1·running + 0.9·batch``, as gem's ``nn.BatchNorm2d(...,
    momentum=0.9)`` reads in PyTorch) and the 3x3 conv after it a bias (``nn.Conv2d`` default).
    ``"plain"``: Kaiming fan-out convolutions without bias, BN momentum 0.1.
    """

    def __init__(self, base: nn.Module, J: int, stem: str = "gem") -> None:
        super().__init__()
        k = base.in_channels * scattering_channels(J)
        self.post: nn.Module = nn.Identity()
        if isinstance(base, backbones.WideResNet):
            n = len(base.blocks) // 3
            tail = list(base.blocks[n:])
            width = tail[0].bn1.num_features
            for blk in (tail[0], tail[n]):
                blk.conv1.stride = (1, 1)
                if blk.shortcut is not None:
                    blk.shortcut.stride = (1, 1)
            self.post = nn.Sequential(base.bn, nn.ReLU())
        elif isinstance(base, backbones.CifarResNet):
            n = len(base.layers) // 3
            tail = list(base.layers[n:])
            width = tail[0].conv1.in_channels
            for blk in (tail[0], tail[n]):
                blk.conv1.stride, blk.stride = (1, 1), 1
        elif isinstance(base, backbones.ResNet):
            first = base.stages[2][0]
            if isinstance(first, backbones.BasicBlock):
                width = first.conv1.out_channels
                first.conv1 = nn.Conv2d(width, width, 3, padding=1, bias=False)
                if stem != "gem":
                    nn.init.kaiming_normal_(first.conv1.weight, mode="fan_out", nonlinearity="relu")
                first.downsample = None
            else:
                width = first.conv1.in_channels
                first.conv2.stride = (1, 1)
                first.downsample[0].stride = (1, 1)
            tail = [*base.stages[2], *base.stages[3]]
        else:
            raise InputError(f"method 'dhn': no hybrid adaptation for {type(base).__name__}")
        imagenet_gem = stem == "gem" and isinstance(base, backbones.ResNet)
        self.scattering = Scattering(J)
        self.norm = nn.BatchNorm2d(k, affine=False, momentum=0.9 if imagenet_gem else 0.1)
        self.stem = nn.Sequential(nn.Conv2d(k, width, 3, padding=1, bias=imagenet_gem), nn.BatchNorm2d(width),
                                  nn.ReLU(inplace=True))
        if stem != "gem":
            nn.init.kaiming_normal_(self.stem[0].weight, mode="fan_out", nonlinearity="relu")
        self.blocks = nn.Sequential(*tail)
        self.feature_dim, self.num_classes, self.in_channels = base.feature_dim, base.num_classes, base.in_channels
        self.classifier = base.classifier

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.post(self.blocks(self.stem(self.norm(self.scattering(x)))))
        return torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)


def build(base: nn.Module, config: dict, ctx: MethodContext) -> tuple[nn.Module, None]:
    """Residual backbones: :class:`HybridBackbone` (the reference's adaptation); others (``cnn28``,
    a custom backbone): :class:`HybridNet`. A run naming ``vit_small`` is refused by its config (the
    method is registered for the convolutional backbones only)."""
    J = int(config["scattering_J"])
    if isinstance(base, (backbones.WideResNet, backbones.CifarResNet, backbones.ResNet)):
        return HybridBackbone(base, J, stem=str(config.get("hybrid_stem", "gem"))), None
    widths = (64, 128) if isinstance(base, backbones.CNN28) else (128, 256)
    return HybridNet(base.num_classes, base.in_channels, J=J, widths=widths), None
