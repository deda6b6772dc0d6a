"""What the shared trainer is given and what it returns: :class:`TrainConfig` (hyper-parameters,
checked when made), :class:`TrainResult`, the device check and the protocols of a method's step
and an epoch callback. :mod:`.trainer` re-exports every name here.
"""

from __future__ import annotations

import dataclasses
import resource
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal, Protocol

import torch

from ..config import check_fields, option
from ..errors import InputError
from .recipe import (PRECISIONS as PRECISION_NAMES, RECIPE, TRAINER_FIELDS, Recipe, check_device, default_recipe,
                     recipe_values, recipe_with)
from .schedules import SCHEDULES

__all__ = ["TrainConfig", "TrainResult", "TrainingDiverged", "EpochCallback", "TrainStep", "resolve_device",
           "peak_rss_bytes", "Device", "Sampler", "Trainable", "PRECISIONS", "check_precision"]

Device = Literal["cpu", "cuda", "auto"]
Sampler = Literal["uniform", "class_balanced"]
Trainable = Literal["all", "classifier"]
#: ``TrainConfig.precision`` -> the autocast type (None: no autocast)
PRECISIONS: dict[str, torch.dtype | None] = dict(zip(PRECISION_NAMES, (None, torch.bfloat16, torch.float16)))


class TrainingDiverged(InputError, FloatingPointError):
    """The mean training loss of an epoch was NaN or infinite (usually: learning rate too high).

    A user error (the settings, not the code: one line, exit 2 on the command line); hyper-parameter
    searches catch it as a ``FloatingPointError`` and score the trial as failed.
    """


class EpochCallback(Protocol):
    def __call__(self, epoch: int, metrics: dict) -> bool | None: ...


class TrainStep(Protocol):
    """A method-defined training step: ``step(x, y, x2, y2, epoch) -> (loss, logits)``.

    ``x`` (n, B, H, W) is the normalised (and augmented) batch (channels-last memory on a CPU: use
    ``reshape``, not ``view``, to flatten it) and ``y`` (n,) its labels; ``x2, y2``
    are the batch of the second sampler (see ``Trainer.fit(second_sampler=...)``), None without
    one; ``epoch`` is 0-based. Returns the scalar loss to minimise and (n, C) logits for the
    training accuracy.
    """

    def __call__(self, x: torch.Tensor, y: torch.Tensor, x2: torch.Tensor | None, y2: torch.Tensor | None,
                 epoch: int) -> tuple[torch.Tensor, torch.Tensor]: ...


def resolve_device(device: str) -> torch.device:
    """``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"`` (cuda when available) -> torch.device.

    Raises InputError when cuda is asked for but not available.
    """
    check_device(device)  # the spelling: the recipe's one check
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    # "cuda" or "cuda:N"
    if not torch.cuda.is_available():
        raise InputError(
            f"device: {device!r} requested but CUDA is not available in this torch build "
            f"({torch.__version__}); use device='cpu' or 'auto'"
        )
    dev = torch.device(device)
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise InputError(f"device: {device!r} requested but only {torch.cuda.device_count()} CUDA devices exist")
    return dev


def check_precision(cfg: "TrainConfig", device: torch.device) -> None:
    """InputError when ``cfg.precision`` / ``cfg.compile`` cannot run on ``device`` (fp16 and compile need CUDA)."""
    if device.type != "cuda" and cfg.precision == "fp16":
        raise InputError(f"precision: fp16 needs a CUDA device (this run trains on {device.type}); "
                         "use bf16 on a CPU")
    if device.type != "cuda" and cfg.compile:
        raise InputError(f"compile: true needs a CUDA device (this run trains on {device.type}); leave it off")


