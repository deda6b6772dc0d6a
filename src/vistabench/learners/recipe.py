"""The training recipe: every setting a training protocol hands its trainer, declared once (torch-free).

Each training protocol's config (long-tail, incremental, small-data, stream) embeds the recipe
fields it trains with, flat, under the names below: ``class LongtailConfig(training_recipe(epochs=10,
...))``. :func:`training_recipe` builds that base from :data:`RECIPE`, the one declaration of each
field (type, range, help, runtime-only, grid ``key_default``); a protocol chooses which fields it
has and its own default (its presets, e.g. long-tail's ``reference``, stay in its ``resolve``), and
may narrow the choices (``schedule``) or word the help for its run. So a field means the same and is
checked by the same rule in every protocol, and a grid cell keeps its key (the names and key
defaults are those the protocols declared before).

:func:`check_recipe` is the one validation across fields (the schedule's milestones, the warm-up,
the device, CUDA-only settings on a CPU, a factory model, a pretrained file); the base's ``check``
runs it, and a protocol's ``check`` calls ``super().check()``. The trainer's
:class:`~vistabench.learners.train_config.TrainConfig` is made from a recipe by one function,
:meth:`TrainConfig.from_recipe <vistabench.learners.train_config.TrainConfig.from_recipe>`.

Conventions:

- ``lr_milestones`` are **0-based** epochs in every protocol: ``lr x lr_factors[i]`` from epoch
  ``lr_milestones[i]`` on (PyTorch's ``MultiStepLR`` stepped after each epoch; a milestone 0 scales
  the lr from the first epoch), strictly increasing and before ``epochs``; a step schedule has at
  least one.
- ``devices`` (data-parallel processes) is part of the recipe but not of a grid cell's key while it is
  1 (``key_default``): the global batch and the recipe stay the same, but the order of the float
  sums (gradients averaged across devices, batch norm per device) changes the rounding, so two
  device counts are two cells, as two ``device`` values are.
- ``loader``, ``workers`` and ``threads`` are runtime only: they change where batches are made and
  how fast, never which batches (the same seed gives the same batches from every loader).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Optional

from ..config import FieldInfo, Options, RunConfig, option
from ..engine import ENGINE
from ..errors import InputError
from .schedules import check_step_rule, schedules_of

__all__ = ["RECIPE", "PRECISIONS", "LOADERS", "SCHEDULE_CHOICES", "PRETRAINED_SUFFIXES", "TRAINER_FIELDS",
           "Recipe", "RecipeConfig", "RecipeOptions", "use", "training_recipe", "recipe_options", "check_recipe",
           "check_device", "recipe_values", "recipe_with", "default_recipe"]

#: ``precision``'s values: autocast type of the forward passes
PRECISIONS = ("fp32", "bf16", "fp16")
#: ``loader``'s values: where batches come from (:mod:`vistabench.learners.sources`)
LOADERS = ("memory", "stream", "device")
#: every schedule a protocol or a training stage may use (each protocol narrows ``schedule`` to those its
#: trainer runs; ``cosine_epoch``, the per-epoch cosine, is a stage's own: long-tail's classifier stages)
SCHEDULE_CHOICES = schedules_of("recipe")
#: the state-dict files ``pretrained`` reads
PRETRAINED_SUFFIXES = (".safetensors", ".pt", ".pth", ".bin")


@dataclass(frozen=True)
class _Decl:
    type: Any
    default: Any
    kwargs: dict[str, Any]


def _d(tp: Any, default: Any, **kwargs: Any) -> _Decl:
    return _Decl(tp, default, kwargs)


#: name -> the field's one declaration (type, default, :func:`~vistabench.config.option` arguments)
RECIPE: dict[str, _Decl] = {
    # the optimizer
    "optimizer": _d(str, "sgd", choices=("sgd",), key_default="sgd", help="optimizer: SGD with momentum"),
    "lr": _d(float, 0.05, low=0, low_open=True, help="peak learning rate"),
    "momentum": _d(float, 0.9, low=0, high=1, key_default=0.9, help="SGD momentum"),
    "nesterov": _d(bool, False, key_default=False, help="Nesterov momentum"),
    "weight_decay": _d(float, 5e-4, low=0, key_default=5e-4, help="L2 weight decay"),
    # the budget and the schedule
    "batch_size": _d(int, 128, low=2, help="training batch size (>= 2: batch norm needs two images)"),
    "epochs": _d(int, 10, low=1, help="training epochs"),
    "warmup_epochs": _d(int, 0, low=0, key_default=0, help="linear warm-up epochs (fewer than epochs)"),
    "warmup_start": _d(float, 0.0, low=0, high=1, key_default=0.0,
                       help="lr factor the warm-up starts from (step schedule: per epoch lr·(s + (1−s)(e+1)/W))"),
    "schedule": _d(str, "cosine", choices=SCHEDULE_CHOICES, key_default="cosine",
                   help="cosine: one cosine per step from lr to 0 (after the warm-up); step: lr × lr_factors[i] "
                        "from epoch lr_milestones[i] on, per epoch"),
    "lr_milestones": _d(tuple[int, ...], (), low=0, key_default=(),
                        help="0-based epochs where the step schedule changes the lr (each before epochs)"),
    "lr_factors": _d(tuple[float, ...], (), low=0, low_open=True, key_default=(),
                     help="multiplier of the base lr from each milestone on"),
    # the network
    "model": _d(str, "cnn28", help="backbone: a model name, MODULE:FUNCTION or timm:NAME"),
    "pretrained": _d(Optional[str], None, key_default=None, metavar="FILE",
                     help="a local .safetensors or .pt state dict loaded into the model before training (its "
                          "classifier head left out: a fresh one for the data's classes)"),
    # where and how it trains
    "precision": _d(str, "fp32", choices=PRECISIONS, key_default="fp32",
                    help="fp32 | bf16 | fp16: autocast type of the forward passes (weights stay fp32; fp16 adds a "
                         "grad scaler and needs CUDA; bf16 runs on a CPU)"),
    "compile": _d(bool, False, key_default=False, help="train through torch.compile (CUDA only)"),
    "device": _d(str, "cpu", help="cpu | cuda | cuda:N | auto"),
    "devices": _d(int, 1, low=1, key_default=1,
                  help="data-parallel training processes, one per device, each training on its share of every "
                       "batch (the batch size stays the global one); not in a grid cell's key while 1"),
    "threads": _d(Optional[int], None, low=1, runtime=True,
                  help="CPU threads torch may use (default: torch's own; a different count can change the last "
                       "bits of results, docs/learners.md)"),
    "loader": _d(str, "memory", choices=LOADERS, runtime=True,
                 help="where batches come from: memory = cut from the loaded images in the training process; "
                      "stream = read and decoded by --workers DataLoader processes (images on disk, e.g. "
                      "imagelist:DIR; memory independent of the data set's size); device = the whole uint8 set "
                      "moved to the device once, augmented there. The same seed gives the same batches in each"),
    "workers": _d(int, 0, low=0, runtime=True,
                  help="worker processes of the stream loader (0: the training process reads)"),
}

#: the recipe fields the trainer takes as they are, whatever the stage (:meth:`TrainConfig.from_recipe`)
TRAINER_FIELDS = ("momentum", "nesterov", "weight_decay", "device", "devices", "precision", "compile", "loader",
                  "workers")


@dataclass(frozen=True)
class _Use:
    default: Any
    help: str | None = None
    choices: tuple[Any, ...] | None = None
    flags: tuple[str, ...] | None = None
    metavar: str | None = None


def use(default: Any, *, help: str | None = None, choices: tuple[Any, ...] | None = None,
        flags: tuple[str, ...] | None = None, metavar: str | None = None) -> _Use:
    """A protocol's use of a recipe field: its default there, and optionally its help worded for the
    protocol, the subset of the choices its trainer runs, or its command-line spellings (and metavar)."""
    return _Use(default, help, None if choices is None else tuple(choices), None if flags is None else tuple(flags),
                metavar)


def _field_of(name: str, spec: Any) -> tuple[str, Any, Any]:
    if name not in RECIPE:
        raise TypeError(f"training_recipe: {name!r} is not a recipe field ({', '.join(RECIPE)})")  # a declaration bug
    u = spec if isinstance(spec, _Use) else _Use(spec)
    decl = RECIPE[name]
    kwargs = dict(decl.kwargs)
    if u.help is not None:
        kwargs["help"] = u.help
    if u.flags is not None:
        kwargs["flags"] = u.flags
    if u.metavar is not None:
        kwargs["metavar"] = u.metavar
    choices = kwargs.pop("choices", None)
    if u.choices is not None:
        bad = set(u.choices) - set(choices or ())
        if bad:
            raise TypeError(f"training_recipe: {name} has no choice {sorted(bad)}")  # a declaration bug
        choices = u.choices
    tp = Literal[choices] if choices is not None else decl.type  # the choices as the field's type
    if u.default is None and not _optional(tp):
        tp = Optional[tp]
    return name, tp, option(u.default, **kwargs)


def _optional(tp: Any) -> bool:
    return type(None) in getattr(tp, "__args__", ())


@dataclass(frozen=True, kw_only=True)
class RecipeConfig(RunConfig):
    """A training protocol's run config: a :class:`~vistabench.config.RunConfig` with recipe fields
    (made by :func:`training_recipe`; subclass it, and call ``super().check()`` in ``check``)."""

    #: the recipe fields this protocol has, in declaration order
    recipe_fields: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def fields_info(cls) -> list[FieldInfo]:
        """The protocol's own fields, then its engine's (:func:`~vistabench.engine.engine_fields`), then its
        recipe's, then those of every run config."""
        infos = super().fields_info()
        recipe = [i for i in infos if i.name in cls.recipe_fields]
        engine = [i for i in infos if i.name in ENGINE]
        rest = [i for i in infos if i.name not in cls.recipe_fields and i.name not in ENGINE]
        common = {f.name for f in dataclasses.fields(RunConfig)}
        return [i for i in rest if i.name not in common] + engine + recipe + [i for i in rest if i.name in common]

    def check(self) -> None:
        check_recipe(self, hint=self.recipe_hint)

    def to_recipe(self, **resolved: Any) -> "Recipe":
        """This config's training recipe as the value the learners take (:class:`Recipe`): its recipe
        fields, ``resolved`` filling those the run decides later (a preset's model or epochs; a field
        this protocol does not have keeps the recipe's default)."""
        return recipe_with({k: getattr(self, k) for k in self.recipe_fields}, resolved)

    def recipe_hint(self, name: str) -> str:
        """Appended to a recipe error about ``name`` (override: where a preset set it)."""
        return ""


