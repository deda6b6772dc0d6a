"""Long-tailed reference methods behind one call: :func:`fit_predict`.

>>> from vistabench.data import Dataset
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> train = Dataset(rng.integers(0, 256, (60, 8, 8, 1), dtype=np.uint8),
...                 np.r_[np.zeros(40, int), np.ones(15, int), np.full(5, 2)], ["a", "b", "c"])
>>> run = fit_predict("balanced_softmax", train, train.images[:7], epochs=1, batch_size=16)
>>> run.logits.shape, run.method, run.flops > 0
((7, 3), 'balanced_softmax', True)

The methods: :mod:`.methods` (``ce`` ... ``crt``) and :mod:`.survey` (``bbn``, ``tde``, ``ride``,
``ib``, ``tade``, ``lade``, ``gcl``); their options: :mod:`.options`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from torch import nn

from ...data.dataset import Dataset
from ..._validation import check_labels, check_same_length
from ...errors import InputError
from ..losses import check_class_counts
from ..external import load_pretrained
from ..models import build_model
from ..recipe import RECIPE, Recipe
from ..tensors import check_images
from ..trainer import TrainConfig, TrainResult, resolve_device
from ..tensors import Normaliser
from .checkpoints import CheckpointSelector, fan_in_init
from .options import MethodOptions, RunFacts, resolve_method_options
from .options import lt_methods
from .registry import MethodContext

__all__ = ["LTRunResult", "fit_predict"]


@dataclass
class LTRunResult:
    """Outcome of one long-tailed method run.

    Attributes
    ----------
    method : str
    logits : ndarray of float32, shape (N, C)
        Test scores the method predicts with (post-hoc adjusted for ``logit_adjust``; cosine logits
        times the LDAM scale for ``ldam_drw``). argmax = predicted class.
    train_results : list of TrainResult
        One per training stage (two for ``crt``).
    flops : int
        Training FLOPs (forward + backward) of all stages.
    seconds : float
        Wall time of training and prediction.
    settings : dict
        Everything that produced the run: method, model, epochs, seed, lr, batch_size, ... and the
        method's options with their defaults filled in.
    model : nn.Module or None
        The trained network (what predicted ``logits``).
    test_time : callable or None
        For methods that adapt to the test distribution without labels (``tade``):
        ``test_time(indices) -> logits`` of shape (len(indices), C) for the test set made of those
        rows of ``test_images``, computed from those images alone. None for the others, whose
        ``logits`` serve every test set.
    """

    method: str
    logits: np.ndarray
    train_results: list[TrainResult]
    flops: int
    seconds: float
    settings: dict = field(default_factory=dict)
    test_time: Callable[[np.ndarray], np.ndarray] | None = None
    model: nn.Module | None = None

    @property
    def train_result(self) -> TrainResult:
        """The (last) stage's training result."""
        return self.train_results[-1]

    def to_dict(self, *, include_logits: bool = False) -> dict:
        d = {"method": self.method, "flops": self.flops, "seconds": self.seconds, "settings": self.settings,
             "train_results": [r.to_dict() for r in self.train_results]}
        if include_logits:
            d["logits"] = self.logits.tolist()
        return d


