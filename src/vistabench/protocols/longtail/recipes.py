"""Named training recipes of the long-tailed protocol (presets of :class:`~.config.LongtailConfig`).

``cpu``: today's CPU-sized recipe (SGD lr 0.05, momentum 0.9, weight decay 5e-4, batch 128, 10
epochs, one cosine per step, no warm-up) for every method; the default on the bundled data.

``reference``: each method's authors' CIFAR-LT training, read from their public code (the
repository and file are in :data:`REFERENCE_SOURCES` and docs/fidelity.md); the default when the
data is ``cifar10:`` or ``cifar100:``. Milestones are 0-based epochs from which the lr is
``lr × factor``; the warm-up is per epoch, ``lr · (warmup_start + (1 − warmup_start)·(e+1)/W)``
for 0-based epoch e < W (``warmup_start`` 0: LDAM-DRW's ``lr·epoch/5``; 1/3: the
``WarmupMultiStepLR`` of BBN and the TDE/LADE code, whose scheduler steps before each 1-based
epoch, hence milestones 119/159 for their ``[120, 160]``). Inputs are standardised with the
references' fixed CIFAR mean/std (``normalisation: cifar``) and convolutions and linear layers start
from Kaiming-normal fan-in weights (``init: fan_in``, their ``_weights_init``); the cpu recipe
measures the mean/std on the run's training images (``dataset``) and keeps the models' own
initialisation (``fan_out``: Kaiming fan-out convolutions, PyTorch's default linear layers).
``drop_last``: BBN's ``DataLoader(drop_last=True)``; the TDE/LADE code stops an epoch after
``int(N / batch)`` steps, which is the same.

Torch-free.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RECIPES", "recipe_fields", "REFERENCE_SOURCES", "dataset_kind", "CIFAR_MEAN", "CIFAR_STD",
           "FROM_IMAGE_SIZE", "SMALLEST_CLASS", "image_side", "model_for_side", "derived_fields"]

#: The fixed per-channel mean/std every CIFAR-LT reference normalises with (CIFAR-10's statistics,
#: also on CIFAR-100: LDAM-DRW, IB-Loss, GCL, BBN ``lib/dataset/imbalance_cifar.py``, TDE and LADE
#: ``data/ImbalanceCIFAR.py``).
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2023, 0.1994, 0.2010)

RECIPES = ("cpu", "reference")

CPU: dict[str, Any] = {"epochs": 10, "batch_size": 128, "lr": 0.05, "optimizer": "sgd", "momentum": 0.9,
                       "nesterov": False, "weight_decay": 5e-4, "warmup_epochs": 0, "warmup_start": 0.0,
                       "schedule": "cosine", "lr_milestones": (), "lr_factors": (), "normalisation": "dataset",
                       "init": "fan_out", "drop_last": False}

# LDAM-DRW cifar_train.py (also the recipe of the CE, focal, balanced softmax, logit adjustment and
# cRT-stage-1 runs of the long-tail CIFAR literature that build on it).
_LDAM = {"epochs": 200, "batch_size": 128, "lr": 0.1, "optimizer": "sgd", "momentum": 0.9, "nesterov": False,
         "weight_decay": 2e-4, "warmup_epochs": 5, "warmup_start": 0.0, "schedule": "step",
         "lr_milestones": (160, 180), "lr_factors": (0.01, 0.0001), "normalisation": "cifar", "init": "fan_in",
         "drop_last": False}
# BBN configs/cifar*.yaml and the TDE/LADE CIFAR configs: WarmupMultiStepLR (from 1/3) stepped first.
_BBN_STYLE = {"warmup_epochs": 5, "warmup_start": 1.0 / 3.0, "schedule": "step", "lr_milestones": (119, 159),
              "lr_factors": (0.01, 0.0001)}

_REFERENCE: dict[str, dict[str, Any]] = {
    "ce": _LDAM, "focal": _LDAM, "ldam_drw": _LDAM, "balanced_softmax": _LDAM, "logit_adjust": _LDAM,
    "crt": _LDAM,
    "ib": {**_LDAM, "lr_milestones": (100, 160, 180), "lr_factors": (0.01, 1e-4, 1e-6)},
    "ride": {**_LDAM, "weight_decay": 5e-4, "nesterov": True},
    "tade": {**_LDAM, "weight_decay": 5e-4, "nesterov": True, "lr_factors": (0.1, 0.01)},
    # BBN lib/utils/utils.py (SGD nesterov=True), main/train.py (DataLoader drop_last=True)
    "bbn": {**_LDAM, **_BBN_STYLE, "nesterov": True, "drop_last": True},
    # run_networks.py of the TDE / LADE code: an epoch ends after int(N / batch_size) steps
    "tde": {**_LDAM, **_BBN_STYLE, "batch_size": 256, "lr": 0.2, "weight_decay": 5e-4, "model": "resnet32_bbn",
            "drop_last": True},
    "lade": {**_LDAM, **_BBN_STYLE, "batch_size": 256, "lr": 0.2, "weight_decay": 5e-4, "model": "resnet32_bbn",
             "drop_last": True},
    "gcl": {**_LDAM, "batch_size": 64, "lr_factors": (0.1, 0.01)},
}

#: method -> (repository, file) of its reference recipe.
REFERENCE_SOURCES: dict[str, tuple[str, str]] = {
    "ce": ("kaidic/LDAM-DRW", "cifar_train.py"), "focal": ("kaidic/LDAM-DRW", "cifar_train.py"),
    "ldam_drw": ("kaidic/LDAM-DRW", "cifar_train.py"),
    "balanced_softmax": ("kaidic/LDAM-DRW", "cifar_train.py (common CIFAR-LT recipe)"),
    "logit_adjust": ("kaidic/LDAM-DRW", "cifar_train.py (common CIFAR-LT recipe)"),
    "crt": ("facebookresearch/classifier-balancing", "config/ImageNet_LT/cls_crt.yaml (stage 2)"),
    "ib": ("pseulki/IB-Loss", "cifar_train.py"),
    "ride": ("frank-xwang/RIDE-LongTailRecognition", "configs/config_imbalance_cifar100_ride.json"),
    "tade": ("Vanint/SADE-AgnosticLT", "configs/config_cifar100_ir100_sade.json"),
    "bbn": ("megvii-research/BBN", "configs/cifar100.yaml"),
    "tde": ("KaihuaTang/Long-Tailed-Recognition.pytorch", "classification/config/CIFAR*_LT/causal_norm_32.yaml"),
    "lade": ("hyperconnect/LADE", "config/CIFAR100_LT/lade.yaml"),
    "gcl": ("Keke921/GCLLoss", "cifar_train_backbone.py, cifar_train_classifier.py"),
}


def dataset_kind(data: str) -> str:
    """``"cifar10"``, ``"cifar100"`` or ``"other"`` from a dataset spec (no file is read)."""
    head = str(data).split(":", 1)[0].strip().lower()
    return head if head in ("cifar10", "cifar100") else "other"


def recipe_fields(recipe: str, method: str, data: str | None = None) -> dict[str, Any]:
    """The config fields that ``recipe`` sets for ``method`` (a method without a reference entry
    gets the common CIFAR-LT recipe of LDAM-DRW). The fixed CIFAR normalisation only on CIFAR
    ``data`` (other data keep ``dataset``: the constants are CIFAR's)."""
    if recipe == "reference":
        out = dict(_REFERENCE.get(method, _LDAM))
        if data is not None and dataset_kind(data) == "other":
            out["normalisation"] = "dataset"
        return out
    return dict(CPU)


#: The named value of ``model`` / ``augment`` when the image size is known only from the data's content
#: (``folder:``, ``npz:``): the run applies the >= 32 px rule to the images it loads.
FROM_IMAGE_SIZE = "from_image_size"
#: The named value of ``n_max`` by default: the smallest training class's size, read from the data.
SMALLEST_CLASS = "smallest_class"
#: The named value of ``imbalance`` that trains on the listed training images as they are (no drawn split).
LISTED = "listed"

#: Image side (pixels) of the data sets whose name fixes it.
_SIDES = {"digits": 8, "mnist5k": 28, "cifar10": 32, "cifar100": 32}


def image_side(data: str) -> int | None:
    """The image side of ``data`` known from its name (None: only its files know it)."""
    return _SIDES.get(str(data).split(":", 1)[0].strip().lower())


def model_for_side(side: int) -> str:
    """The LT papers' ResNet-32 for >= 32 px images, a small CNN below."""
    return "resnet32" if side >= 32 else "cnn28"


def derived_fields(data: str, imbalance: Any) -> dict[str, Any]:
    """The values the data's name and the imbalance give the fields left unset (``model`` before a
    recipe's, ``augment``: random crop + flip for >= 32 px images, ``n_max``, ``test_imbalance``: the
    training imbalance as ρ >= 1). The one place these defaults are chosen; the run reads the config."""
    side = image_side(data)
    out: dict[str, Any] = {"model": FROM_IMAGE_SIZE if side is None else model_for_side(side),
                           "augment": FROM_IMAGE_SIZE if side is None else side >= 32,
                           "n_max": SMALLEST_CLASS}
    if isinstance(imbalance, (int, float)) and not isinstance(imbalance, bool) and imbalance > 0:
        rho = float(imbalance)
        out["test_imbalance"] = 1.0 / rho if rho < 1 else rho
    return out