@dataclass(init=False)
class TrainConfig:
    """Training hyper-parameters (all protocols share these names).

    Attributes
    ----------
    recipe : Recipe
        The training recipe (:class:`~.recipe.Recipe`, checked when made): epochs, lr, weight_decay,
        batch_size (>= 2), momentum, device, warmup_epochs, nesterov, threads, schedule, lr_milestones,
        lr_factors, warmup_start, precision, compile, loader, workers and devices below are its fields
        (``TrainConfig(epochs=3, lr=0.1)`` is ``TrainConfig(Recipe(epochs=3, lr=0.1))``; ``cfg.lr``
        reads ``cfg.recipe.lr``). The others are the trainer's own.
    epochs : int
        Passes over the training set (> 0).
    lr : float
        Peak learning rate of SGD (> 0).
    weight_decay : float
        L2 coefficient (>= 0).
    batch_size : int
        Images per step; larger than the training set is an error naming ``batch_size``.
    momentum : float
        SGD momentum in [0, 1].
    seed : int
        Seeds shuffling, sampling, augmentation and dropout.
    device : {"cpu", "cuda", "auto"} or "cuda:N"
        Checked for availability when the :class:`Trainer` is created (InputError if CUDA is
        asked for but missing); ``"auto"`` takes CUDA when available.
    label_smoothing : float
        For the default cross-entropy loss, in [0, 1].
    augment : bool or callable
        True: random crop after ``crop_padding`` zero padding + horizontal flip (for 32 px natural
        images; leave off for digits). A callable ``(x, generator) -> x`` on the float
        (n, C, H, W) batch replaces it (e.g. a dataset's :class:`vistabench.data.augment.Augmentation`).
    crop_padding : int
        Padding of the random crop (4 = the CIFAR convention).
    warmup_epochs : int
        Linear learning-rate warm-up before the cosine (0 = none).
    nesterov : bool
    eval_batch_size : int
        Batch size for prediction and validation; for image files on disk at most ``batch_size``
        (:meth:`~.trainer.Trainer.eval_batch`: memory bounded by a training step's).
    count_flops : bool
        Count FLOPs (one meta-device count per distinct batch size; see :mod:`.flops`).
    threads : int or None
        CPU threads torch may use during :meth:`Trainer.fit` and prediction (restored afterwards);
        None keeps torch's setting. On a busy machine 1 thread per training process is often
        several times faster than oversubscribed cores.
    schedule : {"cosine", "step", "cosine_epoch"}
        ``"cosine"``: per step (see :mod:`.schedules`). ``"step"``: per epoch, ``lr × lr_factors[i]`` from
        0-based epoch ``lr_milestones[i]`` on, after the per-epoch warm-up
        ``lr · (warmup_start + (1 − warmup_start)(e + 1)/warmup_epochs)``. ``"cosine_epoch"``: per
        epoch, ``lr (1 + cos(π (e + schedule_offset)/epochs))/2`` (offset 1: a scheduler stepped
        before the first epoch).
    lr_milestones, lr_factors : tuple
        The step schedule's 0-based epochs and the multipliers of ``lr`` from each on.
    warmup_start : float
        Lr factor the per-epoch warm-up of the step schedule starts from (0 or BBN's 1/3).
    schedule_offset : int
        Epoch offset of ``"cosine_epoch"``.
    drop_last : bool
        Leave an epoch's last incomplete batch out (PyTorch's ``DataLoader(drop_last=True)``, as
        BBN's training loader); False: it is trained on (a last batch of one image joins the one
        before).
    precision : {"fp32", "bf16", "fp16"}
        ``"fp32"``: plain float32 (the default; nothing else changes). ``"bf16"``/``"fp16"``: the
        forward passes and the loss run under ``torch.autocast`` in that type (the weights and the
        optimizer stay float32); ``"fp16"`` scales the loss with a ``torch.amp.GradScaler``. On CUDA a
        mixed precision also puts the model and the batches in channels-last memory. A CPU runs
        ``"bf16"``; ``"fp16"`` needs CUDA (an InputError naming ``precision`` when the Trainer is made
        on a CPU: CPU float16 autocast is slower than float32 and has no grad scaler).
    compile : bool
        Train and predict through ``torch.compile(model)`` (CUDA only: an InputError naming
        ``compile`` on a CPU, where compiling needs a C++ tool chain and takes longer than the
        short runs it would speed up).

    loader : {"memory", "stream", "device"}
        Where batches come from (:mod:`.sources`): ``"memory"`` cuts them from the images in the
        training process (arrays, or image files decoded there); ``"stream"`` reads and decodes
        them in ``workers`` processes of a ``torch.utils.data.DataLoader`` (images on disk, memory
        independent of the data set's size); ``"device"`` moves the whole uint8 set to the device
        once and converts and augments there. The same seed gives the same batches in each.
        Runtime only: it changes how fast training goes, not what it computes.
    workers : int
        Worker processes of the ``"stream"`` loader (0: it reads in the training process).
    devices : int
        Train data-parallel on this many devices (:mod:`.distributed`): one process per device
        (forked, gloo, on a CPU; spawned, NCCL, on ``cuda:k`` ... ``cuda:k+N-1``), each on its
        shard of the same global batch of ``batch_size`` images (at least ``devices``; a
        protocol's recipe asks for a multiple),
        gradients averaged after every step, batch norm synchronised on CUDA; the calling process
        is rank 0 and returns the trained model. 1 (the default): one device in this process.
        Under ``torchrun`` it must equal the processes per node.

    A protocol's training recipe (:mod:`.recipe`) becomes a TrainConfig through :meth:`from_recipe`.
    """

    recipe: Recipe = field(default_factory=default_recipe)
    seed: int = option(0, help="seeds shuffling, sampling, augmentation and dropout")
    label_smoothing: float = option(0.0, low=0, high=1, help="of the default cross-entropy loss")
    augment: bool | Callable = False  # a callable is no config value: checked below
    crop_padding: int = option(4, low=0, help="padding of the random crop")
    eval_batch_size: int = option(512, low=1, help="batch size of prediction and validation (files on disk: at most batch_size)")
    count_flops: bool = option(True, help="count FLOPs")
    schedule_offset: int = option(0, low=0, help="epoch offset of cosine_epoch")
    drop_last: bool = option(False, help="leave an epoch's last incomplete batch out")

    def __init__(self, recipe: Recipe | None = None, **settings: Any) -> None:
        own = {f.name: f for f in dataclasses.fields(self) if f.name != "recipe"}
        unknown = sorted(set(settings) - set(own) - set(RECIPE))
        if unknown:
            raise TypeError(f"TrainConfig: unknown field {unknown[0]!r}")  # a caller's bug
        stage = {k: v for k, v in settings.items() if k in RECIPE}
        base = Recipe() if recipe is None else recipe
        if not isinstance(base, Recipe):
            raise TypeError(f"recipe: expected a Recipe, got {type(base).__name__}")  # a caller's bug
        self.recipe = base.replace(**stage) if stage else base
        for name, f in own.items():
            setattr(self, name, settings[name] if name in settings else f.default)
        self.__post_init__()

    def __getattr__(self, name: str) -> Any:
        # the recipe's fields read through: ``cfg.lr`` is ``cfg.recipe.lr``
        if name in RECIPE and "recipe" in self.__dict__:
            return getattr(self.__dict__["recipe"], name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @classmethod
    def from_recipe(cls, recipe: Recipe | Any, **stage: Any) -> "TrainConfig":
        """The trainer's config of a training recipe (:class:`~.recipe.Recipe`, e.g. a protocol config's
        ``to_recipe()``). The optimizer and where and how it trains (:data:`~.recipe.TRAINER_FIELDS`:
        momentum, nesterov, weight decay, device, devices, precision, compile, loader, workers) are
        taken whole; ``stage`` holds what the calling stage sets itself (its epochs, learning rate,
        batch size, schedule, seed, ...: recipe fields or the trainer's own) and wins over the recipe.

        >>> r = Recipe(momentum=0.5, nesterov=True, weight_decay=0.0)
        >>> c = TrainConfig.from_recipe(r, epochs=3, lr=0.1)
        >>> (c.epochs, c.lr, c.momentum, c.nesterov, c.weight_decay, c.devices)
        (3, 0.1, 0.5, True, 0.0, 1)
        """
        values = recipe_values(recipe)  # a Recipe, or a holder of recipe fields (a mapping, a learner's settings)
        taken = {k: values[k] for k in TRAINER_FIELDS if k in values}
        own = {k: v for k, v in stage.items() if k not in RECIPE}
        staged = {k: v for k, v in stage.items() if k in RECIPE}
        if not isinstance(recipe, Recipe):  # a holder's values: checked here, as the stage's
            return cls(Recipe(**{**taken, **staged}), **own)
        # a Recipe's fields were checked when it was made: only the stage's own values are checked here
        return cls(recipe_with(taken, staged, compare=values), **own)

    def __post_init__(self) -> None:
        check_fields(self, declared_only=True)  # each own field's type and range (the recipe checked itself)
        if not (isinstance(self.augment, bool) or callable(self.augment)):
            raise InputError(f"augment: expected true, false or a callable (x, generator) -> x, got {self.augment!r}")
        if self.recipe.schedule not in SCHEDULES:
            raise InputError(f"schedule: the trainer runs {', '.join(SCHEDULES)}, got {self.recipe.schedule!r}")

    def to_dict(self) -> dict[str, Any]:
        """The recipe's fields and the trainer's own, flat (what :class:`TrainResult` reports)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "recipe"}
        return {**{k: getattr(self.recipe, k) for k in RECIPE}, **out}


@dataclass
class TrainResult:
    """What one :meth:`Trainer.fit` did.

    Attributes
    ----------
    history : list of dict
        Per epoch: ``epoch`` (1-based), ``loss`` (mean training loss), ``train_acc`` (accuracy on
        the training batches as seen, with augmentation), ``val_acc`` (NaN without ``val``),
        ``lr`` (learning rate of the epoch's last step).
    flops : int
        Forward + backward FLOPs of all training steps (multiply-add = 2; see :mod:`.flops`);
        0 when ``count_flops`` was off.
    eval_flops : int
        Forward FLOPs of the per-epoch validation passes.
    steps : int
        Optimisation steps taken.
    seconds : float
        Wall time of the whole fit (training + validation + FLOP counting).
    train_seconds : float
        Wall time of the training steps only.
    images_per_second : float
        Training images processed / ``train_seconds``.
    peak_memory_bytes : int
        ``cuda``: peak allocated by torch during the fit. ``cpu``: the process's peak resident
        set size (``ru_maxrss``, a process-lifetime maximum, so an upper bound for this fit).
    peak_memory_kind : str
        ``"cuda_max_allocated"`` or ``"process_max_rss"``.
    stopped_early : bool
        The callback returned True.
    config : dict
        The :class:`TrainConfig` used, plus ``sampler`` (``"<sampler>+second"`` with a second
        sampler) and ``trainable`` (``"custom"`` when the trainer has a ``step``).
    normaliser : dict
        Channel mean/std used to standardise inputs.
    """

    history: list[dict]
    flops: int
    eval_flops: int
    steps: int
    seconds: float
    train_seconds: float
    images_per_second: float
    peak_memory_bytes: int
    peak_memory_kind: str
    stopped_early: bool
    device: str
    config: dict = field(default_factory=dict)
    normaliser: dict = field(default_factory=dict)

    @property
    def epochs_run(self) -> int:
        return len(self.history)

    def to_dict(self) -> dict:
        return asdict(self)


def peak_rss_bytes() -> int:
    """The process's peak resident set size in bytes (``ru_maxrss``, a process-lifetime maximum)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r if sys.platform == "darwin" else r * 1024)