def training_recipe(**fields: Any) -> type[RecipeConfig]:
    """The base class of a protocol's config with the recipe fields named, each with the protocol's
    default (a value, or :func:`use` for help, choices or flags of its own); declaration order kept.

    >>> Base = training_recipe(epochs=5, lr=0.1)
    >>> [i.name for i in Base.fields_info()][:2], Base.field_info("epochs").low
    (['epochs', 'lr'], 1)
    """
    return _recipe_base("TrainingRecipe", RecipeConfig, fields)


@dataclass(frozen=True, kw_only=True)
class RecipeOptions(Options):
    """A verb's or a function's options (not a run config) with recipe fields (made by :func:`recipe_options`)."""

    #: the recipe fields these options have, in declaration order
    recipe_fields: ClassVar[tuple[str, ...]] = ()

    def check(self) -> None:
        check_recipe(self)

    def to_recipe(self, **resolved: Any) -> "Recipe":
        """These options' recipe fields as a :class:`Recipe` (the others at the recipe's defaults)."""
        return recipe_with({k: getattr(self, k) for k in self.recipe_fields}, resolved)


def recipe_options(**fields: Any) -> type[RecipeOptions]:
    """As :func:`training_recipe`, for options that are not a run config (no ``track`` fields): a verb
    that trains without being a protocol's run (``stream pretrain``) takes its recipe fields from here.

    >>> Base = recipe_options(lr=use(0.05, help="learning rate"))
    >>> Base(lr=0.1).to_recipe().lr, Base.field_info("lr").help
    (0.1, 'learning rate')
    """
    return _recipe_base("RecipeFields", RecipeOptions, fields)


