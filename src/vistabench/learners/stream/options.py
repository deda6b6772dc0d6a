"""Stream learners' settings, torch-free: the flat :class:`LearnerConfig` the learners read, each
learner's own typed options (:class:`~vistabench.config.Options`), the batch-size rules and the
learning-rate schedules (plain arithmetic, so a config can be printed without importing torch).

Two recipes fill these in (:class:`~vistabench.protocols.stream.config.StreamConfig`): ``cpu`` (the
small-budget settings this toolkit started with) and ``dm-nevis`` (google-deepmind/dm_nevis's
``experiments_jax/configs/finetuning_dknn.py`` and its learner): :data:`RECIPES`.
"""

from __future__ import annotations

import math
import copy
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from ..._validation import check_input_dir
from ...config import Options, check_fields, option
from ...errors import InputError
from ..recipe import RECIPE, Recipe
from ..schedules import schedules_of

__all__ = ["LearnerConfig", "NoLearnerOptions", "EnsembleOptions", "RelatednessOptions", "MTOptions",
           "BHPOOptions",
           "BATCH_RULES", "MULTILABEL_SELECTION", "INPUT_SCALINGS", "WEIGHT_INITS",
           "batch_size_for", "eval_points", "SCHEDULES", "warmup_cosine_lr", "RECIPES",
           "LEARNER_RECIPES", "TrialSchedule", "PretrainSettings", "check_pretrain_args", "read_settings"]

BATCH_RULES = ("n/16", "0.0025n")
SCHEDULES = schedules_of("stream")
#: multilabel validation score of a trial: mAP (labels without positives left out) or dm_nevis's error
MULTILABEL_SELECTION = ("map", "error")
#: network inputs: standardised by the task's measured mean/std, or dm_nevis's 2·x/255 − 1
INPUT_SCALINGS = ("standardise", "minus_one_one")
#: a fresh network's convolutions and linear layers: the model's own, or haiku's defaults
WEIGHT_INITS = ("torch", "haiku")


