"""The typed configuration of a stream run (``vistabench stream run``; torch-free).

Two recipes fill in the training recipe of every learner (:data:`~vistabench.learners.stream.options.RECIPES`):

``dm-nevis``  google-deepmind/dm_nevis (``experiments_jax/configs/finetuning_dknn.py`` and its
              learner): 16 trials per task on a CIFAR ResNet-34 (``cifar_resnet34``), lr log-uniform
              in [1e-4, 0.1], SGD with Nesterov momentum 0.9 and weight decay
              1e-4 on conv / linear weights (dm_nevis's ``sgdw``: the decay is added to the gradient
              before the momentum), warm-up cosine (7 epochs, to 1e-8), the best validation state
              kept, batch size ``min(512, max(16, 2^int(log2(0.0025 n))))``; FT-d and MT also weigh a
              freshly initialised network (a winning one gives way to the best past network), with
              a k-NN on <= 10,000 / 5,000 images, training-mode batch norm and mAP for multilabel
              tasks.
``cpu``       the small-budget settings this toolkit started with (2 trials on ``cnn28``, lr in
              [0.003, 0.3], plain SGD, weight decay 5e-4 on every parameter, cosine to 0, the last state, batch size
              ``clip(2^floor(log2(n/16)), 16, 256)``, k-NN on 200 / 100 images in eval mode,
              exact-match accuracy for multilabel): a few seconds per task on a CPU.

``recipe: auto`` (the default) is ``dm-nevis`` for the Nevis streams (``nevis-full``,
``nevis-full-paper``, ``nevis-short``) and ``cpu`` for the bundled ``embedded`` stream and stream
files. What the user gives wins over the recipe. ``--print-config`` shows the resolved values.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

from ...config import FieldInfo, Options, option
from ...engine import engine_fields
from ...errors import InputError
from ...learners.model_options import check_model_name
from ...learners.recipe import recipe_options, recipe_values, training_recipe, use
from ...learners.stream.options import BATCH_RULES, LEARNER_RECIPES, RECIPES, SCHEDULES, PretrainSettings
from ...methods import get_method
from ...streams import check_stream_spec

__all__ = ["StreamConfig", "CutOptions", "PretrainOptions", "NEVIS_STREAMS", "CLASSIC_RUN_ID_FIELDS", "STREAM_FILE"]

#: streams whose ``recipe: auto`` is ``dm-nevis``
NEVIS_STREAMS = ("nevis-full", "nevis-full-paper", "nevis-short")
#: the fields a run id has always spelt out (``STREAM-LEARNER-tTRIALS-sSTEPS-seedSEED``); a run that
#: differs from the defaults in any other result-changing field gets a hash of those fields appended
CLASSIC_RUN_ID_FIELDS = frozenset({"stream", "learner", "trials", "steps", "seed", "run_id", "max_tasks",
                                   "data_root", "device"})

_CPU = RECIPES["cpu"]


#: the recipe fields of a task's trials (the trials search lr and label smoothing: ``lr_range``,
#: ``label_smoothing_range``), and their defaults here: the ``cpu`` recipe's (``dm-nevis`` is the other
#: preset, filled in by :meth:`StreamConfig.resolve`)
_RECIPE = training_recipe(
    model=use(_CPU["model"], flags=("--model", "--arch"),
              help="backbone (vistabench.learners.models registry, MODULE:FUNCTION or timm:NAME; default: the "
                   "recipe's, dm-nevis cifar_resnet34, cpu cnn28); older spelling arch"),
    pretrained=None,
    optimizer=use("sgd", help="SGD with momentum; weight decay added to the gradient before the momentum "
                              "(dm_nevis's sgdw)"),
    momentum=_CPU["momentum"],
    nesterov=use(_CPU["nesterov"], help="Nesterov momentum (dm_nevis: on)"),
    weight_decay=use(_CPU["weight_decay"], help="L2 weight decay (dm_nevis: 1e-4)"),
    schedule=use(_CPU["schedule"], choices=SCHEDULES,
                 help="learning rate: cosine to 0, or warmup-cosine (optax's: linear from 0 over warmup_epochs, then "
                      "cosine to final_lr; dm_nevis)"),
    warmup_epochs=use(_CPU["warmup_epochs"], help="warmup-cosine: warm-up epochs of the fit set (dm_nevis: 7; capped "
                                                  "at the trial's steps - 1)"),
    precision="fp32", compile=False, device="cpu", devices=1,
    threads=use(None, help="torch CPU threads (per trial when trials are dispatched; default 1 there; a "
                           "different count can change the last bits of results)"),
    loader="memory", workers=0)


#: where a task's search trials run (runtime only: where and how fast, never the result)
_ENGINE = engine_fields(
    runtime=True,
    engine="where a task's search trials run: local (in this process, or max_parallel worker processes) or ray "
           "(each trial a Ray task); bhpo's trials stay sequential",
    ray_address="Ray cluster of engine ray (default: start a local Ray)",
    max_parallel="trials in flight at once (local default 1; ray default: as many as the cluster allows)")


@dataclass(frozen=True, kw_only=True)
class StreamConfig(_RECIPE, _ENGINE):
    """One run of a learner over a task stream (Nevis'22 protocol)."""

    protocol = "stream"
    resolved_fields = {"width": None, "meta_test_from": None}

    stream: str = option("nevis-full", metavar="NAME|FILE",
                         help="nevis-full (dm_nevis's list), nevis-full-paper (the paper's table), nevis-short, "
                              "embedded (bundled data), or a JSON/YAML stream file")
    learner: str = option("indep", help="indep, ft-prev, ft-d, ensemble, pt (needs checkpoint), mt (multi-task "
                                        "with the most related past task), bhpo (GP-UCB Bayesian HPO)")
    trials: int = option(2, help="hyper-parameter trials per task (default: the recipe's, dm-nevis 16, cpu 2)", low=1)
    steps: int = option(40, help="SGD steps per trial", low=1)
    seed: int = option(0, help="run seed (task i gets a seed drawn from (seed, i))")
    data_root: str | None = option(None, metavar="DIR", help="folder with the tasks' data (<source>.npz or "
                                                             "<source>/train|test)")
    checkpoint: str | None = option(None, metavar="FILE", help="pretrained state dict of the pt learner "
                                                               "(only pt reads it)")
    width: int | None = option(None, low=1, help="width of a model that has one (cnn28: default 8); null for a "
                                                 "model without a width option")
    meta_test_from: str | None = option(
        None, metavar="YEAR|PRESET",
        help="meta-train / meta-test cut: a year, or 'paper' (2019: 27 FULL meta-test tasks) or 'dm-nevis' "
             "(2020, dm_nevis's DEFAULT_NEVIS_STOP_YEAR: 14 tasks); default: stream_file, the cut the stream "
             "file names (the Nevis streams: paper)")
    search_space: Literal["large", "default"] = option(
        "large", help="bhpo only: 'large' = lr, label smoothing, schedule, batch size, width, augmentation (the "
                      "paper's larger space); 'default' = lr and label smoothing")
    multilabel_absent: Literal["zero", "omit"] = option(
        "zero", help="multilabel error: a label without positives in a test set counts AP 0 ('zero', dm_nevis / "
                     "sklearn macro AP) or is left out of the mean ('omit')")
    max_tasks: int | None = option(None, low=1, metavar="N", help="stop after N tasks (continue later)")
    run_id: str | None = option(None, help="run id of the run's records and name of its checkpoint folder (default: "
                                           "STREAM-LEARNER-tTRIALS-sSTEPS-seedSEED, plus a hash of any other "
                                           "setting that differs from the defaults)")
    # ---- the training recipe (key_default: the values runs used before recipes existed)
    recipe: Literal["auto", "cpu", "dm-nevis"] = option(
        "auto", key_default="cpu",
        help="preset of the fields below: dm-nevis (google-deepmind/dm_nevis's finetuning learner) or cpu (small "
             "budgets); auto = dm-nevis for the Nevis streams, cpu for embedded and stream files")
    lr_range: tuple[float, ...] = option(_CPU["lr_range"], key_default=_CPU["lr_range"], low=0, low_open=True,
                                         help="learning rate searched log-uniformly in [LOW, HIGH] (dm_nevis: "
                                              "1e-4 0.1)")
    label_smoothing_range: tuple[float, ...] = option(_CPU["label_smoothing_range"], low=0, high=1,
                                                      key_default=_CPU["label_smoothing_range"],
                                                      help="label smoothing searched uniformly in [LOW, HIGH]")
    decay_mask: Literal["all", "weights"] = option(
        _CPU["decay_mask"], key_default=_CPU["decay_mask"],
        help="parameters decayed: all, or conv / linear weights only (dm_nevis: the parameters named w)")
    batch_size_rule: Literal["n/16", "0.0025n"] = option(
        _CPU["batch_size_rule"], key_default=_CPU["batch_size_rule"],
        help="batch size from the fit set's size n: 'n/16' = clip(2^floor(log2(n/16)), min_batch, max_batch), at "
             "most n; '0.0025n' = min(max_batch, max(min_batch, 2^int(log2(0.0025 n)))) (dm_nevis)")
    min_batch: int = option(_CPU["min_batch"], low=1, key_default=_CPU["min_batch"], help="smallest batch size")
    max_batch: int = option(_CPU["max_batch"], low=1, key_default=_CPU["max_batch"],
                            help="largest batch size (dm_nevis: 512)")
    final_lr: float = option(_CPU["final_lr"], low=0, key_default=_CPU["final_lr"],
                             help="warmup-cosine: the last learning rate (dm_nevis: 1e-8)")
    keep_best_state: bool = option(_CPU["keep_best_state"], key_default=_CPU["keep_best_state"],
                                   help="a trial keeps the network of its best validation point (dm_nevis), not "
                                        "the last; its score stays the last point's")
    val_fraction: float = option(_CPU["val_fraction"], low=0, high=1, low_open=True, key_default=_CPU["val_fraction"],
                                 help="fraction of each task's training part held out for model selection")
    multilabel_selection: Literal["map", "error"] = option(
        _CPU["multilabel_selection"], key_default=_CPU["multilabel_selection"],
        help="multilabel tasks: a trial's validation score is the mAP over the labels with positives ('map') or "
             "1 - the mean per-label 0/1 error at probability 0.5 (dm_nevis's 'validation_metric': 'error')")
    input_scaling: Literal["standardise", "minus_one_one"] = option(
        _CPU["input_scaling"], key_default=_CPU["input_scaling"],
        help="network inputs: standardised with the task's measured mean/std, or pixels mapped to [-1, 1] "
             "(dm_nevis's augmentations.normalize)")
    weight_init: Literal["torch", "haiku"] = option(
        _CPU["weight_init"], key_default=_CPU["weight_init"],
        help="a freshly built network's convolutions and linear layers: the model's own (Kaiming fan-out, PyTorch's "
             "linear default) or haiku's defaults (truncated normal, std 1/sqrt(fan_in); biases 0), as dm_nevis")
    learner_options: dict = option(
        default_factory=dict, flags=("--learner-opt", "--learner-options"), metavar="KEY=VALUE",
        help="the learner's own options (ensemble: temperature; ft-d / mt: knn_train, knn_val, knn_k, knn_fresh, "
             "knn_bn, knn_multilabel; mt: mt_weight_range, mt_memory; bhpo: bhpo_startup, ucb_beta)")
    @classmethod
    def resolve(cls, given: dict[str, Any]) -> dict[str, Any]:
        learner = given.get("learner", "indep")
        # "learner: unknown stream learner ..." with close matches
        options_cls = get_method("stream", learner, field="learner").options
        if given.get("search_space", "large") != "large" and learner != "bhpo":
            raise InputError(f"search_space: only the bhpo learner reads it (learner is {learner!r}); remove it")
        if given.get("checkpoint") is not None and learner != "pt":
            raise InputError(f"checkpoint: only the pt learner reads it (learner is {learner!r}); remove it")
        recipe = given.get("recipe", "auto")
        if recipe == "auto":
            recipe = "dm-nevis" if given.get("stream", "nevis-full") in NEVIS_STREAMS else "cpu"
        preset = RECIPES.get(recipe, {})
        if given.get("schedule", preset.get("schedule")) == "cosine":
            for name in ("warmup_epochs", "final_lr"):
                if given.get(name):
                    raise InputError(f"{name}: read only by schedule 'warmup-cosine' (schedule is 'cosine')")
            preset = {**preset, "warmup_epochs": 0, "final_lr": 0.0}
        names = {i.name for i in options_cls.fields_info()}
        opt_preset = {k: v for k, v in LEARNER_RECIPES.get(recipe, {}).items() if k in names}
        raw = given.get("learner_options") or {}
        opts = options_cls.from_dict({**opt_preset, **options_cls.normalise_names(raw, prefix="learner_options.")},
                                     prefix="learner_options.")
        out = {**preset, **given, "recipe": recipe, "learner_options": opts.to_dict()}
        if out.get("meta_test_from") is None:
            out["meta_test_from"] = STREAM_FILE
        if out.get("width") is None:  # the model's own default width; a model without one has none
            from ...learners.model_options import model_options_class

            model_cls = model_options_class(out.get("model", "cnn28"))
            has_width = model_cls is not None and "width" in model_cls.__dataclass_fields__
            out["width"] = _DEFAULT_WIDTH.get(out.get("model", "cnn28")) if has_width else None
        if learner == "bhpo" and out.get("search_space", "large") == "large" and out["width"] is None:
            # the large space's architecture dimension is the model's width: without one it would vanish
            raise InputError(f"search_space: 'large' searches the architecture as the model's width (x0.5, x1, x2); "
                             f"model {out.get('model')!r} has none (recipe {recipe}): choose --model cnn28 or "
                             "--search-space default")
        return out

    @classmethod
    def normalise_names(cls, values: Any, *, prefix: str = "") -> dict[str, Any]:
        """As :meth:`Options.normalise_names`; ``arch`` (the field's older name, in older config files
        and grids) is read as ``model``."""
        if isinstance(values, dict) and any(str(k).strip().replace("-", "_") == "arch" for k in values):
            named = {str(k).strip().replace("-", "_"): k for k in values}
            if "model" in named:
                raise InputError(f"{prefix}model: given twice ({named['arch']!r} and {named['model']!r}); keep one")
            values = {("model" if str(k).strip().replace("-", "_") == "arch" else k): v for k, v in values.items()}
        return super().normalise_names(values, prefix=prefix)

    def check(self) -> None:
        check_stream_spec(self.stream)
        check_model_name(self.model, "model")
        super().check()  # the recipe's one check: device, precision, model, pretrained
        self.check_engine()
        get_method("stream", self.learner, field="learner")  # an unknown learner: one line naming `learner`
        if self.run_id is not None and (not self.run_id.strip() or self.run_id in (".", "..")
                                        or any(c in self.run_id for c in "/\\\0")):
            raise InputError(f"run_id: expected a name (it names the run's checkpoint folder: no '/', '\\', "
                             f"'.' or '..'), got {self.run_id!r}")
        for name in ("lr_range", "label_smoothing_range"):
            value = getattr(self, name)
            if len(value) != 2 or not value[0] <= value[1]:
                raise InputError(f"{name}: expected two numbers LOW HIGH with LOW <= HIGH, got {list(value)}")
        from ...learners.model_options import model_options_class

        model_options = model_options_class(self.model)
        if self.width is not None and model_options is not None and "width" not in model_options.__dataclass_fields__:
            raise InputError(f"width: model {self.model!r} has no width option (cnn28 has; the recipe "
                             f"{self.recipe!r} may have chosen the model); remove width or set model cnn28")
        if self.min_batch > self.max_batch:
            raise InputError(f"min_batch: expected at most `max_batch` ({self.max_batch}), got {self.min_batch}")
        if self.learner == "pt" and not self.checkpoint:
            raise InputError("checkpoint: learner 'pt' needs a checkpoint file (a state dict saved with torch.save)")
        if self.batch_size_rule not in BATCH_RULES or self.schedule not in SCHEDULES:  # guarded by Literal types
            raise InputError(f"batch_size_rule / schedule: unknown ({self.batch_size_rule!r}, {self.schedule!r})")
        opts = get_method("stream", self.learner, field="learner").options.from_dict(self.learner_options,
                                                                            prefix="learner_options.")
        object.__setattr__(self, "learner_options", opts.to_dict())

    def key_dict(self) -> dict[str, Any]:
        """The grid key; the learner's options drop out where they hold the values older runs used; the
        backbone is keyed as ``arch``, its name when grids were first keyed."""
        out = super().key_dict()
        out["arch"] = out.pop("model")
        old = get_method("stream", self.learner, field="learner").options().to_dict()
        changed = {k: v for k, v in self.learner_options.items() if old.get(k) != v}
        if changed:
            out["learner_options"] = changed
        else:
            out.pop("learner_options", None)
        return dict(sorted(out.items()))

    def meta_test_cut(self) -> str | None:
        """``meta_test_from`` as :func:`~vistabench.streams.load_stream` reads it (None: the file's cut)."""
        return None if self.meta_test_from == STREAM_FILE else self.meta_test_from

    def arch_options(self) -> dict[str, Any]:
        return {"width": self.width} if self.width is not None else {}

    def learner_config(self) -> dict[str, Any]:
        """The learner's flat settings (:class:`~vistabench.learners.stream.options.LearnerConfig` fields):
        the recipe whole (one optimizer, so no ``optimizer``; the threads are set by the run), the search's
        ranges and rules, and the learner's own options."""
        recipe = {k: tuple(v) if isinstance(v, list) else v for k, v in recipe_values(self).items()
                  if k not in ("optimizer", "threads")}
        return {**recipe, "trials": self.trials, "steps": self.steps, "seed": self.seed,
                "arch_options": self.arch_options(), "search_space": self.search_space,
                "checkpoint": self.checkpoint, "lr_range": tuple(self.lr_range),
                "label_smoothing_range": tuple(self.label_smoothing_range), "decay_mask": self.decay_mask,
                "batch_size_rule": self.batch_size_rule, "min_batch": self.min_batch, "max_batch": self.max_batch,
                "final_lr": self.final_lr, "keep_best_state": self.keep_best_state, "val_fraction": self.val_fraction,
                "multilabel_selection": self.multilabel_selection, "input_scaling": self.input_scaling,
                "weight_init": self.weight_init,
                **{k: tuple(v) if isinstance(v, list) else v for k, v in self.learner_options.items()}}

    def run_id_suffix(self) -> str:
        """A hash of the result-changing fields beyond the classic ones that differ from their defaults
        ('' when none does): two grid cells differing only in, e.g., a learner option get two run ids."""
        defaults = {i.name: i.default for i in self.fields_info() if not i.required}
        defaults["arch"] = defaults.pop("model")  # as key_dict names it
        key = self.key_dict()

        extra = {k: v for k, v in key.items() if k not in CLASSIC_RUN_ID_FIELDS
                 and (k == "learner_options" or v != _plain(defaults.get(k)))}
        if not extra:
            return ""
        return hashlib.sha256(json.dumps(extra, sort_keys=True).encode()).hexdigest()[:8]


#: ``meta_test_from``'s value by default: the cut the stream file itself names
STREAM_FILE = "stream_file"

#: the width an arch gets when none is given (the arch must declare a width option)
_DEFAULT_WIDTH = {"cnn28": 8}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True, kw_only=True)
class CutOptions(Options):
    """The meta-train / meta-test cut (``meta_test_from``, as the run's config names it)."""

    meta_test_from: str | None = option(
        None, metavar="YEAR|PRESET",
        help="meta-train / meta-test cut: a year, or a preset of the Nevis streams: 'paper' (2019, the paper's "
             "last three years: 27 FULL tasks) or 'dm-nevis' (2020, dm_nevis's DEFAULT_NEVIS_STOP_YEAR: 14 FULL "
             "tasks). Default: the stream file's (paper). The cut used is printed.")