def _recipe_base(name: str, base: type, fields: dict[str, Any]) -> Any:
    made = [_field_of(field_name, spec) for field_name, spec in fields.items()]
    out = dataclasses.make_dataclass(name, made, bases=(base,), frozen=True, kw_only=True)
    out.recipe_fields = tuple(fields)
    out.__module__ = __name__
    return out


def _check_value(self: Any) -> None:
    check_recipe(self, split_batches=False)  # a stage may cap the batch at its images (the trainer splits any)


def _replace(self: Any, **changes: Any) -> Any:
    """This recipe with ``changes`` (:func:`recipe_with`: only the new values are checked)."""
    return recipe_with(recipe_values(self), changes)


#: The training recipe as a value: every :data:`RECIPE` field, with the declaration's default, type and
#: range, checked once when made (:func:`check_recipe`). What the learners and the trainer take; a
#: protocol's config gives it with ``to_recipe()``; ``replace(**stage)`` is a stage's own recipe.
Recipe = dataclasses.make_dataclass(
    "Recipe", [_field_of(name, _Use(decl.default)) for name, decl in RECIPE.items()], bases=(Options,),
    frozen=True, kw_only=True, namespace={"check": _check_value, "replace": _replace})
Recipe.__module__ = __name__
Recipe.__doc__ = """The training recipe: every field of :data:`RECIPE` (checked by :func:`check_recipe` when made).

>>> r = Recipe(epochs=3, lr=0.1)
>>> (r.epochs, r.lr, r.momentum, r.replace(epochs=5).epochs)
(3, 0.1, 0.9, 5)
"""


