"""Small-data protocol internals shared by the search and the final runs: the run plan, the loaded
dataset with its split files, the search space and one training (see :mod:`.smalldata`)."""

from __future__ import annotations

import os
from contextlib import contextmanager
import dataclasses
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, NamedTuple

import numpy as np

from ...data.augment import Augmentation
from ...data.dataset import DataSplits, Dataset
from ...data.smalldata import SmallDataPreset, get_preset, load_smalldata
from ...data.smalldata_splits import SmallDataSplit, read_splits, write_preset_splits
from ...engine import Engine
from ...errors import InputError
from ...learners.model_options import model_options_class
from ...learners.recipe import RECIPE, Recipe
from ...learners.smalldata.options import MethodOptions
from ...metrics.classification import balanced_accuracy
from ...store import Record
from ...tuning import Choice, Fixed, Param, TuneSettings
from .config import search_space

__all__ = ["PROTOCOL", "RunPlan", "EvalSet", "Context", "prepare", "upsample", "method_space", "model_name",
           "train_method", "torch_threads", "check_batch", "to_record", "stem_model_options", "method_inputs"]

PROTOCOL = "smalldata"


@dataclass(init=False)
class RunPlan:
    """What a run needs beyond the data, from :class:`~.config.SmalldataConfig`: the training
    ``recipe`` (:class:`~vistabench.learners.recipe.Recipe`; recipe fields given by name go into it and
    ``plan.lr`` reads it), the ``engine``, the search and the final runs. A None setting means "the
    preset's value" (the preset of the context's recipe); ``from_preset`` names the recipe fields the
    data set's preset decides (``model``, ``epochs`` unless given: they read as None here)."""

    recipe: Recipe
    from_preset: tuple[str, ...] = ("model", "epochs")
    final_epochs: int | None = None
    trials: int | None = None
    grace_period: int | None = None
    reduction_factor: int | None = None
    repeats: int = 10
    splits: list[int] | None = None
    engine: Engine = field(default_factory=Engine)
    ray_num_cpus: int | None = None
    sampler: str | None = None
    scheduler: str = "asha"
    score_window: int | None = None
    select: str | None = None
    val_metric: str | None = None
    augmentation: Augmentation | None = None
    seed: int = 0
    space: dict[str, Any] | None = None
    work_dir: str = "smalldata-runs"
    highres_scale: int = 1
    method_options: MethodOptions | None = None
    stem: str = "auto"

    def __init__(self, recipe: Recipe | None = None, **settings: Any) -> None:
        own = {f.name: f for f in dataclasses.fields(self) if f.name != "recipe"}
        unknown = sorted(set(settings) - set(own) - set(RECIPE))
        if unknown:
            raise TypeError(f"RunPlan: unknown field {unknown[0]!r}")  # a caller's bug
        base = Recipe() if recipe is None else recipe
        stage = {k: v for k, v in settings.items() if k in RECIPE and v is not None}
        preset = tuple(n for n in settings.get("from_preset", own["from_preset"].default) if n not in stage)
        if "epochs" in preset and stage.get("warmup_epochs", 0) >= base.epochs:  # a placeholder, never read
            stage["epochs"] = stage["warmup_epochs"] + 1
        self.recipe = base.replace(**stage) if stage else base
        for name, f in own.items():
            if name in settings:
                value = settings[name]
            else:
                value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            setattr(self, name, value)
        self.from_preset = preset

    def __getattr__(self, name: str) -> Any:
        # the recipe's fields read through (``plan.lr`` is ``plan.recipe.lr``); those the preset decides: None
        if name in RECIPE and "recipe" in self.__dict__:
            return None if name in self.__dict__.get("from_preset", ()) else getattr(self.__dict__["recipe"], name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def dispatch_finals(self) -> bool:
        """Whether the final runs go through the grid engine (Ray, or several local processes)."""
        return self.engine.dispatches()

    def settings(self, preset: SmallDataPreset) -> TuneSettings:
        epochs = _pick(self.epochs, preset.recipe_changes["epochs"])
        return TuneSettings(
            trials=self.trials if self.trials is not None else preset.trials,
            max_epochs=epochs,
            grace_period=self.grace_period if self.grace_period is not None else min(preset.grace_period, epochs),
            reduction_factor=_pick(self.reduction_factor, preset.reduction_factor),
            scheduler=self.scheduler,  # type: ignore[arg-type]
            sampler=_pick(self.sampler, preset.sampler), score_window=_pick(self.score_window, preset.score_window),
            select=_pick(self.select, preset.select), seed=self.seed, engine=self.engine,
            ray_num_cpus=self.ray_num_cpus,
            ray_gpus_per_trial=1.0 if self.device.startswith("cuda") and self.engine.engine == "ray" else 0.0)

    def val_metric_for(self, preset: SmallDataPreset) -> str:
        m = _pick(self.val_metric, preset.val_metric)
        if m not in ("accuracy", "balanced_accuracy"):
            raise InputError(f"val_metric: expected 'accuracy' or 'balanced_accuracy', got {m!r}")
        return m

    def augmentation_for(self, preset: SmallDataPreset) -> Augmentation:
        return self.augmentation if self.augmentation is not None else preset.augmentation


def _pick(value: Any, default: Any) -> Any:
    return default if value is None else value



class EvalSet(NamedTuple):
    """A split's test set: ``images`` (N, H, W, C), ``labels`` (N,) and its ``name`` (test / test{i})."""

    images: np.ndarray
    labels: np.ndarray
    name: str


@dataclass
class Context:
    """A loaded dataset with its preset and split files."""

    name: str
    preset: SmallDataPreset
    data: DataSplits
    splits: list[SmallDataSplit]
    image_size: int
    in_channels: int
    root: str | None = None

    @property
    def pool(self) -> Dataset:
        return self.data.train

    def highres(self, scale: int) -> DataSplits:
        """The dataset at ``scale`` x the side length: re-read from ``root`` for presets that resize
        variable-size images (CUB, ISIC, CLaMM, folders), else the pool up-sampled bilinearly."""
        cache = self.__dict__.setdefault("_highres", {})
        if scale not in cache:
            size = self.image_size * scale
            if self.preset.image_size is not None:
                data = load_smalldata(self.name, self.root, image_size=size)
                if not np.array_equal(data.train.labels, self.pool.labels):
                    raise InputError(f"dataset {self.name!r}: re-reading at {size} px gave a different pool")
            else:
                data = DataSplits(train=upsample(self.pool, scale),
                                  test=None if self.data.test is None else upsample(self.data.test, scale))
            cache[scale] = data
        return cache[scale]

    def test_set(self, split: SmallDataSplit) -> "EvalSet":
        if split.test is not None:
            return EvalSet(self.pool.images[split.test], self.pool.labels[split.test], f"test{split.index}")
        if self.data.test is None:
            raise InputError(f"dataset {self.name!r}: no official test set and no test{split.index}.json split file")
        return EvalSet(self.data.test.images, self.data.test.labels, "test")


def prepare(dataset: str, *, root: str | None = None, split_dir: str | os.PathLike[str] | None = None,
            per_class: int | None = None, seed: int = 0, image_size: int | None = None,
            splits: list[int] | None = None, out_splits: str | os.PathLike[str] | None = None,
            recipe: str = "gem", train_per_class: int | None = None,
            val_fraction: float | None = None) -> Context:
    """Load ``dataset`` and its split files (``split_dir``), or write fresh ones to ``out_splits``.

    ``recipe`` picks the preset's rules ("gem" or "vistabench"); ``per_class``, ``train_per_class``
    and ``val_fraction`` override its split sizes when the files are written here.
    """
    preset = get_preset(dataset, recipe=recipe)
    data = load_smalldata(dataset, root, image_size=image_size)
    if split_dir is None:
        if out_splits is None:
            raise InputError("splits: give a folder of split files, or an output folder to write them to")
        write_preset_splits(data, out_splits, dataset_name=dataset, preset=preset, seed=seed, per_class=per_class,
                            train_per_class=train_per_class, val_fraction=val_fraction)
        split_dir = out_splits
    sp = read_splits(split_dir, data.train, dataset_name=dataset, splits=splits)
    img = data.train.images
    return Context(dataset, preset, data, sp, int(img.shape[1]), int(img.shape[3]), root=root)


def upsample(ds: Dataset, scale: int) -> Dataset:
    import dataclasses

    import torch

    x = torch.from_numpy(np.ascontiguousarray(ds.images)).permute(0, 3, 1, 2).float()
    y = torch.nn.functional.interpolate(x, scale_factor=scale, mode="bilinear", align_corners=False)
    if ds.images.dtype == np.uint8:
        y = y.round().clamp(0, 255)
    return dataclasses.replace(ds, images=y.permute(0, 2, 3, 1).numpy().astype(ds.images.dtype))


def method_space(method: str, preset: SmallDataPreset, *, method_options: MethodOptions | None = None,
                 overrides: dict[str, Any] | None = None) -> dict[str, Param]:
    """The search space of ``method`` on a dataset (the preset's batch sizes and recipe):
    :func:`~.config.search_space`, which a config resolves its ``space`` with."""
    return search_space(method, recipe=preset.recipe, batch_sizes=tuple(preset.batch_sizes),
                        method_options=method_options, overrides=overrides)


def stem_model_options(name: str, stem: str) -> dict[str, Any]:
    """The model option a ResNet stem sets (``small_input``) on model ``name``: none for
    ``from_image_size`` (the factory's own rule) or a built-in model without that option (``resnet32``);
    a model of yours gets it when its name starts with ``resnet``."""
    cls = model_options_class(name)
    takes = name.startswith("resnet") if cls is None else "small_input" in {i.name for i in cls.fields_info()}
    if stem in ("auto", "from_image_size") or not takes:
        return {}
    return {"small_input": stem == "small"}


def model_name(ctx: Context, opts: RunPlan) -> str:
    return opts.model or ctx.preset.recipe_changes["model"]


def method_inputs(method: str, params: dict[str, Any], augmentation: Augmentation) -> tuple[Augmentation, int]:
    """``(training augmentation, evaluation shift)`` of ``method`` with ``params`` (its options) on a
    dataset augmented by ``augmentation``: ``dhn`` with ``input_crop="gem"`` on a shift augmentation
    of p px trains on ``Resize(size + 2p)`` + random crops and evaluates on ``Resize(size + 2p)`` +
    centre crops (evaluation shift p); anything else: the augmentation as it is, evaluation shift 0."""
    if (method == "dhn" and params.get("input_crop", "gem") == "gem" and augmentation.crop == "shift"
            and augmentation.shift > 0):
        return replace(augmentation, crop="resize"), augmentation.shift
    return augmentation, 0


def train_method(ctx: Context, method: str, config: dict, opts: RunPlan, *, epochs: int, seed: int,
           train_idx: np.ndarray, val: tuple[np.ndarray, np.ndarray] | None, report=None):
    """Build ``method`` with one configuration and train it on ``train_idx`` (``report(epoch, val)``
    after every epoch when ``val`` is given); returns ``(trainer, result)``."""
    from ...learners.smalldata.build import build_method
    from ...learners.trainer import TrainConfig, Trainer

    from ...learners.smalldata.common import EvalResizeCrop

    name = model_name(ctx, opts)
    augment, eval_shift = method_inputs(method, config, opts.augmentation_for(ctx.preset))
    run = opts.recipe.replace(model=name, epochs=epochs)  # the preset's model and this training's epochs resolved
    model, loss = build_method(method, run, config, num_classes=ctx.pool.num_classes, in_channels=ctx.in_channels,
                               image_size=ctx.image_size, seed=seed, model_options=stem_model_options(name, opts.stem),
                               stem_init="default" if ctx.preset.recipe == "gem" else "kaiming")
    if eval_shift:
        model = EvalResizeCrop(model, eval_shift)
    # the plan's recipe whole; the trial's configuration sets lr, weight decay and batch size
    cfg = TrainConfig.from_recipe(opts.recipe, epochs=epochs, lr=float(config["lr"]),
                                  weight_decay=float(config["weight_decay"]), batch_size=int(config["batch_size"]),
                                  warmup_epochs=opts.warmup_epochs, seed=seed,
                                  augment=augment, count_flops=False)
    classes = list(range(ctx.pool.num_classes))
    holder: dict[str, Any] = {}
    plain = opts.val_metric_for(ctx.preset) == "accuracy"

    def callback(epoch: int, metrics: dict) -> None:
        vx, vy = val  # type: ignore[misc]
        pred = holder["trainer"].predict_logits(vx).argmax(1)
        report(epoch, float(np.mean(pred == vy)) if plain else balanced_accuracy(vy, pred, classes=classes))

    tr = Trainer(model, cfg, loss_fn=loss, callback=callback if report is not None else None)
    holder["trainer"] = tr
    with torch_threads(opts.threads):
        res = tr.fit(ctx.pool.images[train_idx], ctx.pool.labels[train_idx])
    return tr, res


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` torch intra-op threads (None: leave as is), restoring the setting after."""
    if n is None:
        yield
        return
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


def check_batch(ctx: Context, space: dict[str, Param], n_train: int, where: str) -> None:
    p = space.get("batch_size")
    sizes = list(p.values) if isinstance(p, Choice) else [p.value] if isinstance(p, Fixed) else []
    big = [int(b) for b in sizes if int(b) > n_train]
    if big:
        raise InputError(f"batch_size: {big[0]} is larger than the {n_train} images of {where}; "
                         f"lower `batch_sizes` or raise `per_class`")


def to_record(result: dict[str, Any], *, dataset: str, method: str, seed: int | None, split_hash: str | None,
              settings: dict[str, Any], kind: str = "final", tag: str | None = None) -> Record:
    """The results-store record of one scored final run (the same shape from ``score`` and ``run``):
    ``kind`` ``final`` (Table 3) or ``highres`` (its high-resolution fine-tune); ``tag`` the user's."""
    metrics = {k: v for k, v in result.items() if k != "settings"}
    return Record(protocol=PROTOCOL, dataset=dataset, method=method, seed=seed, split_hash=split_hash,
                  kind=kind, tag=tag, settings={**result.get("settings", {}), **settings}, metrics=metrics)
