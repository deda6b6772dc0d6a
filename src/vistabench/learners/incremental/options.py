"""Method options of the incremental learners (no torch): typed, validated, printed with the run's config.

``fr`` follows the authors' per-dataset run scripts (iSEE-Laboratory/Revisting_FSCIL,
``runs/cifar100.sh``, ``runs/miniImageNet.sh``, ``runs/cub200.sh``; defaults of ``train.py`` and
``models/my_vit/helper.py`` where a script leaves a value out). :data:`FR_SCRIPTS` holds what
differs between the scripts; :data:`FR_COMMON` what they share. The ``cpu`` recipe keeps every
loss, weight, layer choice and ε of the script and shrinks only the budget (:data:`FR_CPU_BUDGET`).

FR trains its rectification modules in its own loop, not the run's training recipe: its epochs,
learning rate, momentum, step rule and batch size carry the authors' ``_fr`` names (``-epochs_fr``,
``-lr_fr``, ``-milestones_fr``, ``-gamma_fr``, ``-batch_size_fr``), so a config never shows two
meanings under one name. Their older names (:data:`FR_OLDER_NAMES`, stored by runs before the rename)
are still read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping

from ...config import Options, jsonable, option
from ...errors import InputError
from ..schedules import check_step_rule

__all__ = ["NoOptions", "FROptions", "FR_SCRIPTS", "FR_COMMON", "FR_CPU_BUDGET", "FR_SCRIPT_DEPTH", "FR_PAPER_VIT",
           "FR_OLDER_NAMES", "script_layers", "scaled_milestones"]

#: Depth of the authors' ViT (``deit_my_small_*``: dim 256, depth 12, 8 heads): the scripts' blocks count in it.
FR_SCRIPT_DEPTH = 12

#: What the three run scripts set differently (``-output_blocks``, ``-fr_kl``, ``-fr_ce_novel``, ``-eps``).
FR_SCRIPTS: dict[str, dict[str, Any]] = {
    "cifar100": {"layers": (7, 8, 9), "cr": 0.5, "ce_novel": 2.0, "eps": 1e-6},
    "mini_imagenet": {"layers": (8, 9, 10), "cr": 0.1, "ce_novel": 0.5, "eps": 1e-6},
    "cub200": {"layers": (8, 9, 10), "cr": 1.0, "ce_novel": 0.5, "eps": 1e-5},
}

#: What the three scripts share (script flags, else ``train.py`` defaults, else ``helper.py`` constants).
FR_COMMON: dict[str, Any] = {
    "epochs_fr": 100,                   # -epochs_fr 100
    "lr_fr": 0.1,                       # train.py: -lr_fr default 0.1
    "milestones_fr": (60, 70, 80, 90),  # train.py: -milestones_fr default [60, 70, 80, 90]
    "lr_factors_fr": (0.1, 0.01, 0.001, 0.0001),  # train.py: -gamma_fr default 0.1 at each milestone
    "momentum_fr": 0.9, "dampening": 0.9,  # helper.py: SGD(momentum=0.9, dampening=0.9, weight_decay=0)
    "p": 32, "k": 32,                   # -p 32 -k 32 (base PK batches: -batch_size_base 1024 = p*k)
    "batch_size_fr": 1024,              # -batch_size_fr 1024
    "samples_per_class": 600,           # helper.py: TensorAugDataset4.__len__ = 600 * classes
    "cos": 0.1,                         # -fr_cos 0.1
    "ir_intra": 1.0, "ir_inter": 1.0,   # -rkd_intra 1 -rkd_inter 1 (-rkd_split intraI_interI)
    "temperature": 16.0,                # train.py: -temperature default 16
    "hidden": 512,                      # myModules.FeatureRectify: Mlp hidden 512
    "k_nearest": 2,                     # train.py: -K default 2
}

#: The authors' ViT (``models/deit.py``, ``deit_my_small_patch*``): the ``paper`` recipe's backbone when none is named.
FR_PAPER_VIT: dict[str, int] = {"dim": 256, "depth": 12, "heads": 8}

#: The ``cpu`` recipe's budget (everything else as the script): seconds per session instead of minutes.
FR_CPU_BUDGET: dict[str, Any] = {"epochs_fr": 20, "p": 16, "k": 16, "batch_size_fr": 256, "samples_per_class": 100,
                                 "hidden": 128}


#: older name -> option: FR's own training fields were named like the recipe's until issue 38
#: (a stored config or a ``--method-opt epochs=...`` with the older name reads as the new one)
FR_OLDER_NAMES: dict[str, str] = {"epochs": "epochs_fr", "lr": "lr_fr", "momentum": "momentum_fr",
                                  "lr_milestones": "milestones_fr", "lr_factors": "lr_factors_fr",
                                  "batch_size": "batch_size_fr"}


def script_layers(script: str, depth: int) -> tuple[int, ...]:
    """The script's FR blocks for a ViT of ``depth`` blocks: as written for 12 blocks, else counted
    from the last block (``(8, 9, 10)`` -> ``(2, 3, 4)`` for 6 blocks); never below block 0."""
    shift = FR_SCRIPT_DEPTH - int(depth)
    return tuple(sorted({max(0, b - shift) for b in FR_SCRIPTS[script]["layers"]}))


def scaled_milestones(epochs: int) -> tuple[int, ...]:
    """The scripts' milestones (60/70/80/90 of 100 epochs) at the same fractions of ``epochs``."""
    base = FR_COMMON["milestones_fr"]
    return tuple(sorted({max(1, round(m * epochs / FR_COMMON["epochs_fr"])) for m in base}))