def default_recipe() -> "Recipe":
    """The recipe of every declared default (made once: its defaults are the declaration's own)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Recipe.from_checked()
    return _DEFAULT


_DEFAULT: Any = None


def recipe_with(checked: dict[str, Any], changes: dict[str, Any] | None = None, *,
                compare: dict[str, Any] | None = None) -> "Recipe":
    """A :class:`Recipe` of ``checked`` values (checked already: a recipe's, or a config's fields declared
    from :data:`RECIPE` with the same or narrower rules; not checked again) and ``changes`` (a stage's
    values, a preset's model or epochs), each checked by its declaration unless it is the value of the
    same name in ``compare`` (default ``checked``) passed on again. A field left None where the recipe
    allows no None is checked too (its error names it); the rules across fields (:func:`check_recipe`)
    run on the whole; the other fields keep the recipe's defaults."""
    changes = changes or {}
    compare = checked if compare is None else compare
    values = {**checked, **changes}
    fresh = {k for k, v in changes.items() if not (k in compare and type(compare[k]) is type(v) and compare[k] == v)}
    fresh |= {k for k, v in values.items() if v is None and not _optional(RECIPE[k].type)}
    return Recipe.from_checked(**{k: Recipe.check_field(k, v) if k in fresh else v for k, v in values.items()})


def recipe_values(source: Any) -> dict[str, Any]:
    """Every recipe field ``source`` (a config, a context, a mapping) has -> its value."""
    if isinstance(source, dict):
        return {k: v for k, v in source.items() if k in RECIPE}
    return {k: getattr(source, k) for k in RECIPE if hasattr(source, k)}


def check_device(device: Any, name: str = "device") -> None:
    """The spelling of a device (its availability is checked when the trainer is made, so a config
    made on a CPU-only driver can still be shipped to GPU workers)."""
    if not (isinstance(device, str) and (device in ("cpu", "cuda", "auto") or re.fullmatch(r"cuda:\d+", device))):
        raise InputError(f"{name}: expected 'cpu', 'cuda', 'cuda:N' or 'auto', got {device!r}")


def check_recipe(recipe: Any, *, hint: Any = None, split_batches: bool = True) -> None:
    """The one check across a recipe's fields (``recipe``: a config or a mapping; fields it lacks are
    skipped); InputError naming the field. ``hint(name)`` is appended to a message about ``name``.
    ``split_batches``: a protocol's batch is a multiple of ``devices`` (the trainer itself shares any
    batch of at least ``devices`` images, so a :class:`Recipe` a stage made is not held to it)."""
    values = recipe_values(recipe)
    more = hint or (lambda name: "")
    epochs = values.get("epochs")
    milestones = tuple(values.get("lr_milestones") or ())
    factors = tuple(values.get("lr_factors") or ())
    if "device" in values:
        check_device(values["device"])
    device, precision = values.get("device"), values.get("precision", "fp32")
    if device == "cpu" and precision == "fp16":
        raise InputError("precision: fp16 needs a CUDA device (device is cpu); use bf16 on a CPU")
    if device == "cpu" and values.get("compile"):
        raise InputError("compile: true needs a CUDA device (device is cpu); leave it off")
    devices, batch = values.get("devices", 1), values.get("batch_size")
    if split_batches and isinstance(devices, int) and devices > 1 and isinstance(batch, int) and batch % devices:
        raise InputError(f"batch_size: expected a multiple of devices={devices} (the global batch is split evenly "
                         f"over the devices), got {batch}{more('batch_size')}")
    if isinstance(epochs, int) and values.get("warmup_epochs") and values["warmup_epochs"] >= epochs:
        raise InputError(f"warmup_epochs: expected fewer than epochs={epochs}, got {values['warmup_epochs']}"
                         f"{more('warmup_epochs')}")
    if values.get("schedule") == "step" and "lr_milestones" in values and not milestones:
        raise InputError("lr_milestones: the step schedule needs at least one milestone epoch (for a constant lr "
                         "give lr_milestones 0 with lr_factors 1)")
    if milestones and values.get("schedule") != "step":
        raise InputError(f"lr_milestones: only the step schedule uses milestones (set schedule: step; schedule is "
                         f"{values.get('schedule')!r})")
    check_step_rule(milestones, factors)
    late = [m for m in milestones if isinstance(epochs, int) and m >= epochs]
    if late:
        raise InputError(f"lr_milestones: expected 0-based epochs before epochs={epochs} (the lr never reaches a "
                         f"milestone at {late[0]}), got {list(milestones)}{more('lr_milestones')}")
    model = values.get("model")
    if isinstance(model, str) and ":" in model:
        from .external import resolve_factory

        resolve_factory(model)  # importable and callable; the call itself happens when the run builds it
    pretrained = values.get("pretrained")
    if pretrained is not None:
        p = Path(pretrained)
        if p.suffix not in PRETRAINED_SUFFIXES:
            raise InputError(f"pretrained: expected a {', '.join(PRETRAINED_SUFFIXES)} state dict, got {pretrained!r}")
        if not p.is_file():
            raise InputError(f"pretrained: {pretrained} does not exist or is not a file")