#: what PT-MT trains with of the recipe: the later pt run's backbone and device, and its own learning rate
_PRETRAIN_RECIPE = recipe_options(
    model=use("cnn28", flags=("--arch",), metavar="ARCH", help="backbone (must match the later pt run)"),
    lr=use(0.05, help="learning rate"),
    device=use("cpu", help="cpu, cuda, cuda:N or auto"))

#: the order of `stream pretrain`'s flags
_PRETRAIN_ORDER = ("meta_test_from", "stream", "out", "steps", "lr", "max_per_task", "seed", "data_root", "model",
                   "width", "device")


@dataclass(frozen=True, kw_only=True)
class PretrainOptions(CutOptions, PretrainSettings, _PRETRAIN_RECIPE):
    """`stream pretrain`: :func:`~vistabench.protocols.stream.runner.pretrain`'s one argument, checked once
    when made: the stream, model, width, device, seed, data folder and cut as a run's config checks them
    (they must match the later pt run; ``width`` is resolved to the model's own default), then PT-MT's own
    arguments (:class:`~vistabench.learners.stream.options.PretrainSettings`)."""

    stream: str = option(metavar="NAME|FILE", help="a built-in stream (`stream list`) or a stream file")
    width: int | None = option(None, help="cnn28 width (default 8)")

    @classmethod
    def fields_info(cls) -> list[FieldInfo]:
        return sorted(super().fields_info(), key=lambda info: _PRETRAIN_ORDER.index(info.name))

    def check(self) -> None:
        run = StreamConfig.from_dict({"stream": self.stream, "model": self.model, "width": self.width,
                                      "device": self.device, "seed": self.seed, "data_root": self.data_root,
                                      "meta_test_from": self.meta_test_from})  # the recipe's check included
        object.__setattr__(self, "width", run.width)
        super().check()  # PretrainSettings': the output file and the data folder

    def arch_options(self) -> dict[str, Any]:
        return {"width": self.width} if self.width is not None else {}