@dataclass(frozen=True, kw_only=True)
class NoOptions(Options):
    """A method without options of its own (``prototype``, ``finetune``)."""


@dataclass(frozen=True, kw_only=True)
class FROptions(Options):
    """Feature rectification (``fr``): the authors' run script of ``script``, at the ``recipe``'s budget."""

    script: Literal["cifar100", "mini_imagenet", "cub200"] = option(
        "mini_imagenet", help="the authors' run script whose values are the defaults (runs/cifar100.sh, "
                              "runs/miniImageNet.sh, runs/cub200.sh); default: the run's preset, else mini_imagenet")
    recipe: Literal["cpu", "paper"] = option(
        "cpu", help="paper: the script's budget (100 epochs, PK batches of 32x32, 1024 sampled features per "
                    "step, hidden 512); cpu: 20 epochs, 16x16 PK batches, 256 per step, hidden 128")
    depth: int = option(FR_SCRIPT_DEPTH, low=1, help="blocks of the ViT (set from the backbone; places the "
                                                      "script's layers, counted from the last block)")
    layers: tuple[int, ...] = option((8, 9, 10), low=0, help="0-based ViT blocks feeding an FR branch "
                                                             "(-output_blocks)")
    epochs_fr: int = option(100, low=1, help="FR-module epochs per session (-epochs_fr)")
    lr_fr: float = option(0.1, low=0, low_open=True, help="SGD lr of the FR modules (-lr_fr)")
    momentum_fr: float = option(0.9, low=0, high=1, help="SGD momentum of the FR modules")
    dampening: float = option(0.9, low=0, high=1, help="SGD dampening of the FR modules")
    milestones_fr: tuple[int, ...] = option((60, 70, 80, 90), low=1, help="epochs where the FR lr steps "
                                            "(-milestones_fr; default: 60/70/80/90 percent of epochs_fr)")
    lr_factors_fr: tuple[float, ...] = option((0.1, 0.01, 0.001, 0.0001), low=0, low_open=True,
                                              help="multiplier of lr_fr from each milestone on (-gamma_fr 0.1 each)")
    p: int = option(32, low=1, help="samples per class in a PK batch (-p)")
    k: int = option(32, low=1, help="classes in a PK batch (-k)")
    batch_size_fr: int = option(1024, low=1, help="sampled features per step in novel sessions (-batch_size_fr)")
    samples_per_class: int = option(600, low=1, help="sampled features per class and epoch in novel sessions")
    cos: float = option(0.1, low=0, help="weight of the cosine constraint (-fr_cos)")
    cr: float = option(0.1, low=0, help="weight of the class-centre relation (KL) loss (-fr_kl)")
    ir_intra: float = option(1.0, low=0, help="weight of same-class pairs in the IR loss (-rkd_intra)")
    ir_inter: float = option(1.0, low=0, help="weight of different-class pairs in the IR loss (-rkd_inter)")
    ce_novel: float = option(0.5, low=0, help="weight of the novel-class cross-entropy (-fr_ce_novel)")
    temperature: float = option(16.0, low=0, low_open=True, help="scale of the cosine logits (-temperature)")
    hidden: int = option(512, low=1, help="hidden width of M_F and M_I")
    k_nearest: int = option(2, low=1, help="base classes whose covariance a novel class borrows (-K)")
    eps: float = option(1e-6, low=0, help="added to covariance diagonals (-eps)")
    ensemble: Literal["logits", "softmax"] = option(
        "logits", help="average the branches' cosine logits (authors' code) or their softmaxes (paper text)")

    @classmethod
    def normalise_names(cls, values: Mapping[str, Any], *, prefix: str = "") -> dict[str, Any]:
        """As :meth:`Options.normalise_names`, with the :data:`FR_OLDER_NAMES` read as their options;
        an option given under both names with two values is refused, naming both."""
        older: dict[str, tuple[str, Any]] = {}
        rest: dict[Any, Any] = {}
        for raw, value in values.items():
            name = raw.strip().replace("-", "_") if isinstance(raw, str) else raw
            if name not in FR_OLDER_NAMES:
                rest[raw] = value
            elif FR_OLDER_NAMES[name] in older:
                raise InputError(f"{prefix}{name}: given twice ({older[FR_OLDER_NAMES[name]][0]!r} and {raw!r}); "
                                 "keep one")
            else:
                older[FR_OLDER_NAMES[name]] = (raw, value)
        out = super().normalise_names(rest, prefix=prefix)
        for new, (raw, value) in older.items():
            if new in out:
                now, before = cls._read(new, out[new], prefix), cls._read(new, value, prefix)
                if now != before:
                    raise InputError(f"{prefix}{new}: given as {new}={now} and under its older name {raw}={before}; "
                                     "keep one")
            out.setdefault(new, value)
        return out

    @classmethod
    def _read(cls, name: str, value: Any, prefix: str) -> Any:
        """``value`` as the option ``name`` reads it (JSON-able: a list for a tuple)."""
        try:
            return jsonable(cls.check_field(name, value))
        except InputError as exc:
            raise InputError(prefix + str(exc)) from None

    @classmethod
    def resolve(cls, given: dict[str, Any]) -> dict[str, Any]:
        script = given.get("script", "mini_imagenet")
        recipe = given.get("recipe", "cpu")
        if script not in FR_SCRIPTS or recipe not in ("cpu", "paper"):
            return given  # the field check names the bad value
        depth = given.get("depth", FR_SCRIPT_DEPTH)
        values: dict[str, Any] = {**FR_COMMON, **FR_SCRIPTS[script]}
        if isinstance(depth, int) and depth >= 1:
            values["layers"] = script_layers(script, depth)
        if recipe == "cpu":
            values.update(FR_CPU_BUDGET)
        values.update(given)
        epochs = values["epochs_fr"]
        if "milestones_fr" not in given and isinstance(epochs, int) and epochs >= 1:
            values["milestones_fr"] = scaled_milestones(epochs)
        if "lr_factors_fr" not in given:
            values["lr_factors_fr"] = tuple(float(f"{0.1 ** (i + 1):.12g}")
                                            for i in range(len(values["milestones_fr"])))
        return values

    def check(self) -> None:
        if not self.layers:
            raise InputError("layers: expected at least one block index, got []")
        if list(self.layers) != sorted(set(self.layers)):
            raise InputError(f"layers: expected distinct block indices in increasing order, got {list(self.layers)}")
        if self.layers[-1] >= self.depth - 1:
            raise InputError(f"layers: expected intermediate blocks 0..{self.depth - 2} of a {self.depth}-block ViT, "
                             f"got {list(self.layers)}")
        check_step_rule(self.milestones_fr, self.lr_factors_fr, names=("milestones_fr", "lr_factors_fr"))
        late = [m for m in self.milestones_fr if m > self.epochs_fr]  # at epochs_fr: never reached (a scaled default)
        if late:
            raise InputError(f"milestones_fr: expected epochs <= epochs_fr={self.epochs_fr}, got {late}")
