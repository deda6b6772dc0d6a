"""The long-tailed protocol's pipeline (docs/longtail.md): long-tailed training split -> train a
reference method -> predictions on the test pool -> sweep -> scores -> results-store record.

The split is drawn from a balanced training set (:func:`build_training_split`), or, with
``imbalance: listed``, the training part as it is listed (:func:`listed_training_split`: ImageNet-LT,
Places-LT, iNaturalist, whose lists are long-tailed already).

:func:`run` takes a :class:`~.config.LongtailConfig`. Files written by it (under
``work_dir``): ``split.json`` (the long-tailed training split),
``predictions.npz`` (logits on the test pool), ``sweep.json``. Re-scoring them needs no model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..._validation import check_value
from ...data import Dataset, load_dataset, load_predictions, seal, write_predictions, write_split
from ...data.predictions import Predictions, predictions_sha256
from ...errors import InputError
from ...metrics import longtail as M
from ...store import Record, ResultsStore
from .config import LongtailConfig
from .recipes import CIFAR_MEAN, CIFAR_STD, FROM_IMAGE_SIZE, LISTED, SMALLEST_CLASS, model_for_side
from .sweep import Sweep, build_sweep, read_sweep, score_sweep, validate_sweep, write_sweep  # noqa: F401 (re-export)

SPLIT_KIND = "longtail-train"
#: the share of each class's training images held out to select the checkpoint (``best_val``)
SELECTION_VAL_FRACTION = 0.1


def build_training_split(
    labels: np.ndarray,
    *,
    imbalance: float,
    n_max: int | None = None,
    kind: Literal["exp", "step"] = "exp",
    seed: int = 0,
    val_fraction: float = 0.0,
    dataset: str = "",
) -> dict[str, Any]:
    """Pick a long-tailed training subset of a balanced training set (class rank = class index).

    Parameters
    ----------
    labels : array of int, shape (N,)
        Labels of the full training set.
    imbalance : float
        rho >= 1 (values < 1 read as 1/rho).
    n_max : int, optional
        Count of the head class; default the smallest class's size.
    val_fraction : float
        Fraction of each class's selected samples held out for validation (floor, at most n-1).

    Returns
    -------
    dict (sealed split-file content): ``indices`` (training positions), ``val_indices``,
    ``counts`` (training samples per class, validation excluded) and the settings.
    """
    val_fraction = check_value(val_fraction, "val_fraction", low=0, high=1)
    if val_fraction >= 1:
        raise InputError(f"val_fraction: expected a fraction in [0, 1), got {val_fraction}")
    labels = np.asarray(labels, dtype=np.int64)
    C = int(labels.max()) + 1 if labels.size else 0
    if C == 0:
        raise InputError("labels: empty training set")
    sizes = np.bincount(labels, minlength=C)
    n_max = int(sizes.min()) if n_max is None else check_value(n_max, "n_max", type=int, low=0, low_open=True)
    counts = M.training_profile(C, n_max=n_max, imbalance=imbalance, kind=kind)
    short = np.flatnonzero(counts > sizes)
    if short.size:
        raise InputError(f"n_max={n_max}: classes {short[:10].tolist()} have only "
                         f"{sizes[short[:10]].tolist()} samples; lower n_max")
    rng = np.random.default_rng(check_value(seed, "seed", type=int, low=0))
    train, val, kept = [], [], []
    for c in range(C):
        pool = np.flatnonzero(labels == c)
        chosen = pool[rng.permutation(len(pool))[: counts[c]]]
        n_val = min(int(np.floor(val_fraction * len(chosen))), len(chosen) - 1)
        val.append(np.sort(chosen[:n_val]))
        train.append(np.sort(chosen[n_val:]))
        kept.append(len(chosen) - n_val)
    return seal({
        "kind": SPLIT_KIND, "version": 1, "dataset": dataset, "seed": int(seed),
        "imbalance": M.normalise_imbalance(imbalance), "profile": kind, "n_max": int(n_max),
        "val_fraction": float(val_fraction), "counts": [int(x) for x in kept],
        "indices": np.concatenate(train).tolist(), "val_indices": np.concatenate(val).tolist(),
    })


def listed_training_split(
    labels: np.ndarray,
    *,
    num_classes: int,
    seed: int = 0,
    val_fraction: float = 0.0,
    dataset: str = "",
) -> dict[str, Any]:
    """The whole training part as it is listed (``imbalance: listed``), as a split file's content.

    Parameters
    ----------
    labels : array of int, shape (N,)
        Labels of the listed training images.
    num_classes : int
        C (classes may be listed in the test part only: then they have no training image, an error).
    seed : int
        Seeds which images of a class are held out (``val_fraction`` > 0).
    val_fraction : float
        As in :func:`build_training_split` (floor per class, at most n-1).

    Returns
    -------
    dict (sealed): ``indices``, ``val_indices``, ``counts`` as :func:`build_training_split`'s, with
    ``profile`` "listed", ``imbalance`` = the list's own ρ = n_max / n_min, ``n_max`` and ``n_min``
    its largest and smallest class (before any hold-out).
    """
    val_fraction = check_value(val_fraction, "val_fraction", low=0, high=1)
    if val_fraction >= 1:
        raise InputError(f"val_fraction: expected a fraction in [0, 1), got {val_fraction}")
    labels = np.asarray(labels, dtype=np.int64)
    C = check_value(num_classes, "num_classes", type=int, low=1)
    sizes = np.bincount(labels, minlength=C)
    if np.any(sizes == 0):
        raise InputError(f"imbalance: listed trains on the list as it is, and classes {np.flatnonzero(sizes == 0)[:10].tolist()} "
                         f"have no training image in {dataset or 'the data'}'s training list")
    rng = np.random.default_rng(check_value(seed, "seed", type=int, low=0))
    train, val, kept = [], [], []
    for c in range(C):
        pool = np.flatnonzero(labels == c)
        n_val = min(int(np.floor(val_fraction * len(pool))), len(pool) - 1)
        held = np.sort(pool[rng.permutation(len(pool))[:n_val]]) if n_val else pool[:0]
        val.append(held)
        train.append(np.setdiff1d(pool, held, assume_unique=True))
        kept.append(len(pool) - n_val)
    n_max, n_min = int(sizes.max()), int(sizes.min())
    return seal({
        "kind": SPLIT_KIND, "version": 1, "dataset": dataset, "seed": int(seed),
        "imbalance": n_max / n_min, "profile": LISTED, "n_max": n_max, "n_min": n_min,
        "val_fraction": float(val_fraction), "counts": [int(x) for x in kept],
        "indices": np.concatenate(train).tolist(), "val_indices": np.concatenate(val).tolist(),
    })


def run(config: LongtailConfig, *, store: ResultsStore | None = None,
        work_dir: str | Path | None = None) -> list[Record]:
    """Build the split, train ``config.method``, predict the test pool, score the sweep.

    The test pool is the dataset's official test part. Returns the one record (``metrics`` holds the
    resampled scores, ``metrics["exact"]`` the noise-free ones; ``settings`` the resolved recipe),
    stored with its id when ``store`` is given. ``work_dir``: where ``split.json``,
    ``predictions.npz`` and ``sweep.json`` are written (by-products; nothing is read back).
    """
    if not isinstance(config, LongtailConfig):
        raise InputError(f"config: expected a LongtailConfig, got {type(config).__name__}")
    config.refuse_tracking()
    from ...learners.longtail import fit_predict  # torch only here

    c = config
    splits = load_dataset(c.data, what="data")
    if splits.test is None:
        raise InputError(f"data {c.data!r}: needs an official test part (a folder with train/ and test/)")
    held_out = SELECTION_VAL_FRACTION if c.select_checkpoint == "best_val" else 0.0
    if c.imbalance == LISTED:  # the list as it is: its own ratio, n_max and n_min
        split = listed_training_split(splits.train.labels, num_classes=splits.train.num_classes, seed=c.seed,
                                      dataset=c.data, val_fraction=held_out)
    else:
        n_max = None if c.n_max == SMALLEST_CLASS else c.n_max  # None: build_training_split reads the data
        split = build_training_split(splits.train.labels, imbalance=c.imbalance, n_max=n_max, seed=c.seed,
                                     dataset=c.data, val_fraction=held_out)
    train = splits.train.subset(np.asarray(split["indices"]))
    test: Dataset = splits.test
    selection = None
    if c.select_checkpoint == "best_val":
        val = splits.train.subset(np.asarray(split["val_indices"]))
        selection = (val.images, val.labels)
    elif c.select_checkpoint == "best_test":
        selection = (test.images, test.labels)
    if c.normalisation == "cifar" and train.images.shape[3] != len(CIFAR_MEAN):
        raise InputError(f"normalisation: 'cifar' has {len(CIFAR_MEAN)} channel constants, the data "
                         f"{c.data!r} has {train.images.shape[3]} channels; use normalisation dataset")
    side = min(train.images.shape[1:3])
    # the config chose both from the data's name; folder:/npz: data say from_image_size: the same rule here
    model = model_for_side(side) if c.model == FROM_IMAGE_SIZE else c.model
    augment = side >= 32 if c.augment == FROM_IMAGE_SIZE else bool(c.augment)
    result = fit_predict(c.method, train, test.images, recipe=c.to_recipe(model=model), seed=c.seed, augment=augment,
                         options=c.method_options, drop_last=c.drop_last, init=c.init,
                         normalisation=(CIFAR_MEAN, CIFAR_STD) if c.normalisation == "cifar" else None,
                         select_checkpoint=c.select_checkpoint, selection=selection)
    pred = Predictions(labels=test.labels, kind="logits", values=result.logits)
    # unset only with imbalance listed: the list's own ratio, as a drawn split's default is its ρ
    test_imbalance = split["imbalance"] if c.test_imbalance is None else c.test_imbalance
    sweep = build_sweep(test.labels, np.asarray(split["counts"]), test_imbalance=test_imbalance, points=c.points,
                        repeats=c.repeats, seed=c.seed)
    if work_dir is not None:
        out = Path(work_dir)
        write_split(out / "split.json", split)
        write_sweep(out / "sweep.json", sweep)
        write_predictions(out / "predictions.npz", pred)
    settings = {"imbalance": split["imbalance"], "profile": split["profile"], "n_max": split["n_max"],
                "train_counts": split["counts"], "test_imbalance": sweep["test_imbalance"],
                "points": c.points, "repeats": c.repeats, "epochs": c.epochs, "model": model,
                "batch_size": c.batch_size, "lr": c.lr, "device": c.device, "sweep_sha256": sweep["sha256"],
                "predictions_sha256": predictions_sha256(pred),
                "test_time_adaptation": result.test_time is not None,
                **result.settings, "recipe": c.recipe, "config": c.to_dict()}
    if "n_min" in split:  # imbalance listed: the list's smallest class beside its n_max and ρ
        settings["n_min"] = split["n_min"]
    set_preds = None
    if result.test_time is not None:  # test-time adaptation: each drawn set's images, never its labels
        set_preds = [[result.test_time(np.asarray(s, dtype=np.int64)).argmax(1) for s in pt["samples"]]
                     for pt in sweep["points"]]
    scores = score(pred, sweep, set_predictions=set_preds)
    if "checkpoint" in result.settings:  # the selected and the last epoch's accuracy side by side
        scores["checkpoint"] = result.settings["checkpoint"]
    record = to_record(scores, dataset=c.data, method=c.method,
                       seed=c.seed, split_hash=split["sha256"], settings=settings, tag=c.tag,
                       train={"seconds": result.seconds, "flops": result.flops})
    if store is not None:
        record = replace(record, id=store.add(record))
    return [record]


def score(
    predictions: Predictions | str | Path,
    reference: Sweep | Mapping[str, Any] | str | Path,
    *,
    exact: bool = False,
    convention: Literal["tade", "oltr"] = "tade",
    bootstrap: int = 0,
    seed: int = 0,
    set_predictions: list[list[np.ndarray]] | None = None,
) -> dict[str, Any]:
    """Score predictions (loaded, or an ``.npz`` path) against the ``reference`` sweep (a :class:`Sweep`,
    sweep-file content, or a file path). The sweep is checked once here (a :class:`Sweep`, as
    :func:`build_sweep` and :func:`read_sweep` return, already was) and scored as it is.

    ``set_predictions`` (a test-time method's predicted labels of every drawn set) is passed on to
    :func:`~.sweep.score_sweep`.

    Returns :func:`~vistabench.metrics.longtail.sweep_scores`'s result (resampled V_t, or exact with
    ``exact=True``) plus ``exact``: the noise-free scalars, points and test-agnostic accuracies.
    """
    pred = predictions if isinstance(predictions, Predictions) else load_predictions(predictions)
    sw = validate_sweep(reference) if isinstance(reference, Mapping) else read_sweep(reference)
    result = score_sweep(pred, sw, exact=exact, convention=convention, bootstrap=bootstrap, seed=seed,
                         set_predictions=set_predictions)
    noise_free = result if exact else score_sweep(pred, sw, exact=True, convention=convention,
                                                  set_predictions=set_predictions)
    result["exact"] = {k: v for k, v in noise_free.items() if k not in ("per_class", "settings", "mode", "ci")}
    return result


def to_record(
    result: dict[str, Any], *, dataset: str, method: str, seed: int | None, split_hash: str | None,
    settings: dict[str, Any], tag: str | None = None, train: dict[str, Any] | None = None,
) -> Record:
    """The results-store record of a scored sweep (the same shape from ``score`` and ``run``).

    ``train`` holds the training cost (``seconds``, ``flops``) when vistabench trained the model;
    a scored file has none (null).
    """
    metrics = dict(result)
    metrics["train_seconds"] = None if train is None else train["seconds"]
    metrics["train_flops"] = None if train is None else train["flops"]
    return Record(protocol="longtail", dataset=dataset, method=method, seed=seed,
                  split_hash=split_hash, settings=settings, metrics=metrics, tag=tag)
