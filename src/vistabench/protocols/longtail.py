"""The long-tailed protocol's pipeline (docs/longtail.md): long-tailed training split -> train a
reference method -> predictions on the test pool -> sweep -> scores -> results-store record.

Files written by :func:`run` (under ``out_dir``): ``split.json`` (the long-tailed training split),
``predictions.npz`` (logits on the test pool), ``sweep.json``. Re-scoring them needs no model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np

from .._validation import check_fraction, check_positive
from ..data import Dataset, load_dataset, load_predictions, seal, save_predictions, write_split
from ..data.predictions import Predictions
from ..errors import InputError
from ..metrics import longtail as M
from ..store import Record, ResultsStore
from .longtail_sweep import build_sweep, read_sweep, score_sweep, write_sweep  # noqa: F401 (re-export)

SPLIT_KIND = "longtail-train"


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
    val_fraction = check_fraction(val_fraction, "val_fraction")
    if val_fraction >= 1:
        raise InputError(f"val_fraction: expected a fraction in [0, 1), got {val_fraction}")
    labels = np.asarray(labels, dtype=np.int64)
    C = int(labels.max()) + 1 if labels.size else 0
    if C == 0:
        raise InputError("labels: empty training set")
    sizes = np.bincount(labels, minlength=C)
    n_max = int(sizes.min()) if n_max is None else check_positive(n_max, "n_max", integer=True)
    counts = M.training_profile(C, n_max=n_max, imbalance=imbalance, kind=kind)
    short = np.flatnonzero(counts > sizes)
    if short.size:
        raise InputError(f"n_max={n_max}: classes {short[:10].tolist()} have only "
                         f"{sizes[short[:10]].tolist()} samples; lower --n-max")
    rng = np.random.default_rng(check_positive(seed, "seed", strict=False, integer=True))
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


def run(
    *,
    data: str | Any,
    method: str,
    imbalance: float,
    epochs: int = 10,
    seed: int = 0,
    device: str = "cpu",
    model: str = "auto",
    n_max: int | None = None,
    test_imbalance: float | None = None,
    points: int = 10,
    repeats: int = 5,
    batch_size: int = 128,
    lr: float = 0.05,
    augment: bool | None = None,
    out_dir: str | Path | None = None,
    store: ResultsStore | None = None,
    tag: str | None = None,
) -> dict[str, Any]:
    """Build the split, train ``method``, predict the test pool, score the sweep, store the record.

    ``data`` is a dataset spec (``mnist5k``, ``digits``, ``cifar10:DIR``, ...) or loaded
    :class:`~vistabench.data.DataSplits`. The test pool is the dataset's official test part.
    Returns the stored record as a dict (``metrics`` holds the resampled scores, ``metrics["exact"]``
    the noise-free ones).
    """
    from ..learners.longtail import fit_predict  # torch only here

    splits = load_dataset(data) if isinstance(data, str) else data
    name = data if isinstance(data, str) else splits.train.name
    if splits.test is None:
        raise InputError(f"--data {name!r}: needs an official test part (a folder with train/ and test/)")
    split = build_training_split(splits.train.labels, imbalance=imbalance, n_max=n_max, seed=seed,
                                 dataset=name)
    train = splits.train.subset(np.asarray(split["indices"]))
    test: Dataset = splits.test
    natural32 = min(train.images.shape[1:3]) >= 32
    if model == "auto":  # the LT papers' ResNet-32 for 32 px images, a small CNN below
        model = "resnet32" if natural32 else "cnn28"
    if augment is None:  # the CIFAR recipe: random crop + flip for 32 px images
        augment = natural32
    result = fit_predict(method, train, test.images, model=model, epochs=epochs, seed=seed,
                         device=device, batch_size=batch_size, lr=lr, augment=augment)
    pred = Predictions(labels=test.labels, kind="logits", values=result.logits)
    t_imb = split["imbalance"] if test_imbalance is None else test_imbalance
    sweep = build_sweep(test.labels, np.asarray(split["counts"]), test_imbalance=t_imb, points=points,
                        repeats=repeats, seed=seed)
    if out_dir is not None:
        out = Path(out_dir)
        write_split(out / "split.json", split)
        write_sweep(out / "sweep.json", sweep)
        save_predictions(out / "predictions.npz", labels=test.labels, logits=result.logits)
    settings = {"imbalance": split["imbalance"], "profile": split["profile"], "n_max": split["n_max"],
                "train_counts": split["counts"], "test_imbalance": sweep["test_imbalance"],
                "points": points, "repeats": repeats, "epochs": epochs, "model": model,
                "batch_size": batch_size, "lr": lr, "device": device, "sweep_sha256": sweep["sha256"],
                "test_time_adaptation": result.test_time is not None,
                **result.settings}
    set_preds = None
    if result.test_time is not None:  # test-time adaptation: each drawn set's images, never its labels
        set_preds = [[result.test_time(np.asarray(s, dtype=np.int64)).argmax(1) for s in pt["samples"]]
                     for pt in sweep["points"]]
    record = to_record(score(pred, sweep, set_predictions=set_preds), dataset=name, method=method, seed=seed, split_hash=split["sha256"],
                       settings=settings, tag=tag, train={"seconds": result.seconds, "flops": result.flops})
    if store is not None:
        store.add(record)
    return record.to_dict()


def score(
    predictions: Predictions | str | Path,
    sweep: dict[str, Any] | str | Path,
    *,
    exact: bool = False,
    convention: Literal["tade", "oltr"] = "tade",
    bootstrap: int = 0,
    seed: int = 0,
    set_predictions: list[list[np.ndarray]] | None = None,
) -> dict[str, Any]:
    """Score predictions (loaded, or an ``.npz`` path) against a sweep (content, or a file path).

    ``set_predictions`` (a test-time method's predicted labels of every drawn set) is passed on to
    :func:`~.longtail_sweep.score_sweep`.

    Returns :func:`~vistabench.metrics.longtail.sweep_scores`'s result (resampled V_t, or exact with
    ``exact=True``) plus ``exact``: the noise-free scalars, points and test-agnostic accuracies.
    """
    pred = predictions if isinstance(predictions, Predictions) else load_predictions(predictions)
    sw = sweep if isinstance(sweep, dict) else read_sweep(sweep)
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
