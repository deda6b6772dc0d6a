"""The small-data benchmark's dataset presets (Brigato et al., §V): per dataset its sizes, models,
augmentation and search settings, under the benchmark's rules (``gem``) or ours (``vistabench``).

Kept apart from the loaders (:mod:`.smalldata`): building the command line and printing a config read
the presets, and must not import numpy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from .._validation import check_value
from ..registry import Registry
from .augment import NO_AUGMENTATION, PAD_CROP_FLIP, Augmentation

__all__ = ["SmallDataPreset", "presets", "get_preset", "RECIPES", "vistabench_recipe",
           "CIFAR10_CLASSES", "ISIC2018_CLASSES", "EUROSAT_CLASSES", "EUROSAT_BANDS", "CLAMM_CLASSES"]

CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
ISIC2018_CLASSES = ["MEL", "NV", "BCC", "AKIEC", "BKL", "DF", "VASC"]
EUROSAT_CLASSES = ["AnnualCrop", "Forest", "HerbaceousVegetation", "Highway", "Industrial", "Pasture",
                   "PermanentCrop", "Residential", "River", "SeaLake"]
EUROSAT_BANDS = 13
CLAMM_CLASSES = ["Caroline", "Cursiva", "Half_uncial", "Humanistic", "Humanistic_Cursive", "Hybrida",
                 "Praegothica", "Semihybrida", "Semitextualis", "Southern_Textualis", "Textualis", "Uncial"]


@dataclass(frozen=True)
class SmallDataPreset:
    """Protocol settings for one dataset: data, split sizes, augmentation, search budget and rules.

    Defaults reproduce gem, the benchmark's public code (``docs/smalldata.md`` gives each value's
    source); :func:`get_preset` with ``recipe="vistabench"`` gives our earlier choices.

    Split sizes: ``per_class`` images per class form each ``trainval{i}`` (None: all training
    images, as for CUB, whose ``trainval`` is then the same for every split and only train/val
    vary); ``train_per_class`` of them go to ``train{i}`` and the rest to ``val{i}`` (gem's files:
    30/20, CUB 20/≤10, ISIC 50/30); with ``train_per_class=None`` val gets ``val_fraction`` of
    each class instead. ``test`` is ``"official"`` (the dataset's test part) or ``"own"``
    (``test{i}`` drawn from the rest of the pool, at most ``test_per_class`` per class).

    Training: ``recipe_changes`` are the data set's changes to the training recipe, by recipe field
    (:data:`~vistabench.learners.recipe.RECIPE`): its ``model`` and its ``epochs`` (the search's budget
    per trial and the final runs'); a run's config takes each one it leaves unset and checks it by the
    recipe's declaration there (this module sits below the recipe and holds plain values).
    ``quick_model`` is a lighter backbone for the data set.

    Search: ``trials``/``grace_period`` are the HPO budget (with the epochs), ``batch_sizes`` the
    searched batch sizes; ``reduction_factor`` (ASHA η), ``sampler``, ``score_window`` (the score
    is the mean of the last k validation values), ``select`` (best among "all" trials or
    "complete" ones) and ``val_metric`` ("accuracy" or "balanced_accuracy" on val) are the rules.
    ``augmentation`` is applied to training batches (tuning and final runs). ``stem`` is the ResNet
    stem: ``"imagenet"`` (7x7/2 conv + max-pool), ``"small"`` (3x3/1) or ``"auto"`` (small at <= 64 px);
    gem's ResNets keep the ImageNet stem on 64 px EuroSAT. ``native_size``: the side length of a
    dataset whose images always keep their own size (``image_size`` does not resize them), so a
    config knows the size the model is built for (and the stem ``auto`` picks) before loading it.

    ``folder_reader``: ``"module:function"`` reading the dataset's folder, ``fn(root, image_size=...)``
    (``fn(root)`` for a dataset with a ``native_size``) -> :class:`~vistabench.data.dataset.DataSplits`;
    None for a bundled dataset (read by :mod:`vistabench.data.readers`). It is not the recipe's
    ``loader`` (where a run's batches come from: memory, stream, device). ``as_data_reader``: the
    folder reader is also registered as a data reader under the preset's name (``--data cifair10:DIR``
    in every protocol). The preset is the data set's one entry: its name, reader and protocol settings.
    """

    name: str
    description: str
    per_class: int | None
    test: Literal["official", "own"]
    batch_sizes: tuple[int, ...]
    trials: int
    grace_period: int
    quick_model: str
    recipe_changes: dict[str, Any]
    image_size: int | None = None
    test_per_class: int | None = None
    needs_root: bool = True
    train_per_class: int | None = 30
    val_fraction: float | None = None
    augmentation: Augmentation = NO_AUGMENTATION
    reduction_factor: int = 2
    sampler: Literal["random", "tpe"] = "random"
    score_window: int = 5
    select: Literal["all", "complete"] = "all"
    val_metric: Literal["accuracy", "balanced_accuracy"] = "accuracy"
    num_splits: int = 3
    recipe: str = "gem"
    stem: str = "auto"
    native_size: int | None = None
    folder_reader: str | None = None
    as_data_reader: bool = True

    def to_dict(self) -> dict[str, Any]:
        """The protocol settings (stored with each search; the data set's folder reader is not a setting), the
        recipe's changes flat among them, in :data:`STORED_ORDER` (the layout they have always had)."""
        d = {**asdict(self), **self.recipe_changes, "batch_sizes": list(self.batch_sizes)}
        return {name: d[name] for name in STORED_ORDER}

    def split_sizes(self, *, per_class: int | None = None, train_per_class: int | None = None,
                    val_fraction: float | None = None) -> dict[str, Any]:
        """``{"per_class", "train_per_class", "val_fraction"}`` for the split builder.

        Overrides win; a ``per_class`` override alone keeps the preset's train share
        (``round(per_class · train_per_class / preset per_class)``, e.g. 20 → 12/8 for 30/20).
        """
        pc = per_class if per_class is not None else self.per_class
        if val_fraction is not None:
            return {"per_class": pc, "train_per_class": None, "val_fraction": val_fraction}
        if train_per_class is not None:
            return {"per_class": pc, "train_per_class": train_per_class, "val_fraction": None}
        if self.train_per_class is None:
            return {"per_class": pc, "train_per_class": None,
                    "val_fraction": self.val_fraction if self.val_fraction is not None else 0.4}
        tpc = self.train_per_class
        if per_class is not None and self.per_class is not None:
            tpc = max(1, int(math.floor(per_class * self.train_per_class / self.per_class + 0.5)))
        return {"per_class": pc, "train_per_class": tpc, "val_fraction": None}


#: the keys of :meth:`SmallDataPreset.to_dict`, in the order they have always had (`smalldata list` prints them so)
STORED_ORDER = ("name", "description", "per_class", "test", "batch_sizes", "epochs", "trials", "grace_period", "model",
                "quick_model", "image_size", "test_per_class", "needs_root", "train_per_class", "val_fraction",
                "augmentation", "reduction_factor", "sampler", "score_window", "select", "val_metric", "num_splits",
                "recipe", "stem")

#: data set name -> its :class:`SmallDataPreset`, the data set's one entry: its folder reader
#: (``fn(root, image_size=...) -> DataSplits``, ``fn(root)`` at a ``native_size``; None: bundled) and its settings
presets: Registry[SmallDataPreset] = Registry("small-data dataset")


def _preset(p: SmallDataPreset) -> SmallDataPreset:
    presets.register(p.name)(p)
    return p


_L = "vistabench.data.smalldata:"
# gem's bash_scripts/bench_*.sh and split files (train{i}/val{i}.txt per-class counts)
_preset(SmallDataPreset("cifair10", "CIFAR-10 training pool + ciFAIR-10 test (32x32 RGB)", 50, "official",
                        (10, 25, 50), 250, 50, "resnet18", recipe_changes={"model": "wrn16_8", "epochs": 500},
                        augmentation=Augmentation(crop="shift", shift=4, hflip=True), native_size=32,
                        folder_reader=_L + "read_cifair10"))
_preset(SmallDataPreset("cub200", "CUB-200-2011 birds, all ~30 training images per class (RGB)", None,
                        "official", (8, 16, 32), 100, 10, "resnet18",
                        recipe_changes={"model": "resnet50", "epochs": 200}, image_size=224, train_per_class=20,
                        augmentation=Augmentation(crop="resized", min_scale=0.4, hflip=True),
                        folder_reader=_L + "read_cub200"))
_preset(SmallDataPreset("isic2018", "ISIC 2018 task 3 skin lesions, 7 classes (RGB)", 80, "own",
                        (8, 16, 32), 100, 25, "resnet18", recipe_changes={"model": "resnet50", "epochs": 500},
                        image_size=224, test_per_class=400, train_per_class=50,
                        augmentation=Augmentation(crop="resized", min_scale=0.4, hflip=True, vflip=True),
                        folder_reader=_L + "read_isic2018"))
_preset(SmallDataPreset("eurosat", "EuroSAT Sentinel-2, 13 spectral bands (64x64)", 50, "own",
                        (10, 25, 50), 250, 25, "resnet18", recipe_changes={"model": "resnet50", "epochs": 500},
                        test_per_class=1950,
                        augmentation=Augmentation(crop="shift", shift=8, hflip=True, vflip=True), stem="imagenet",
                        native_size=64, folder_reader=_L + "read_eurosat"))
_preset(SmallDataPreset("clamm", "CLaMM 2016 Latin script styles, 12 classes (grayscale)", 50, "official",
                        (8, 16, 32), 100, 25, "resnet18", recipe_changes={"model": "resnet50", "epochs": 500},
                        image_size=224, augmentation=Augmentation(crop="resized", min_scale=0.2),
                        folder_reader=_L + "read_clamm"))
# the demo datasets follow the same rules; digits are not flip- or crop-invariant: no augmentation
_preset(SmallDataPreset("mnist5k", "bundled MNIST-5k (28x28 grayscale)", 50, "official",
                        (10, 25, 50), 20, 3, "cnn28", recipe_changes={"model": "cnn28", "epochs": 30}, needs_root=False,
                        native_size=28))
_preset(SmallDataPreset("digits", "bundled sklearn digits (8x8 grayscale)", 50, "official",
                        (10, 25, 50), 20, 3, "cnn28", recipe_changes={"model": "cnn28", "epochs": 30}, needs_root=False,
                        native_size=8))
_preset(SmallDataPreset("folder", "your images: ROOT/<class>/* or ROOT/train/<class>/* + ROOT/test/<class>/*",
                        50, "official", (8, 16, 32), 50, 10, "resnet18", recipe_changes={"model": "resnet18", "epochs": 100},
                        image_size=64,
                        augmentation=Augmentation(crop="shift", shift=4, hflip=True),
                        folder_reader=_L + "read_folder_dataset", as_data_reader=False))  # readers has its own "folder"

RECIPES = ("gem", "vistabench")


def vistabench_recipe(p: SmallDataPreset) -> SmallDataPreset:
    """vistabench's earlier protocol on the same dataset: a 60/40 train/val fraction of trainval,
    zero-pad-4 crop + horizontal flip wherever gem augments, ASHA η = 3, TPE, last-epoch balanced
    accuracy, best among completed trials."""
    return replace(p, train_per_class=None, val_fraction=0.4,
                   augmentation=PAD_CROP_FLIP if p.augmentation.active else NO_AUGMENTATION,
                   reduction_factor=3, sampler="tpe", score_window=1, select="complete",
                   val_metric="balanced_accuracy", recipe="vistabench", stem="auto")


def get_preset(name: str, *, recipe: str = "gem") -> SmallDataPreset:
    """The preset called ``name`` (unknown names raise with suggestions) under ``recipe``:
    ``"gem"`` (the benchmark's code, default) or ``"vistabench"`` (:func:`vistabench_recipe`)."""
    p = presets.get(name)
    if check_value(recipe, "recipe", choices=RECIPES) == "vistabench":
        return vistabench_recipe(p)
    return p