def batch_size_for(n: int, *, rule: str = "n/16", max_batch: int = 256, min_batch: int = 16) -> int:
    """Batch size from the training-set size ``n``.

    ``"n/16"`` (recipe ``cpu``): ``min(clip(2^floor(log2(n / 16)), min_batch, max_batch), n)``.
    ``"0.0025n"`` (recipe ``dm-nevis``, dm_nevis's ``_adapt_batch_size_to_dataset_size`` with
    ``size_proportion`` 0.0025): ``min(max_batch, max(min_batch, 2^int(log2(0.0025 n))))`` (512 and
    16 in dm_nevis; not capped at n, the trial's batches are drawn from repeated shuffles).

    >>> batch_size_for(240), batch_size_for(5000), batch_size_for(10**6), batch_size_for(10)
    (16, 256, 256, 10)
    >>> batch_size_for(10_000, rule="0.0025n", max_batch=512), batch_size_for(10**6, rule="0.0025n", max_batch=512)
    (16, 512)
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"n: expected a positive integer, got {n!r}")
    if rule == "0.0025n":
        x = 0.0025 * n
        b = int(2 ** int(math.log2(x)))  # int() truncates toward 0, as dm_nevis's int(np.log2(...))
        return int(min(max_batch, max(min_batch, b)))
    if rule != "n/16":
        raise InputError(f"batch_size_rule: expected one of {', '.join(BATCH_RULES)}, got {rule!r}")
    b = 2 ** int(math.floor(math.log2(max(n / 16.0, 1.0))))
    return int(min(max(b, min_batch), max_batch, n))


def eval_points(steps: int) -> int:
    """Number of learning-curve points: the largest of 4, 3, 2, 1 that divides ``steps``."""
    return next(e for e in (4, 3, 2, 1) if steps % e == 0)


def warmup_cosine_lr(step: int, total: int, *, peak: float, warmup_steps: int, final: float) -> float:
    """optax's ``warmup_cosine_decay_schedule(init_value=0, peak_value=peak, warmup_steps, decay_steps=total,
    end_value=final)`` at 0-based ``step``: linear 0 -> peak over ``warmup_steps``, then a cosine from
    peak to ``final`` over the remaining steps (dm_nevis: ``warmup_steps = min(total - 1, warmup_epochs
    x steps_per_epoch)``, ``final`` 1e-8)."""
    if warmup_steps > 0 and step < warmup_steps:
        return peak * step / warmup_steps
    span = max(1, total - warmup_steps)
    t = min(step - warmup_steps, span)
    return final + (peak - final) * 0.5 * (1.0 + math.cos(math.pi * t / span))


# ---------------------------------------------------------------------------- learners' options
@dataclass(frozen=True, kw_only=True)
class NoLearnerOptions(Options):
    """A learner without options of its own (indep, ft-prev, pt)."""


@dataclass(frozen=True, kw_only=True)
class EnsembleOptions(Options):
    temperature: float = option(0.05, help="ensemble weights softmax(validation score / temperature) "
                                            "(Nevis'22 Appendix I)", low=0, low_open=True)


@dataclass(frozen=True, kw_only=True)
class RelatednessOptions(Options):
    """FT-d's choice of the network to start from: a k-NN on each candidate's features."""

    knn_train: int = option(200, help="at most this many training images fit the k-NN (dm_nevis: 10,000)", low=1)
    knn_val: int = option(100, help="at most this many held-out images score it (dm_nevis: 5,000 dev images)",
                          low=1)
    knn_k: int = option(5, help="neighbours (sklearn's default 5, as dm_nevis)", low=1)
    knn_fresh: bool = option(False, help="also score a freshly initialised network (dm_nevis's "
                                         "randomly_initialized_params); knn_fresh_wins says what its win means")
    knn_fresh_wins: Literal["next-past", "scratch"] = option(
        "next-past", help="when the fresh network scores best: next-past = start from the best-scoring past "
                          "network (dm_nevis's _init_from_transfer_matrix only returns past tasks' states, so only "
                          "the first task trains from scratch); scratch = train the task from scratch")
    knn_bn: Literal["eval", "train"] = option("eval", help="batch norm while embedding: running statistics "
                                                           "('eval') or batch statistics ('train', dm_nevis)")
    knn_multilabel: Literal["exact-match", "map"] = option(
        "exact-match", help="multilabel relatedness: accuracy over label patterns ('exact-match') or the "
                            "mAP of per-label neighbour votes ('map', dm_nevis)")


@dataclass(frozen=True, kw_only=True)
class MTOptions(RelatednessOptions):
    mt_weight_range: tuple[float, ...] = option((0.1, 1.0), help="auxiliary-task loss weight, searched "
                                                                 "log-uniformly in [low, high]", low=0, low_open=True)
    mt_memory: int = option(1000, help="training examples kept per past task for co-training", low=1)

    def check(self) -> None:
        _check_range_pair(self.mt_weight_range, "mt_weight_range")


@dataclass(frozen=True, kw_only=True)
class BHPOOptions(Options):
    bhpo_startup: int = option(1, help="random trials before the GP proposes", low=1)
    ucb_beta: float = option(2.0, help="GP-UCB exploration: mu + sqrt(beta) sigma", low=0)


def _check_range_pair(value: tuple[float, ...], name: str) -> None:
    if len(value) != 2 or not value[0] <= value[1]:
        raise InputError(f"{name}: expected two numbers LOW HIGH with LOW <= HIGH, got {list(value)}")


#: the recipes' learner options (what ``cpu`` leaves at the class defaults, ``dm-nevis`` sets)
LEARNER_RECIPES: dict[str, dict[str, Any]] = {
    "cpu": {},
    "dm-nevis": {"knn_train": 10_000, "knn_val": 5_000, "knn_fresh": True, "knn_bn": "train",
                 "knn_multilabel": "map"},
}

#: the recipes' run fields (StreamConfig); ``cpu`` holds the values runs used before recipes existed
RECIPES: dict[str, dict[str, Any]] = {
    "cpu": {"lr_range": (3e-3, 0.3), "label_smoothing_range": (0.0, 0.3), "optimizer": "sgd", "momentum": 0.9,
            "nesterov": False, "weight_decay": 5e-4, "decay_mask": "all", "batch_size_rule": "n/16",
            "min_batch": 16, "max_batch": 256, "schedule": "cosine", "warmup_epochs": 0, "final_lr": 0.0,
            "keep_best_state": False, "val_fraction": 0.2, "trials": 2, "model": "cnn28",
            "multilabel_selection": "map", "input_scaling": "standardise", "weight_init": "torch"},
    # finetuning_dknn.py: 'trials_per_task': 16, 'model': {'ctor': resnet.CifarResNet34}
    "dm-nevis": {"trials": 16, "model": "cifar_resnet34",
                 "lr_range": (1e-4, 0.1), "label_smoothing_range": (0.0, 0.3), "optimizer": "sgd", "momentum": 0.9,
                 "nesterov": True, "weight_decay": 1e-4, "decay_mask": "weights", "batch_size_rule": "0.0025n",
                 "min_batch": 16, "max_batch": 512, "schedule": "warmup-cosine", "warmup_epochs": 7,
                 "final_lr": 1e-8, "keep_best_state": True, "val_fraction": 0.2,
                 # 'validation_metric': 'error' (heads.py: per-label 0/1 errors at p > 0.5 for multilabel);
                 # augmentations.normalize: pixels to [-1, 1]; haiku's default truncated-normal fan-in init
                 "multilabel_selection": "error", "input_scaling": "minus_one_one", "weight_init": "haiku"},
}


@dataclass(init=False)
class LearnerConfig:
    """Everything a stream learner reads (built from a StreamConfig by the protocol's run; stored with
    each task event as the run's settings). Defaults: recipe ``cpu``.

    ``recipe`` (:class:`~vistabench.learners.recipe.Recipe`): the backbone (``model``; older spelling
    ``arch``, read as ``cfg.arch`` too, and in stored settings by :func:`read_settings`), the optimizer,
    the schedule and where trials train; recipe fields given by name go into it and ``cfg.momentum``
    reads ``cfg.recipe.momentum``. The rest is the search's own (ranges, batch-size rule, trials,
    steps) and the learners' options."""

    recipe: Recipe
    trials: int = option(2, low=1, help="hyper-parameter trials per task")
    steps: int = option(40, low=1, help="training steps per trial")
    seed: int = option(0, help="seed")
    arch_options: dict = option(default_factory=lambda: {"width": 8}, help="the backbone's keyword options")
    lr_range: tuple[float, ...] = option((3e-3, 0.3), low=0, low_open=True, help="learning rates searched")
    label_smoothing_range: tuple[float, ...] = option((0.0, 0.3), low=0, high=1, help="label smoothing searched")
    max_batch: int = option(256, low=1, help="largest batch")
    min_batch: int = option(16, low=1, help="smallest batch")
    val_fraction: float = option(0.2, low=0, low_open=True, high=1, help="held-out share of a task (< 1)")
    knn_train: int = option(200, low=1, help="k-NN training images")
    knn_val: int = option(100, low=1, help="k-NN scoring images")
    knn_k: int = option(5, low=1, help="k-NN neighbours")
    temperature: float = option(0.05, low=0, low_open=True, help="ensemble temperature")
    checkpoint: str | None = option(None, help="pre-trained weights (pt)")
    mt_weight_range: tuple[float, ...] = option((0.1, 1.0), low=0, low_open=True, help="MT loss weights searched")
    mt_memory: int = option(1000, low=1, help="examples kept per past task (mt)")
    search_space: str = option("large", choices=("default", "large"), help="trial search space")
    bhpo_startup: int = option(1, low=1, help="random trials before the GP proposes")
    ucb_beta: float = option(2.0, low=0, help="GP-UCB exploration")
    decay_mask: str = option("all", choices=("all", "weights"), help="parameters weight decay applies to")
    batch_size_rule: str = option("n/16", choices=BATCH_RULES, help="batch size from the training-set size")
    final_lr: float = option(0.0, low=0, help="final learning rate of warmup-cosine")
    keep_best_state: bool = option(False, help="keep the best validation state of a trial")
    knn_fresh: bool = option(False, help="also score a freshly initialised network")
    knn_fresh_wins: str = option("next-past", choices=("next-past", "scratch"), help="when the fresh network wins")
    knn_bn: str = option("eval", help="batch norm while embedding")
    knn_multilabel: str = option("exact-match", help="multilabel relatedness")
    multilabel_selection: str = option("map", choices=MULTILABEL_SELECTION, help="multilabel trial selection score")
    input_scaling: str = option("standardise", choices=INPUT_SCALINGS, help="input scaling of the networks")
    weight_init: str = option("torch", choices=WEIGHT_INITS, help="initialisation of a fresh network")

    def __init__(self, recipe: Recipe | None = None, **settings: Any) -> None:
        if "arch" in settings:  # the backbone's older name
            if "model" in settings:
                raise InputError(f"model: given twice ({settings['arch']!r} and {settings['model']!r}); keep one")
            settings["model"] = settings.pop("arch")
        own = {f.name: f for f in fields(self) if f.name != "recipe"}
        unknown = sorted(set(settings) - set(own) - set(RECIPE))
        if unknown:
            raise TypeError(f"LearnerConfig: unknown field {unknown[0]!r}")  # a caller's bug
        base = Recipe() if recipe is None else recipe
        stage = {k: v for k, v in settings.items() if k in RECIPE}
        if stage.get("warmup_epochs", 0) >= base.epochs:  # warm-up epochs of a fit set: no recipe epochs here
            stage["epochs"] = stage["warmup_epochs"] + 1
        self.recipe = base.replace(**stage) if stage else base
        for name, f in own.items():
            if name in settings:
                value = settings[name]
            else:
                value = f.default_factory() if f.default_factory is not MISSING else f.default
            setattr(self, name, value)
        self.__post_init__()

    def __getattr__(self, name: str) -> Any:
        # the recipe's fields read through (``cfg.momentum`` is ``cfg.recipe.momentum``; ``arch``: ``model``)
        if "recipe" in self.__dict__ and (name in RECIPE or name == "arch"):
            return getattr(self.__dict__["recipe"], "model" if name == "arch" else name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __post_init__(self) -> None:
        check_fields(self, declared_only=True)  # every own field by its option() declaration, as a run config's
        if self.val_fraction >= 1:
            raise InputError(f"val_fraction: expected a value in (0, 1), got {self.val_fraction!r}")

    def settings(self) -> dict[str, Any]:
        """The stored settings: every field and the recipe fields the learners read (the backbone as
        ``model``; runs stored before named it ``arch``: :func:`read_settings` reads both), except the
        recipe fields at their ``cpu`` values (so the settings of runs made before recipes existed stay
        comparable) and the runtime-only ones."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "recipe"}
        out = {**asdict_values(out), **{name: getattr(self.recipe, name) for name in _STORED_RECIPE}}
        base = LearnerConfig()
        for name in _NEW_FIELDS:
            if out[name] == getattr(base, name):
                del out[name]
        for name in _RUNTIME_FIELDS:  # where batches are made, never what a trial computes
            del out[name]
        return out


def asdict_values(values: dict[str, Any]) -> dict[str, Any]:
    """Copies of the mutable values (as :func:`dataclasses.asdict` makes)."""
    return {k: copy.deepcopy(v) for k, v in values.items()}


#: the recipe fields a stream learner reads, stored with its settings
_STORED_RECIPE = ("model", "weight_decay", "momentum", "device", "pretrained", "precision", "compile", "devices",
                  "loader", "workers", "nesterov", "schedule", "warmup_epochs")


def read_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """A run's stored settings (a record's, a checkpoint's) as this version names them: the backbone
    that runs stored before as ``arch`` (in the settings and in their ``config``) read as ``model``.

    >>> read_settings({"arch": "cnn28", "config": {"arch": "cnn28", "width": 8}})
    {'model': 'cnn28', 'config': {'model': 'cnn28', 'width': 8}}
    """
    def renamed(d: dict[str, Any]) -> dict[str, Any]:
        return {("model" if k == "arch" and "model" not in d else k): v for k, v in d.items()}

    out = renamed(settings)
    if isinstance(out.get("config"), dict):
        out["config"] = renamed(out["config"])
    return out


@dataclass(frozen=True)
class TrialSchedule:
    """What a search trial's trainer (:class:`~.search.SearchTrainer`) does beyond its ``TrainConfig``.

    ``recipe``: the stream's :class:`~vistabench.learners.recipe.Recipe`; its ``schedule`` is ``cosine``
    (the trainer's cosine to 0) or ``warmup-cosine`` (optax's warm-up cosine over ``warmup_epochs``
    epochs of ``steps_per_data_epoch`` steps, to ``final_lr``). ``shape``: the trial's own, ``cosine``
    (the recipe's schedule) or ``piecewise`` (BHPO's large space: constant, scaled at fractions of the
    steps). ``crop`` / ``flip``: random crop after zero padding and horizontal flip, each on its own.
    ``masked_decay``: L2 weight decay added to the gradients of conv / linear weights only (dm_nevis's
    mask; the trainer's own weight decay is then 0).
    """

    recipe: Recipe = field(default_factory=Recipe)
    shape: Literal["cosine", "piecewise"] = "cosine"
    crop: bool = False
    flip: bool = False
    final_lr: float = 0.0
    steps_per_data_epoch: int = 1
    masked_decay: float = 0.0

    @classmethod
    def of_trial(cls, config: LearnerConfig, hp: dict[str, Any], *, steps_per_data_epoch: int) -> "TrialSchedule":
        """A trial's: the learner's recipe and search settings (``config``), the trial's drawn ``hp``."""
        return cls(recipe=config.recipe, shape=hp.get("schedule", "cosine"), crop=bool(hp.get("crop", False)),
                   flip=bool(hp.get("flip", False)), final_lr=float(config.final_lr),
                   steps_per_data_epoch=int(steps_per_data_epoch),
                   masked_decay=float(config.weight_decay) if config.decay_mask == "weights" else 0.0)


@dataclass(frozen=True, kw_only=True)
class PretrainSettings(Options):
    """PT-MT's own arguments (:func:`~.pretrain.pretrain_meta_train`), checked once when made
    (:func:`check_pretrain_args`, before any data are read); its recipe (learning rate, backbone,
    device) is the learner config's."""

    out: str = option(metavar="FILE", help="checkpoint to write (e.g. pt-mt.pt)")
    steps: int = option(200, low=1, help="SGD steps")
    max_per_task: int = option(2000, low=1, metavar="N", help="training examples kept per meta-train task")
    seed: int = option(0, help="seed of the initialisation and of the batches")
    data_root: str | None = option(None, metavar="DIR", help="folder with the tasks' data")

    def check(self) -> None:
        check_pretrain_args(self)


def check_pretrain_args(settings: PretrainSettings) -> None:
    """The rules of :class:`PretrainSettings` beyond each field's range: the data folder exists, ``out``
    is a file name in an existing folder (InputError naming the argument)."""
    if settings.data_root is not None:
        check_input_dir(settings.data_root, "data_root")
    p = Path(settings.out)
    if p.is_dir():
        raise InputError(f"out {settings.out!r}: is a folder, expected a checkpoint file name (e.g. pt-mt.pt)")
    if not p.parent.is_dir():
        raise InputError(f"out {settings.out!r}: its folder {str(p.parent)!r} does not exist")


# fields added with the recipes: stored only when they differ from the values older runs used
_NEW_FIELDS = ("nesterov", "decay_mask", "batch_size_rule", "schedule", "warmup_epochs", "final_lr",
               "keep_best_state", "knn_fresh", "knn_fresh_wins", "knn_bn",
               "knn_multilabel", "devices", "multilabel_selection", "input_scaling", "weight_init")
_RUNTIME_FIELDS = ("loader", "workers")