def fit_predict(
    method: str,
    train: Dataset,
    test_images: np.ndarray,
    *,
    recipe: Recipe | None = None,
    seed: int = 0,
    augment: bool = False,
    options: MethodOptions | dict[str, Any] | None = None,
    drop_last: bool = False,
    normalisation: tuple[tuple[float, ...], tuple[float, ...]] | None = None,
    init: str = "fan_out",
    select_checkpoint: str = "last",
    selection: tuple[np.ndarray, np.ndarray] | None = None,
    **recipe_fields: Any,
) -> LTRunResult:
    """Train a long-tailed reference method on ``train`` and score ``test_images``.

    Parameters
    ----------
    method : str
        A name in ``lt_methods`` (:mod:`.methods`, :mod:`.survey`, or one registered with
        :func:`~.registry.register_method`).
    train : Dataset
        Long-tailed training set; every class in ``train.class_names`` needs >= 1 image.
    test_images : ndarray, shape (N, H, W, B)
        Same dtype, size and bands as ``train.images``.
    recipe : Recipe, optional
        The training recipe (:class:`~vistabench.learners.recipe.Recipe`; a protocol config's
        ``to_recipe()``; default ``Recipe()``): the backbone (``model``, from
        :data:`vistabench.learners.models.models`, its ``image_size`` the training images' height;
        ``pretrained``, a local state dict loaded into the model after its initialisation, the
        classifier head left out), the optimizer, the schedule, the budget and where it trains, as in
        :class:`~vistabench.learners.trainer.TrainConfig` (``loader``/``workers``: runtime only, not in
        ``settings``).
    **recipe_fields
        Recipe fields by name (``epochs=1, batch_size=16``): ``recipe.replace(**recipe_fields)``.
    seed, augment
        As in :class:`~vistabench.learners.trainer.TrainConfig`; ``seed`` also seeds the model's
        initialisation.
    options : MethodOptions or dict, optional
        The method's options object, or a mapping of options (unknown keys are an error) filled in
        with the CPU recipe's values for these epochs.
    drop_last : bool
        Leave each epoch's last incomplete batch out (:class:`~..trainer.TrainConfig`).
    normalisation : (mean, std), optional
        Fixed per-channel input standardisation of every stage (the references' CIFAR constants);
        None: measured on the training images.
    init : {"fan_out", "fan_in"}
        ``fan_in``: Kaiming-normal fan-in weights on every convolution and linear layer of the
        backbone (:func:`.checkpoints.fan_in_init`) and of the branch blocks / expert stages a method
        adds, and unit-norm cosine heads (the references' construction); ``fan_out``: the model's
        own initialisation (Kaiming fan-out convolutions, PyTorch's default linear and cosine heads).
    select_checkpoint : {"last", "best_val", "best_test"}
        ``last``: each stage ends with its last epoch's weights. Otherwise each stage is scored on
        ``selection`` (images, labels) after every epoch and keeps its best epoch; what was chosen
        is in ``settings["checkpoint"]``.

    Returns
    -------
    LTRunResult
    """
    unknown = sorted(set(recipe_fields) - set(RECIPE))
    if unknown:
        raise TypeError(f"fit_predict: unknown argument {unknown[0]!r}")  # a caller's bug
    if recipe is not None and not isinstance(recipe, Recipe):
        raise TypeError(f"recipe: expected a Recipe, got {type(recipe).__name__}")  # a caller's bug
    r = Recipe() if recipe is None else recipe
    if recipe_fields:
        r = r.replace(**recipe_fields)
    spec = lt_methods.get(method)
    if not isinstance(train, Dataset):
        raise InputError(f"train: expected a vistabench Dataset, got {type(train).__name__}")
    if not isinstance(options, spec.options):
        facts = RunFacts(recipe=r, dataset="other", preset="cpu")
        options = resolve_method_options(method, options, facts)
    counts = check_class_counts(train.class_counts(), f"{train.name} class counts")
    test_images = check_images(test_images, "test_images", in_channels=train.images.shape[3], allow_empty=True)
    cfg = TrainConfig(r, seed=seed, augment=augment, drop_last=drop_last)
    resolve_device(r.device)  # fail before building anything when CUDA is asked for but missing
    normaliser = _fixed_normaliser(normalisation, train.images)
    selector = _selector(select_checkpoint, selection, train)
    if init not in ("fan_out", "fan_in"):
        raise InputError(f"init: expected 'fan_out' or 'fan_in', got {init!r}")
    t0 = time.perf_counter()
    net = build_model(r.model, num_classes=train.num_classes, in_channels=train.images.shape[3],
                      image_size=train.images.shape[1], seed=seed)
    if init == "fan_in":
        fan_in_init(net, seed)
    if r.pretrained is not None:  # after the initialisation: the file's weights win, the head stays fresh
        load_pretrained(net, r.pretrained)
    ctx = MethodContext(train=train, counts=counts, model=net, cfg=cfg, normaliser=normaliser, selector=selector,
                        init=init)
    logits, results = spec.load()(ctx, test_images, options)
    settings = {"method": method, "model": r.model, "epochs": r.epochs, "seed": seed, "device": r.device,
                "batch_size": r.batch_size, "lr": r.lr, "weight_decay": r.weight_decay, "augment": augment,
                "momentum": r.momentum, "nesterov": r.nesterov, "warmup_epochs": r.warmup_epochs,
                "warmup_start": r.warmup_start, "schedule": r.schedule, "lr_milestones": list(r.lr_milestones),
                "lr_factors": list(r.lr_factors), "options": options.to_dict(),
                "train_counts": counts.tolist(), "optimizer": "sgd", "drop_last": bool(drop_last),
                "normalisation": "dataset" if normaliser is None else normaliser.to_dict(), "init": init,
                "select_checkpoint": select_checkpoint}
    if r.pretrained is not None or r.precision != "fp32" or r.compile:  # absent on the default path (as before)
        settings.update(pretrained=r.pretrained, precision=r.precision, compile=bool(r.compile))
    if r.devices != 1:  # absent on one device (records as before)
        settings["devices"] = r.devices
    if selector is not None:
        settings["checkpoint"] = selector.summary()
    trained = ctx.trainer.model if ctx.trainer is not None else net
    return LTRunResult(method=method, logits=np.asarray(logits, dtype=np.float32), train_results=results,
                       flops=int(sum(r.flops for r in results)), seconds=time.perf_counter() - t0,
                       settings=settings, test_time=ctx.test_time, model=trained)


def _fixed_normaliser(normalisation: Any, images: np.ndarray) -> Normaliser | None:
    if normalisation is None:
        return None
    try:
        mean, std = (np.asarray(v, dtype=np.float64).reshape(-1) for v in normalisation)
    except (TypeError, ValueError):
        raise InputError(f"normalisation: expected (mean, std) per channel, got {normalisation!r}") from None
    if len(mean) != images.shape[3] or len(std) != images.shape[3] or not np.all(std > 0):
        raise InputError(f"normalisation: expected {images.shape[3]} means and {images.shape[3]} positive stds "
                         f"(one per channel of the images), got {len(mean)} and {len(std)}")
    return Normaliser(mean=mean, std=std, dtype=str(images.dtype))


def _selector(select: str, selection: Any, train: Dataset) -> CheckpointSelector | None:
    if select not in ("last", "best_val", "best_test"):
        raise InputError(f"select_checkpoint: expected 'last', 'best_val' or 'best_test', got {select!r}")
    if select == "last":
        if selection is not None:
            raise InputError("selection: only read with select_checkpoint best_val or best_test")
        return None
    if not (isinstance(selection, tuple) and len(selection) == 2):
        raise InputError(f"selection: select_checkpoint {select} needs the selection set as (images, labels)")
    images = check_images(selection[0], "selection images", in_channels=train.images.shape[3])
    labels = check_labels(selection[1], "selection labels", num_classes=train.num_classes)
    check_same_length("selection images", images, "selection labels", labels)
    return CheckpointSelector(images, labels, select)
