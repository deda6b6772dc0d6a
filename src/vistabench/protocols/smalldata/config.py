"""The small-data protocol's run configuration (:class:`SmalldataConfig`; no torch, no data loading).

Fields keep the names and defaults of the ``vistabench smalldata run`` flags they replace, so a
grid cell's key is unchanged. A budget, rule or size left unset (``epochs``, ``trials``, ``sampler``,
``model``, ``per_class``, ``image_size``, ``batch_sizes``, ...) is the dataset preset's value under the
recipe (``vistabench smalldata list``), filled in when the config is built (``--print-config`` shows
it; ``image_size: native`` for images used at their own size); the key keeps the unset value for a
field left unset (``resolved_fields``). The recipe fields added since (``stem``, ``momentum``,
``nesterov``, ``schedule``, ``warmup_epochs``, ``stages``) and the method's own options
(``method_options``, a :class:`~vistabench.learners.smalldata.options.MethodOptions` of the chosen
method, resolved for the recipe) drop out of the key while they hold the value the code used before
they existed.

What the run searches and trains with is resolved here, once, and the run uses these values:
``space`` is the whole search space (:func:`search_space`: lr ~ logU(1e-4, 0.1), weight decay ~
logU(1e-5, 0.1), the batch sizes, every method option as a range or a fixed value, the method's
fixed values; a ``space`` given overrides ranges, ``batch_sizes`` the batch sizes), ``augment:
preset`` the dataset's augmentation itself (its fields; ``pad-crop-flip`` and ``none`` name fixed
ones) and ``stem`` the ResNet stem (``small`` or ``imagenet``; ``from_image_size`` only where the
image size is known only once the images are read: ``image_size: native`` on a folder). The key
keeps what was given for these three (a printed config read back is keyed by what differs from the
recipe's values).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ...config import jsonable, option
from ...data.augment import NO_AUGMENTATION, PAD_CROP_FLIP, Augmentation
from ...data.smalldata_presets import get_preset, presets
from ...errors import InputError
from ...jsonutil import read_json
from ...learners.model_options import BUILTIN_MODELS, check_model_name, small_stem
from ...registry import did_you_mean
from ...engine import engine_fields
from ...learners.recipe import training_recipe, use
from ...learners.smalldata.options import CommonSpace, MethodOptions
from ...learners.smalldata.registry import methods as smalldata_methods
from ...methods import get_method
from ...tuning.space import Choice, Fixed, Param, space_to_json

__all__ = ["SmalldataConfig", "COMMON_SPACE", "NATIVE", "FROM_IMAGE_SIZE", "search_space"]

#: ``image_size`` of a dataset whose images are used at their own size
NATIVE = "native"
#: ``stem``: chosen by the side length the model is built for (small at <= 64 px)
FROM_IMAGE_SIZE = "from_image_size"

#: the hyper-parameters every method searches (besides its own options)
COMMON_SPACE = ("lr", "weight_decay", "batch_size")


def _method_options_cls(method: str) -> type[MethodOptions]:
    return get_method("smalldata", method).options


#: the recipe fields of a trial and a final run, and their defaults here (lr, weight decay and batch size
#: are searched: ``space``, ``batch_sizes``; a field left unset is the dataset preset's)
_RECIPE = training_recipe(
    model=use(None, help="backbone (default: the preset's: wrn16_8 for cifair10, resnet50, cnn28 for mnist5k/digits); "
                         "resnet18 for quick runs; or MODULE:FUNCTION or timm:NAME"),
    pretrained=None,
    epochs=use(None, help="epochs per trial (default: the preset's)"),
    momentum=0.9, nesterov=False,
    schedule=use("cosine", choices=("cosine",), help="learning-rate schedule: cosine to 0 over the steps (gem's "
                                                      "CosineAnnealingLR stepped per iteration)"),
    warmup_epochs=use(0, help="linear warm-up epochs before the cosine"),
    precision="fp32", compile=False, device="cpu", devices=1,
    threads=use(None, help="torch CPU threads while training (a different count can change the last bits "
                            "of results)"), loader="memory", workers=0)


#: where the search and the final runs go (``engine`` keyed: Optuna and Ray Tune search differently)
_ENGINE = engine_fields(
    runtime=("ray_address", "max_parallel"),
    engine="local: Optuna in-process (resumable SQLite study), final runs in this process or max_parallel "
           "processes; ray: Ray Tune, each final run a Ray task",
    ray_address="Ray cluster address (default: start a local Ray)",
    max_parallel="final runs in flight at once (local: N worker processes, default 1 = in this process, where "
                 "a small network's runs may train one per CPU at once, the same numbers (VISTABENCH_LANES=0: one "
                 "at a time); ray: default as many as the cluster allows)")


@dataclass(frozen=True, kw_only=True)
class SmalldataConfig(_RECIPE, _ENGINE):
    """One ``vistabench smalldata run`` (tune + final runs of one method on one dataset's splits)."""

    protocol = "smalldata"
    #: every field the dataset's preset under the recipe fills in (``vistabench smalldata list``)
    resolved_fields = {name: None for name in (
        "per_class", "train_per_class", "val_fraction", "image_size", "split", "model", "epochs", "trials",
        "grace_period", "reduction_factor", "sampler", "score_window", "select", "val_metric", "space",
        "batch_sizes", "final_epochs")}

    dataset: str = option(help=f"dataset preset: {' | '.join(presets.names())}; NAME:DIR also gives root",
                          metavar="NAME")
    root: str | None = option(None, help="the dataset's folder (not for mnist5k/digits)", metavar="DIR")
    recipe: Literal["gem", "vistabench"] = option(
        "gem", help="protocol rules: gem = the benchmark's code (fixed train/val sizes per class, the dataset's own "
                    "augmentation, ASHA eta 2, random search, mean val accuracy of the last 5 epochs, best among "
                    "all trials, every method's options at gem's defaults); vistabench = our earlier rules (60/40 "
                    "train/val, pad-crop + flip, eta 3, TPE, last-epoch balanced accuracy, completed trials only, "
                    "our method options)")
    per_class: int | None = option(None, low=1, metavar="N", help="trainval images per class (default: the "
                                   "preset's; alone it keeps the preset's train share, e.g. 20 -> 12 train + 8 val)")
    train_per_class: int | None = option(None, low=1, metavar="N", help="train images per class, the rest of "
                                         "trainval is val (gem: 30; CUB 20, ISIC 50)")
    val_fraction: float | None = option(None, low=0, high=1, low_open=True, metavar="F", help="instead of "
                                        "train_per_class: share of each class's trainval images in val (vistabench: 0.4)")
    seed: int = option(0, help="split seed and search seed")
    image_size: int | Literal["native"] | None = option(
        None, low=1, metavar="PX", help="side length variable-size images are resized to (default: the preset's; "
                                        "native: the dataset's images keep their size)")
    method: str = option(help=" | ".join(smalldata_methods.names()), metavar="NAME")
    splits: str | None = option(None, metavar="DIR", help="folder of split files (default: written to "
                                "WORK/splits/...)")
    split: tuple[int, ...] | None = option(None, low=0, metavar="I", help="only these splits (default: all)")
    trials: int | None = option(None, low=1, help="configurations per split (default: the preset's)")
    grace_period: int | None = option(None, low=1, help="ASHA's minimum epochs (default: the preset's)")
    reduction_factor: int | None = option(None, low=2, help="ASHA's eta (default: the recipe's, gem 2, vistabench 3)")
    scheduler: Literal["asha", "none"] = option("asha", help="asha stops weak trials early; none trains every trial "
                                                             "to epochs")
    sampler: Literal["random", "tpe"] | None = option(None, help="how configurations are proposed (default: the "
                                                                 "recipe's, gem random, vistabench tpe)")
    score_window: int | None = option(None, low=1, metavar="K", help="a trial's score = mean val metric of its last "
                                      "K epochs (default: gem 5, vistabench 1)")
    select: Literal["all", "complete"] | None = option(None, help="pick the best configuration among all trials, "
                                                                  "stopped ones included (gem), or among completed "
                                                                  "trials only (vistabench)")
    val_metric: Literal["accuracy", "balanced_accuracy"] | None = option(
        None, help="validation metric the search maximises (default: gem accuracy, vistabench balanced)")
    augment: Literal["preset", "pad-crop-flip", "none"] | dict[str, Any] = option(
        "preset", metavar="NAME", help="training augmentation: the dataset's own (preset, gem's per dataset; "
                                       "printed as the augmentation it is: crop, shift, pad_mode, min_scale, hflip, "
                                       "vflip), zero-pad-4 crop + horizontal flip for every dataset, or none")
    space: dict[str, Any] | str | None = option(None, metavar="JSON|FILE", help='override the search space, e.g. '
                                          '{"lr": {"loguniform": [1e-3, 0.1]}} (JSON text or a JSON file); '
                                          'printed whole: every parameter the search draws, with its range')
    batch_sizes: tuple[int, ...] | None = option(None, low=1, metavar="B", help="override the searched batch sizes")
    repeats: int = option(10, low=1, help="final runs per split")
    final_epochs: int | None = option(None, low=1, help="epochs of the final runs (default: epochs)")
    highres_scale: int = option(1, low=1, metavar="S", help="after each final run, fine-tune it for the same "
                                "epochs with the same hyper-parameters on S x larger images and score it there "
                                "(the paper's 448 px step on CUB/CLaMM: S=2); stored as kind 'highres' (1: off)")
    # ---- recipe fields added after grids existed (out of the cell key at these values)
    stages: Literal["tune+final", "tune", "final"] = option(
        "tune+final", key_default="tune+final",
        help="tune+final (run), tune only, or final only (the search must be complete)")
    method_options: dict[str, Any] | MethodOptions = option(
        default_factory=dict, flags=("--method-opt", "--method-options"),
        help="the method's own options, KEY=VALUE (a value or a search range); default: the recipe's")
    stem: Literal["auto", "from_image_size", "imagenet", "small"] = option(
        "auto", help="ResNet stem: imagenet (7x7/2 conv + 3x3/2 max-pool), small (3x3/1 conv, no pool), "
                     "from_image_size (small when the images the model is built for are <= 64 px; older spelling "
                     "auto); default: the recipe's (gem: imagenet for EuroSAT)")

    # ------------------------------------------------------------------------------ recipe
    @classmethod
    def resolve(cls, given: dict[str, Any]) -> dict[str, Any]:
        out = dict(given)
        dataset = out.get("dataset")
        if isinstance(dataset, str) and ":" in dataset:
            name, _, root = dataset.partition(":")
            if out.get("root") not in (None, root):
                raise InputError(f"dataset {dataset!r}: gives a folder, and root gives another ({out['root']!r}); "
                                 "keep one")
            out["dataset"], out["root"] = name, root
        if isinstance(out.get("space"), str):
            out["space"] = _read_space(out["space"])
        if isinstance(out.get("dataset"), str) and out["dataset"] in presets.names() \
                and out.get("recipe", "gem") in ("gem", "vistabench"):
            cls._resolve_preset(out, get_preset(out["dataset"], recipe=out.get("recipe", "gem")))
        method = out.get("method")
        if isinstance(method, str) and not isinstance(out.get("method_options"), MethodOptions):
            given_opts = out.get("method_options") or {}
            if not isinstance(given_opts, dict):
                raise InputError(f"method_options: expected a mapping of options, got {given_opts!r}")
            out["method_options"] = _method_options_cls(method).for_recipe(out.get("recipe", "gem"), given_opts)
        return out

    @staticmethod
    def _resolve_preset(out: dict[str, Any], preset: Any) -> None:
        """Fill the fields left unset with the preset's values (the one place they are chosen)."""
        def unset(name: str) -> bool:
            return out.get(name) is None

        sizes = preset.split_sizes(per_class=out.get("per_class"), train_per_class=out.get("train_per_class"),
                                   val_fraction=out.get("val_fraction"))
        for name in ("per_class", "train_per_class", "val_fraction"):
            if unset(name):
                out[name] = sizes[name]  # of train_per_class / val_fraction one is used, the other stays null
        if unset("image_size"):
            out["image_size"] = preset.image_size if preset.image_size is not None else NATIVE
        if unset("split") and unset("splits"):
            out["split"] = tuple(range(preset.num_splits))
        for name, value in preset.recipe_changes.items():  # the data set's recipe values (model, epochs)
            if unset(name):
                out[name] = value  # checked by the recipe's declaration with the config's fields
        for name in ("trials", "reduction_factor", "sampler", "score_window", "select", "val_metric"):
            if unset(name):
                out[name] = getattr(preset, name)
        epochs = out["epochs"]
        if unset("grace_period"):
            out["grace_period"] = min(preset.grace_period, epochs) if isinstance(epochs, int) else preset.grace_period
        if unset("final_epochs"):
            out["final_epochs"] = epochs
        if unset("batch_sizes"):
            out["batch_sizes"] = tuple(preset.batch_sizes)
        if unset("space"):
            out["space"] = {}  # no range changed: lr, weight decay and the method's options as declared
        stem = out.get("stem", preset.stem)
        out["stem"] = FROM_IMAGE_SIZE if stem == "auto" else stem

    def check(self) -> None:
        super().check()  # the recipe's one check: device, precision, model, pretrained, warm-up
        if self.dataset not in presets.names():
            if Path(self.dataset).exists():  # a path without the preset it holds
                with_files = [n for n in sorted(presets.names()) if n != "folder" and get_preset(n).needs_root]
                raise InputError(f"dataset {self.dataset!r}: a path needs its preset as a prefix: "
                                 f"folder:{self.dataset} (one sub-folder per class) or PRESET:{self.dataset} "
                                 f"(presets with files: {', '.join(with_files)})")
            try:
                presets.get(self.dataset)
            except InputError as exc:
                raise InputError(f"dataset: {exc}") from None
        preset = get_preset(self.dataset, recipe=self.recipe)
        if preset.needs_root and not self.root:
            raise InputError(f"root: dataset {self.dataset!r} needs its folder (give root, or dataset as "
                             f"{self.dataset}:DIR)")
        if isinstance(self.epochs, int) and isinstance(self.grace_period, int) and self.grace_period > self.epochs:
            raise InputError(f"grace_period: expected at most `epochs` ({self.epochs}), got {self.grace_period}")
        self.check_engine()
        if self.train_per_class is not None and self.val_fraction is not None:
            raise InputError(f"val_fraction: give either train_per_class or val_fraction, not both (got "
                             f"{self.val_fraction} and {self.train_per_class})")
        if self.val_fraction is not None and self.val_fraction >= 1:
            raise InputError(f"val_fraction: expected a fraction in (0, 1), got {self.val_fraction}")
        if self.model is not None:
            check_model_name(self.model)
        cls = _method_options_cls(self.method)
        backbones = get_method("smalldata", self.method).backbones
        factory = isinstance(self.model, str) and ":" in self.model
        if backbones is not None and (self.model in BUILTIN_MODELS or factory) and self.model not in backbones \
                and self.model != get_preset(self.dataset, recipe=self.recipe).recipe_changes["model"]:  # the preset's: as before
            raise InputError(f"model: method {self.method!r} changes a convolutional backbone "
                             f"({', '.join(backbones)}); {self.model!r} is not one")
        opts = self.method_options
        if isinstance(opts, dict):  # built directly, not through from_dict: resolve here
            object.__setattr__(self, "method_options", cls.for_recipe(self.recipe, opts))
        elif type(opts) is not cls:
            raise InputError(f"method_options: expected the options of method {self.method!r} "
                             f"({cls.__name__}), got {type(opts).__name__}")
        if isinstance(self.space, str):
            object.__setattr__(self, "space", _read_space(self.space))
        self._resolve_search()

    # ------------------------------------------------------------------- what the run uses
    def _resolve_search(self) -> None:
        """Resolve the search space, the augmentation and the stem to what the run uses (once, here)."""
        overrides = dict(self.space or {})  # type: ignore[arg-type]
        preset_sizes = tuple(self.preset().batch_sizes)
        if self.batch_sizes and tuple(self.batch_sizes) != preset_sizes:
            overrides["batch_size"] = {"choice": list(self.batch_sizes)}  # the preset's are the space's own
        space = search_space(self.method, recipe=self.recipe, batch_sizes=preset_sizes,
                             method_options=self.method_options, overrides=overrides)  # type: ignore[arg-type]
        object.__setattr__(self, "space", space_to_json(space))
        augmentation = self.augmentation()  # a mapping given is checked here
        if self.augment == "preset":  # the dataset's own, shown as what it is (the other names are fixed)
            object.__setattr__(self, "augment", augmentation.to_dict())
        size = self.built_size()
        if self.stem in ("auto", FROM_IMAGE_SIZE) and size is not None:
            object.__setattr__(self, "stem", "small" if small_stem(size) else "imagenet")

    def augmentation(self) -> Augmentation:
        """The training augmentation of ``augment`` (a name, or the augmentation's fields)."""
        aug = self.augment
        if aug == "preset":
            return self.preset().augmentation
        if isinstance(aug, str):  # the other names (the field's type admits no more)
            return PAD_CROP_FLIP if aug == "pad-crop-flip" else NO_AUGMENTATION
        try:
            return Augmentation(**aug)
        except TypeError:
            known = ", ".join(f.name for f in dataclasses.fields(Augmentation))
            raise InputError(f"augment: expected preset, pad-crop-flip, none or the fields {known}; got "
                             f"{sorted(aug)}") from None
        except InputError as exc:
            raise InputError(f"augment: {exc}") from None

    def built_size(self) -> int | None:
        """The side length of the images the model is built for, when known before they are read: the
        preset's native size, else ``image_size`` (None: ``image_size: native`` on a preset without one)."""
        native = self.preset().native_size
        if native is not None:
            return native
        return self.image_size if isinstance(self.image_size, int) else None

    # ---------------------------------------------------------------------------- grid key
    def key_dict(self) -> dict[str, Any]:
        """The canonical config minus runtime-only fields; the recipe-resolved fields added since grids
        existed (``stem``, ``method_options``) drop out while they hold the recipe's value. ``space``,
        ``augment`` and ``stem`` are keyed as given (resolved here, they were resolved by the run when
        grids began); a printed config read back is keyed by what differs from the recipe's values."""
        out = super().key_dict()
        given = self.given()
        opts = self.method_options
        if isinstance(opts, MethodOptions) and opts.to_dict() == type(opts).for_recipe(self.recipe).to_dict():
            out.pop("method_options", None)
        preset_stem = self.preset().stem
        printed = self.spells_out_resolved()
        if printed:
            default = self.with_changes(space=None, augment="preset", stem=preset_stem)
            extra = {k: v for k, v in self.space.items() if default.space.get(k, object()) != v}  # type: ignore
            out["space"] = jsonable(extra) if extra else None
            out["augment"] = "preset" if self.augment == default.augment else jsonable(self.augment)
            stem = preset_stem if self.stem == default.stem else self.stem
        else:
            if given.get("space") is not None:
                space = given["space"]
                out["space"] = jsonable(_read_space(space) if isinstance(space, str) else space)
            out["augment"] = jsonable(given.get("augment", "preset"))
            stem = given.get("stem") or preset_stem
        stem = FROM_IMAGE_SIZE if stem == "auto" else stem
        if stem == preset_stem or {stem, preset_stem} <= {"auto", FROM_IMAGE_SIZE}:
            out.pop("stem", None)
        else:
            out["stem"] = stem
        return out

    def preset(self):
        """The dataset preset under the recipe (:class:`~vistabench.data.smalldata.SmallDataPreset`)."""
        return get_preset(self.dataset, recipe=self.recipe)


def _read_space(text: str) -> dict[str, Any]:
    """``space`` given as JSON text or as the path of a JSON file."""
    t = text.strip()
    if t.startswith("{"):
        try:
            out = json.loads(t)
        except json.JSONDecodeError as exc:
            raise InputError(f"space: malformed JSON ({exc.msg})") from None
    else:
        if not Path(t).exists():
            raise InputError(f"space: {t[:60]!r}: no such file (give JSON text or a JSON file)")
        out = read_json(t, what="space")
    if not isinstance(out, dict):
        raise InputError(f"space: expected a JSON object of parameter -> range, e.g. "
                         f'{{"lr": {{"loguniform": [0.001, 0.1]}}}}, got a {type(out).__name__}')
    return out



def search_space(method: str, *, recipe: str, batch_sizes: tuple[int, ...],
                 method_options: MethodOptions | None = None,
                 overrides: dict[str, Any] | None = None) -> dict[str, Param]:
    """The search space of ``method``: lr, weight decay (:class:`CommonSpace`'s ranges, paper Table 2)
    and ``batch_sizes``, every method option (a fixed value or a range), the method's fixed values,
    then ``overrides`` (each checked against its declared bounds). A method that is not tuned searches
    nothing: a batch-size choice becomes its median, any other range is refused. Applying the result
    as ``overrides`` again gives the same space (a printed config reads back as it was)."""
    m = get_method("smalldata", method)
    opts = method_options if method_options is not None else m.options.for_recipe(recipe)
    common = CommonSpace().space()
    space: dict[str, Param] = {"lr": common["lr"], "weight_decay": common["weight_decay"],
                               "batch_size": Choice(tuple(batch_sizes))}
    space.update(opts.space())
    for k, v in m.fixed.items():
        space[k] = Fixed(v)
    own = {i.name for i in m.options.fields_info()}
    for k, v in (overrides or {}).items():
        if k in own:  # checked against the option's declared bounds
            space[k] = m.options.for_recipe(recipe, {**opts.to_dict(), k: v}, prefix="space.").space()[k]
        elif k in space:  # lr, weight_decay, batch_size: within their declared bounds
            space[k] = CommonSpace.from_dict({k: v}, prefix="space.").space()[k]
        else:
            known = sorted(set(COMMON_SPACE) | own)
            raise InputError(f"space: method {method!r} has no parameter {k!r}{did_you_mean(k, known, n=2, cutoff=0.6)} "
                             f"(its parameters: {', '.join(known)})")
    if not m.tuned:  # nothing is searched: a batch-size choice becomes its median, anything else is an error
        for k, p in list(space.items()):
            if isinstance(p, Choice) and k == "batch_size":
                vals = sorted(p.values)
                space[k] = Fixed(vals[len(vals) // 2])
            elif not isinstance(p, Fixed):
                raise InputError(f"space: method {method!r} is not tuned: the search space cannot search {k!r}")
    return space
