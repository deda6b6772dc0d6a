"""The long-tailed protocol's run configuration: :class:`LongtailConfig` (torch-free).

>>> cfg = LongtailConfig.from_dict({"data": "digits", "method": "focal", "imbalance": 10})
>>> cfg.recipe, cfg.lr, cfg.schedule, cfg.method_options.gamma
('cpu', 0.05, 'cosine', 2.0)
>>> ref = LongtailConfig.from_dict({"data": "cifar100:/data", "method": "ib", "imbalance": 100})
>>> ref.recipe, ref.epochs, ref.lr, ref.weight_decay, ref.lr_milestones, ref.method_options.ib_epoch
('reference', 200, 0.1, 0.0002, (100, 160, 180), 100)

Fields that existed as ``longtail run`` flags keep their names and defaults (a grid cell's key is
unchanged); fields added since carry ``key_default`` = the value the older code used.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Literal

from ...config import option
from ...options import did_you_mean
from ...data.readers import check_dataset_spec
from ...errors import InputError
from ...learners.longtail.options import MethodOptions, RunFacts, resolve_method_options
from ...learners.recipe import training_recipe, use
from ...methods import get_method
from .recipes import CPU, LISTED, RECIPES, SMALLEST_CLASS, dataset_kind, derived_fields, recipe_fields

__all__ = ["LongtailConfig"]

_RECIPE_FIELDS = tuple(CPU) + ("model",)


#: the recipe fields a long-tailed run trains with, and their defaults here (the ``reference`` and ``cpu``
#: presets of :mod:`.recipes` fill them in through :meth:`LongtailConfig.resolve`)
_RECIPE = training_recipe(
    model=use("auto", help="backbone; auto: the recipe's (reference tde/lade: resnet32_bbn), else resnet32 for >= 32 "
                           "px images and cnn28 below, chosen from the data's name (from_image_size for folder:/npz: "
                           "data: the run applies the rule to the loaded images); or any model name, "
                           "MODULE:FUNCTION or timm:NAME"),
    pretrained=None, epochs=10, batch_size=128, lr=0.05, optimizer="sgd", momentum=0.9, nesterov=False,
    weight_decay=5e-4, warmup_epochs=0, warmup_start=0.0, schedule=use("cosine", choices=("cosine", "step")),
    lr_milestones=(), lr_factors=(), precision="fp32", compile=False, device="cpu", devices=1, threads=None,
    loader="memory", workers=0)


@dataclass(frozen=True, kw_only=True)
class LongtailConfig(_RECIPE):
    """One long-tailed run: split -> train ``method`` -> predict -> sweep -> score -> record."""

    protocol = "longtail"
    resolved_fields = {"model": "auto", "n_max": None, "test_imbalance": None, "augment": None}

    data: str = option(help="mnist5k | digits | cifar10:DIR | cifar100:DIR | folder:DIR | npz:FILE | imagelist:DIR")
    method: str = option(help="ce, focal, ldam_drw, balanced_softmax, logit_adjust, crt, bbn, tde, ride, ib, "
                              "tade, lade, gcl (docs/longtail.md)")
    imbalance: float | Literal["listed"] = option(
        low=0, low_open=True, metavar="RHO|listed",
        help="training imbalance ρ = max/min (the paper's 0.01 reads as 100): the run draws a long-tailed split of "
             "that ρ from the training set; listed = train on the listed training images as they are (a list "
             "that is long-tailed already: ImageNet-LT, Places-LT, iNaturalist; imagelist:DIR data), the run "
             "reporting the list's own ρ, n_max and n_min")
    recipe: Literal["auto", "cpu", "reference"] = option(
        "auto", key_default="cpu",
        help="training recipe: reference = the method's authors' CIFAR-LT training, cpu = a CPU-sized one; "
             "auto: reference for cifar10:/cifar100: data, else cpu. Fields you give win over it")
    seed: int = option(0, low=0, help="seed of the split, the initialisation and the training draws")
    n_max: int | Literal["smallest_class"] | None = option(
        None, low=1, help="head-class count (default: smallest_class, the smallest training class's size; "
                          "imbalance listed: the list's own, not set)")
    test_imbalance: float | None = option(None, low=0, low_open=True, help="test imbalance of the sweep (default: "
                                                                          "the training imbalance, as ρ >= 1; "
                                                                          "imbalance listed: the list's own ρ)")
    points: int = option(10, low=2, help="sweep points T")
    repeats: int = option(5, low=1, help="test sets R per sweep point")
    normalisation: Literal["dataset", "cifar"] = option(
        "dataset", key_default="dataset",
        help="input standardisation: dataset = mean/std measured on the run's training images; cifar = the "
             "references' fixed CIFAR mean (0.4914, 0.4822, 0.4465) / std (0.2023, 0.1994, 0.2010)")
    init: Literal["fan_out", "fan_in"] = option(
        "fan_out", key_default="fan_out",
        help="initialisation: fan_out = the models' own (Kaiming fan-out convolutions, PyTorch's default "
             "linear layers); fan_in = Kaiming-normal fan-in on every convolution and linear layer (the "
             "references' _weights_init)")
    drop_last: bool = option(False, key_default=False,
                             help="leave each epoch's last incomplete batch out (BBN's DataLoader; TDE/LADE's "
                                  "int(N/batch) steps)")
    select_checkpoint: Literal["last", "best_val", "best_test"] = option(
        "last", key_default="last",
        help="weights that predict: last = the last epoch's; best_val = the epoch with the best accuracy on 10% "
             "of each class held out of training; best_test = the best on the test pool (what LDAM-DRW, "
             "IB-Loss, GCL print and BBN/TDE/LADE test: selected on the test set, so flattering; the record "
             "keeps the last epoch's accuracy beside it)")
    augment: bool | Literal["from_image_size"] | None = option(
        None, key_default=None, help="random crop + flip (default: on for >= 32 px images, from the data's name; "
                                     "from_image_size for folder:/npz: data)")
    method_options: dict | MethodOptions = option(default_factory=dict, flags=("--method-opt", "--method-options"),
                                 help="the method's options as KEY=VALUE (see --print-config)")
    tag: str | None = option(None, runtime=True, help="free-form tag of the stored record")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None = None, *, prefix: str = "") -> "LongtailConfig":
        if isinstance(values, Mapping):  # a word other than listed: one line naming both kinds of value
            _check_imbalance_word(values.get("imbalance"))
        return super().from_dict(values, prefix=prefix)

    @classmethod
    def resolve(cls, given: dict[str, Any]) -> dict[str, Any]:
        method = given.get("method")
        recipe = given.get("recipe", "auto")
        if recipe == "auto":
            recipe = "reference" if dataset_kind(given.get("data", "")) != "other" else "cpu"
        if recipe not in RECIPES:  # the field's own check names the choices
            return given
        out = dict(given)
        out["recipe"] = recipe
        if isinstance(method, str):
            get_method("longtail", method)  # unknown method: one line naming `method`
            preset = recipe_fields(recipe, method, given.get("data", ""))
            if "model" in preset and given.get("model", "auto") != "auto":
                preset.pop("model")
            for k, v in preset.items():
                if k not in given or (k == "model" and given.get("model", "auto") == "auto"):
                    out[k] = v
        for k, v in derived_fields(given.get("data", ""), given.get("imbalance")).items():
            if out.get(k, "auto" if k == "model" else None) in (None, "auto"):
                out[k] = v
        return out  # the method's options are resolved by check(), from the checked recipe

    def check(self) -> None:
        check_dataset_spec(self.data, "data")
        if self.imbalance == LISTED and self.n_max not in (None, SMALLEST_CLASS):
            raise InputError(f"n_max: {self.n_max} is the head class of a drawn split, but imbalance listed trains on "
                             "the list as it is (the run reports the list's own n_max); drop n_max")
        super().check()  # the recipe's one check: device, precision, model, pretrained, warm-up, milestones
        if type(self.method_options) is not get_method("longtail", self.method).options:
            # given as a mapping: over what the method's preset reads of this run (its recipe, checked
            # just above); options already resolved (a copy of a config) are kept as they are
            facts = RunFacts(recipe=self.to_recipe(), dataset=dataset_kind(self.data), preset=self.recipe)
            object.__setattr__(self, "method_options", resolve_method_options(self.method, self.method_options, facts))
        for name in type(self.method_options).epoch_options:
            at = getattr(self.method_options, name)
            if at is not None and at >= self.epochs:
                raise InputError(f"method_options.{name}: expected a 0-based epoch before epochs={self.epochs} "
                                 f"(from epoch {at} on it never applies), got {at}")

    def recipe_hint(self, name: str) -> str:
        """Where ``name``'s value came from when it is the recipe's (set for the recipe's own epochs)."""
        preset = recipe_fields(self.recipe, self.method, self.data) if self.recipe in RECIPES else {}
        if name in preset and preset[name] == getattr(self, name) and preset.get("epochs") != self.epochs:
            what = "lr_milestones and lr_factors" if name == "lr_milestones" else name
            return (f" (recipe {self.recipe!r} sets {name} for its {preset['epochs']} epochs; give {what} for "
                    f"{self.epochs} epochs too, or recipe cpu)")
        return ""

    def key_dict(self) -> dict[str, Any]:
        """The grid key: as :meth:`RunConfig.key_dict`, with ``method_options`` reduced to the options
        that differ from what the CPU recipe (the older code) used for this method and epochs."""
        out = super().key_dict()
        today = resolve_method_options(self.method, {}, RunFacts(
            recipe=self.to_recipe(), dataset=dataset_kind(self.data), preset="cpu")).to_dict()
        diff = {k: v for k, v in self.method_options.to_dict().items() if today.get(k) != v}
        out.pop("method_options", None)
        if diff:
            out["method_options"] = diff
        return dict(sorted(out.items()))

    def unset_fields(self) -> set[str]:
        """As :meth:`RunConfig.unset_fields`; a model the recipe names (reference tde/lade) was keyed by
        its name before the data's name chose the others."""
        out = super().unset_fields()
        if "model" in recipe_fields(self.recipe, self.method, self.data):
            out.discard("model")
        return out

    def train_settings(self) -> dict[str, Any]:
        """The recipe as stored in a record's settings."""
        return {k: getattr(self, k) if not isinstance(getattr(self, k), tuple) else list(getattr(self, k))
                for k in _RECIPE_FIELDS if k != "model"}



def _check_imbalance_word(value: Any) -> None:
    """A word for ``imbalance`` other than ``listed``: one line naming both kinds of value."""
    if not isinstance(value, str) or value.strip() == LISTED:
        return
    try:
        float(value)
    except ValueError:
        raise InputError(f"imbalance: expected a number > 0 (ρ = max/min) or {LISTED!r}, got {value!r}"
                         f"{did_you_mean(value, (LISTED,), n=1)}") from None
