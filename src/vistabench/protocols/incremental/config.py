"""The few-shot class-incremental run's configuration (:class:`IncrementalConfig`); no torch, no data.

Fields that were ``vistabench incremental run`` flags keep their names and defaults (grid cell keys
of older grids stay). The base session's recipe (``lr`` ... ``lr_factors``) is in the config; the
method's own hyper-parameters are ``method_options`` (for ``fr``: the authors' run script of the
``preset``'s dataset, :class:`~vistabench.learners.incremental.options.FROptions`). The ``fr_*``
fields are the older spellings of ``fr``'s options: resolving the config moves them into
``method_options`` (and back to their defaults), so a printed config names every value once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ...config import Options, option
from ...data.readers import check_dataset_spec
from ...errors import InputError
from ...learners.incremental import default_backbone
from ...learners.incremental.options import FR_OLDER_NAMES, FR_PAPER_VIT, FR_SCRIPTS
from ...learners.model_options import check_model_name, check_model_options
from ...learners.recipe import training_recipe, use
from ...methods import get_method

__all__ = ["IncrementalConfig", "FR_FIELDS", "FR_LOSS_WEIGHTS", "PRESETS", "paper_data"]

#: name -> (num_classes, base_classes, way, shot, num_sessions); the FSCIL benchmarks' settings
#: (here, not beside the session builder: building the command line must not import numpy)
PRESETS: dict[str, tuple[int, int, int, int, int]] = {
    "cifar100": (100, 60, 5, 5, 9),
    "mini_imagenet": (100, 60, 5, 5, 9),
    "cub200": (200, 100, 10, 5, 11),
}

#: older ``fr_*`` fields -> the ``fr`` method option they set
FR_FIELDS = {"fr_recipe": "recipe", "fr_epochs": "epochs_fr", "fr_layers": "layers", "fr_ensemble": "ensemble"}
#: the keys ``fr_weights`` may set
FR_LOSS_WEIGHTS = ("cos", "cr", "ir_intra", "ir_inter", "ce_novel")
_FR_DEFAULTS: dict[str, Any] = {"fr_recipe": "cpu", "fr_epochs": None, "fr_layers": None, "fr_weights": None,
                                "fr_ensemble": "logits"}
_LAYOUT = ("preset", "base_classes", "way", "shot")
#: named defaults of the layout: every sample (``base_shot``, ``test_per_class``), every session the
#: data's classes fill (``num_sessions`` without a preset)
ALL, ALL_THAT_FIT = "all", "all_that_fit"


def paper_data(data: Any) -> bool:
    """Whether ``data`` names the paper's dataset (``cifar100:DIR``; miniImageNet and CUB-200 come as
    ``folder:`` data, which cannot be told from any other folder)."""
    return isinstance(data, str) and data.split(":", 1)[0].strip().lower() == "cifar100" and ":" in data


def _number(text: str) -> Any:
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def _fr_weights(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in (w.strip() for w in text.split(",")):
        if not item:
            continue
        key, eq, value = item.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise InputError(f"fr_weights: expected KEY=VALUE,..., got {item!r}")
        if key.strip() not in FR_LOSS_WEIGHTS:
            raise InputError(f"fr_weights: unknown loss {key.strip()!r} (known: {', '.join(FR_LOSS_WEIGHTS)})")
        out[key.strip()] = _number(value.strip())
    return out


#: the recipe fields of the base session (the novel sessions: ``novel_epochs``, ``novel_lr``), and their
#: defaults here
_RECIPE = training_recipe(
    model=use(None, help="backbone (cnn28, resnet32, resnet18, vit_small, ...; default: the method's: cnn28, for fr "
                         "vit_small with dim=64, depth=6, heads=4); or MODULE:FUNCTION or timm:NAME"),
    pretrained=None,
    epochs=use(5, help="base-session epochs"),
    lr=use(0.05, help="base-session learning rate (SGD)"),
    momentum=use(0.9, help="SGD momentum (base and novel sessions)"),
    nesterov=False,
    weight_decay=use(5e-4, help="SGD weight decay (base and novel sessions)"),
    warmup_epochs=use(0, help="linear warm-up epochs of the base session (per step)"),
    schedule=use("cosine", choices=("cosine", "step"),
                 help="base-session lr: cosine to 0 per step, or step: lr x lr_factors[i] from 0-based epoch "
                      "lr_milestones[i] on"),
    lr_milestones=(), lr_factors=(),
    batch_size=use(128, help="batch size (capped at a session's images)"),
    precision="fp32", compile=False, device="cpu", devices=1, loader="memory", workers=0)


@dataclass(frozen=True, kw_only=True)
class IncrementalConfig(_RECIPE):
    """One run of a reference learner through the few-shot class-incremental sessions."""

    protocol = "incremental"
    resolved_fields = {"model": None, "base_classes": None, "way": None, "shot": None, "num_sessions": None,
                       "base_shot": None, "test_per_class": None}

    data: str = option(help="mnist5k | digits | cifar100:DIR | folder:DIR | npz:FILE (needs a test part)")
    sessions: str | None = option(None, metavar="FILE",
                                  help="sessions file (else built from the layout fields and written to the work folder)")
    preset: Literal["cifar100", "mini_imagenet", "cub200"] | None = option(  # = PRESETS (tested)
        None,
                                help="session layout of a FSCIL benchmark (cifar100, mini_imagenet: 60 base, 8 x 5-way "
                                     "5-shot; cub200: 100 base, 10 x 10-way 5-shot); for fr also the authors' run script")
    base_classes: int | None = option(None, low=1, help="|Y_1| (base classes 0..B-1)")
    way: int | None = option(None, low=1, help="classes per novel session")
    shot: int | None = option(None, low=1, help="training samples per novel class")
    num_sessions: int | Literal["all_that_fit"] | None = option(
        None, low=1, help="sessions including the base session (default: the preset's, else all_that_fit: as many "
                          "as the data's classes fill)")
    base_shot: int | Literal["all"] | None = option(None, low=1, help="training samples per base class (default: all)")
    test_per_class: int | Literal["all"] | None = option(None, low=1, key_default=None,
                                                         help="test samples per class in the pool (default: all)")
    method: str = option(help="prototype | finetune | fr (or a method added with register_method)")
    model_opt: dict = option(default_factory=dict, flags=("--model-opt",),
                             help="backbone options KEY=VALUE (vit_small: dim, depth, heads, patch_size, "
                                  "mlp_ratio; cnn28: width); with no model, added to the method's backbone options")
    method_options: dict = option(default_factory=dict, flags=("--method-opt", "--method-options"), key_default={},
                                  help="the method's own options KEY=VALUE (fr: see --print-config); printed resolved")
    novel_epochs: int = option(10, low=1, help="finetune: epochs per novel session (cosine from novel_lr)")
    novel_lr: float = option(0.01, low=0, low_open=True, help="finetune: novel-session learning rate")
    fr_recipe: Literal["cpu", "paper"] = option("cpu", help="fr: older spelling of method_options recipe "
                                                            "(paper: the authors' FR budget; cpu: a CPU-sized one; "
                                                            "default: paper on cifar100: data, cpu on other data)")
    fr_epochs: int | None = option(None, low=1, help="fr: older spelling of method_options epochs_fr")
    fr_layers: tuple[int, ...] | None = option(None, low=0, metavar="BLOCK",
                                               help="fr: older spelling of method_options layers")
    fr_weights: str | None = option(None, metavar="K=V,...",
                                    help="fr: older spelling of the loss weights in method_options "
                                         "(cos, cr, ir_intra, ir_inter, ce_novel)")
    fr_ensemble: Literal["logits", "softmax"] = option("logits",
                                                       help="fr: older spelling of method_options ensemble")
    eval_transform: Literal["none", "resize_crop"] = option(
        "none", key_default="none",
        help="the images the learner scores and builds prototypes from: none (as stored) or resize_crop "
             "(resized to int(1.15 s) px and centre-cropped to s, the test transform of the authors' code, "
             "Revisting_FSCIL dataloader/cifar100/cifar.py)")
    seed: int = option(0, help="seed of the shots, the initialisation and the training order")
    compat: bool = option(False, help="score gAcc with the authors' public formula")
    tag: str | None = option(None, help="tag of the stored record")

    # ------------------------------------------------------------------------------ resolve
    @classmethod
    def resolve(cls, given: dict[str, Any]) -> dict[str, Any]:
        out = dict(given)
        method = out.get("method")
        if not isinstance(method, str):
            return out  # required / type: the field checks say so
        opts_cls = get_method("incremental", method).options
        mo = out.get("method_options") or {}
        mo = mo.to_dict() if isinstance(mo, Options) else dict(mo)
        fr_given = {k: out[k] for k in _FR_DEFAULTS if k in out and out[k] != _FR_DEFAULTS[k]}
        if fr_given and method != "fr":
            first = next(iter(fr_given))
            raise InputError(f"{first}: goes with method fr, got method {method!r}")
        if method == "fr":
            mo = opts_cls.normalise_names(mo, prefix="method_options.")  # FR's older option names read as today's
            explicit = "fr_recipe" in given or any(k.replace("-", "_") == "recipe" for k in mo)
            mo = cls._fold_fr_fields(fr_given, mo)
            out.update(_FR_DEFAULTS)
            if not explicit:  # one rule for every protocol: the paper's recipe on the paper's data
                mo["recipe"] = "paper" if paper_data(out.get("data")) else "cpu"
        model, model_opt = cls._backbone(out, method, mo.get("recipe"))
        out["model"], out["model_opt"] = model, model_opt  # the backbone the run builds, printed
        cls._resolve_layout(out)
        if method == "fr" and out.get("eval_transform", "none") != "none":
            raise InputError("eval_transform: resize_crop goes with the prototype and finetune learners; fr "
                             "scores the images as stored (its reference trains on 36 px views: docs/fidelity.md)")
        if method == "fr":
            if model != "vit_small":
                raise InputError(f"model: method 'fr' needs a ViT backbone with intermediate blocks (vit_small), "
                                 f"got {model!r}")
            preset = out.get("preset")
            if preset not in FR_SCRIPTS and paper_data(out.get("data")):
                preset = "cifar100"  # the run script of the data's benchmark
            mo.setdefault("script", preset if preset in FR_SCRIPTS else "mini_imagenet")
            depth = model_opt.get("depth", 12)  # VisionTransformer's default depth
            if "depth" in mo and str(mo["depth"]) != str(depth):
                raise InputError(f"method_options.depth: the backbone has {depth} blocks, got {mo['depth']!r} "
                                 "(set the backbone's depth with model_opt depth=N)")
            mo["depth"] = depth
        out["method_options"] = opts_cls.from_dict(mo, prefix="method_options.").to_dict()
        if method == "fr":  # the older spellings show the values they stand for (read back, they agree)
            resolved = out["method_options"]
            for name, key in FR_FIELDS.items():
                out[name] = tuple(resolved[key]) if isinstance(resolved[key], list) else resolved[key]
            out["fr_weights"] = ",".join(f"{k}={resolved[k]}" for k in FR_LOSS_WEIGHTS)
        return out

    @staticmethod
    def _resolve_layout(out: dict[str, Any]) -> None:
        """The session layout from the preset; without a sessions file the named defaults."""
        if out.get("sessions") is not None:
            return  # the file holds the layout
        preset = out.get("preset")
        if preset in PRESETS:
            _, b, w, k, n = PRESETS[preset]
            for name, want in (("base_classes", b), ("way", w), ("shot", k), ("num_sessions", n)):
                if out.get(name) is None:
                    out[name] = want
        for name, named in (("num_sessions", ALL_THAT_FIT), ("base_shot", ALL), ("test_per_class", ALL)):
            if out.get(name) is None:
                out[name] = named

    @staticmethod
    def _backbone(given: dict[str, Any], method: str, recipe: Any = None) -> tuple[str, dict[str, Any]]:
        """(model, options) the run builds: the method's backbone when no model is named (for fr's
        ``paper`` recipe the authors' ViT shape, dim 256, depth 12, 8 heads)."""
        model = given.get("model")
        opts = dict(given.get("model_opt") or {})
        if model is not None:
            check_model_name(model)
        if model is None:
            model, defaults = default_backbone(method)
            if method == "fr" and recipe == "paper":
                defaults = dict(FR_PAPER_VIT)
            return model, {**defaults, **check_model_options(model, opts)}
        return model, check_model_options(model, opts)

    @staticmethod
    def _fold_fr_fields(fr_given: dict[str, Any], mo: dict[str, Any]) -> dict[str, Any]:
        mo = dict(mo)
        if fr_given.get("fr_epochs") is not None and fr_given["fr_epochs"] < 1:
            raise InputError(f"fr_epochs: expected a number >= 1, got {fr_given['fr_epochs']!r}")
        if fr_given.get("fr_layers") is not None and any(b < 0 for b in fr_given["fr_layers"]):
            raise InputError(f"fr_layers: expected block indices >= 0, got {list(fr_given['fr_layers'])}")
        moved: dict[str, tuple[str, Any]] = {}
        for name, value in fr_given.items():
            items = _fr_weights(value) if name == "fr_weights" else {FR_FIELDS[name]: value}
            for key, v in items.items():
                moved[key] = (name, v)
        for key, (name, value) in moved.items():
            norm = {k.replace("-", "_"): v for k, v in mo.items()}
            if key in norm and str(norm[key]) != str(value) and not (
                    isinstance(value, tuple) and list(value) == list(norm[key] or [])):
                raise InputError(f"{name}: says {key}={value!r}, method_options says {norm[key]!r}; give one")
            mo[key] = value
        return mo

    # -------------------------------------------------------------------------------- check
    def check(self) -> None:
        check_dataset_spec(self.data, "data")
        super().check()  # the recipe's one check: device, precision, model, pretrained, warm-up, milestones
        if self.sessions is not None:
            given = [k for k in _LAYOUT if getattr(self, k) is not None]
            if given:
                raise InputError(f"sessions: the sessions file already fixes the layout; drop {', '.join(given)}")
        elif self.preset is None:
            missing = [k for k in ("base_classes", "way", "shot") if getattr(self, k) is None]
            if missing:
                raise InputError(f"preset: give a preset or all of base_classes, way, shot (missing "
                                 f"{', '.join(missing)})")
        else:
            num_classes, b, w, k, n = PRESETS[self.preset]
            for name, want in (("base_classes", b), ("way", w), ("shot", k), ("num_sessions", n)):
                v = getattr(self, name)
                if v is not None and v != want:
                    raise InputError(f"{name}: {v} contradicts preset {self.preset} ({want})")

    # ------------------------------------------------------------------------------ helpers
    def key_dict(self) -> dict[str, Any]:
        """As :meth:`RunConfig.key_dict`, with ``model_opt`` in its older form (a list of ``KEY=VALUE``
        strings, ``[]`` when empty; with the model left unset, the options given, as before the method's
        backbone was printed), so grid cells keep the keys they had when it was a repeated flag; the
        older ``fr_*`` spellings are keyed at their defaults (``method_options`` holds their values), and
        ``fr``'s own training options under their older names (``epochs`` for ``epochs_fr``, ...:
        :data:`~vistabench.learners.incremental.options.FR_OLDER_NAMES`), so FR cells keep their keys."""
        out = super().key_dict()
        opts = self.model_opt
        if "model" in self.unset_fields():  # the options given; read back from a printed config, the
            # options that differ from the method's backbone
            given = {} if self.spells_out_resolved() else dict(self.given().get("model_opt") or {})
            _, defaults = self._backbone({}, self.method, self.method_options.get("recipe"))
            opts = {k: self.model_opt[k] for k in given if k in self.model_opt}
            opts.update({k: v for k, v in self.model_opt.items() if k not in opts and defaults.get(k) != v})
        out["model_opt"] = [f"{k}={v}" for k, v in opts.items()]
        for name, value in _FR_DEFAULTS.items():
            out[name] = value
        if self.method == "fr" and isinstance(out.get("method_options"), dict):
            older = {new: old for old, new in FR_OLDER_NAMES.items()}
            out["method_options"] = {older.get(k, k): v for k, v in out["method_options"].items()}
        return out

    def layout(self) -> dict[str, Any]:
        """The layout fields as the session builder reads them (None: all / all that fit)."""
        out = {name: getattr(self, name) for name in ("preset", "base_classes", "way", "shot", "num_sessions",
                                                      "base_shot", "test_per_class")}
        return {k: None if v in (ALL, ALL_THAT_FIT) else v for k, v in out.items()}

    def backbone(self) -> tuple[str, dict[str, Any]]:
        """(model, options) the run builds."""
        if hasattr(self, "_given") and self.model is not None:  # from_dict: resolve() checked and set them
            return self.model, dict(self.model_opt)
        return self._backbone({"model": self.model, "model_opt": self.model_opt}, self.method,
                              self.method_options.get("recipe"))

    def learner_options(self) -> Options:
        """The method's options as its Options object (checked when the config was built)."""
        return get_method("incremental", self.method).options.from_dict(self.method_options, prefix="method_options.")
