"""Small-data split files: seeded, stratified, hashed.

For split i = 0..2 the builder draws ``per_class`` images of every class from the training pool
(``trainval{i}``), then divides each class's draw into train and val (the rest): either a fixed
``train_per_class`` images (gem's split files: 30 train / 20 val for ciFAIR-10, EuroSAT and CLaMM,
20 / ≤10 for CUB, 50 / 30 for ISIC) or ``round((1 − val_fraction)·n_c)`` images. Datasets without an
official test set also get ``test{i}``: up to
``test_per_class`` images per class from the pool images that are not in ``trainval{i}``.
Each split i has its own random stream ``default_rng([seed, i])``, so the three sub-samples are
independent draws (they may share images), and the same seed writes byte-identical files anywhere.

A split file (``write_split`` format) holds ``kind="smalldata-split"``, ``dataset``, ``part``
(train/val/trainval/test), ``split`` (i), ``seed``, ``per_class``, ``train_per_class``,
``val_fraction`` (the one not used is null),
``class_names``, ``class_counts``, ``pool_size``, ``pool_labels_sha256`` and the sorted
``indices``: positions in the dataset's training pool (``DataSplits.train``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import check_labels, check_value
from ..errors import InputError
from .dataset import DataSplits, Dataset
from .smalldata import SmallDataPreset, labels_fingerprint
from .splits import read_split, write_split

__all__ = ["SmallDataSplit", "build_splits", "write_splits", "write_preset_splits", "read_splits", "SPLIT_KIND"]

SPLIT_KIND = "smalldata-split"
PARTS = ("trainval", "train", "val", "test")


@dataclass
class SmallDataSplit:
    """One split i: index arrays into the training pool (``test`` None when the test set is official)."""

    index: int
    trainval: np.ndarray
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray | None
    hashes: dict[str, str]

    @property
    def split_hash(self) -> str:
        """The trainval file's sha256 (what a result record cites)."""
        return self.hashes.get("trainval", "")


def _counts(labels: np.ndarray, idx: np.ndarray, c: int) -> list[int]:
    return np.bincount(labels[idx], minlength=c).astype(int).tolist()


def build_splits(
    labels: Any,
    *,
    num_classes: int,
    per_class: int | None,
    seed: int,
    val_fraction: float | None = 0.4,
    train_per_class: int | None = None,
    num_splits: int = 3,
    own_test: bool = False,
    test_per_class: int | None = None,
    class_names: list[str] | None = None,
) -> list[dict[str, dict[str, Any]]]:
    """Draw the split contents (not yet sealed) for ``num_splits`` sub-samples.

    Parameters
    ----------
    labels : array-like of int, shape (N,)
        Labels of the training pool.
    num_classes : int
        Declared number of classes C; every class must have at least ``per_class`` images.
    per_class : int or None
        Images per class in trainval; None keeps every pool image (CUB), so only train/val vary.
    seed : int
    val_fraction : float in (0, 1)
        Share of each class's trainval images that go to val (vistabench recipe: 40%); ignored
        when ``train_per_class`` is given.
    train_per_class : int, optional
        Train images per class; the rest of each class's trainval images go to val (gem).
    own_test : bool
        Also draw ``test{i}`` from the images outside ``trainval{i}``.
    test_per_class : int, optional
        Cap on test images per class (None: all remaining).

    Returns
    -------
    list (length ``num_splits``) of dict part -> split-file content
    """
    y = check_labels(labels, "labels", num_classes=num_classes)
    seed = int(check_value(seed, "seed", type=int, low=0))
    vf: float | None = None
    if train_per_class is not None:
        train_per_class = int(check_value(train_per_class, "train_per_class", type=int, low=0, low_open=True))
    else:
        if val_fraction is None:
            raise InputError("val_fraction: expected a fraction when train_per_class is not given, got None")
        vf = check_value(val_fraction, "val_fraction", low=0, high=1)
        if not 0 < vf < 1:
            raise InputError(f"val_fraction: expected a fraction strictly between 0 and 1, got {val_fraction!r}")
    num_splits = int(check_value(num_splits, "num_splits", type=int, low=0, low_open=True))
    names = class_names or [str(i) for i in range(num_classes)]
    counts = np.bincount(y, minlength=num_classes)
    if per_class is not None:
        per_class = int(check_value(per_class, "per_class", type=int, low=0, low_open=True))
    _check_class_counts(counts, names, per_class=per_class, train_per_class=train_per_class, own_test=own_test)
    if test_per_class is not None:
        test_per_class = int(check_value(test_per_class, "test_per_class", type=int, low=0, low_open=True))
    by_class = [np.flatnonzero(y == c) for c in range(num_classes)]
    common = {"kind": SPLIT_KIND, "version": 1, "seed": seed, "per_class": per_class,
              "train_per_class": train_per_class, "val_fraction": vf,
              "num_classes": num_classes, "class_names": list(names), "pool_size": int(len(y)),
              "pool_labels_sha256": labels_fingerprint(y)}
    out = []
    for i in range(num_splits):
        parts = _draw_split(np.random.default_rng([seed, i]), by_class, per_class=per_class,
                            train_per_class=train_per_class, val_fraction=vf, own_test=own_test,
                            test_per_class=test_per_class)
        split = {}
        for part, chunks in parts.items():
            idx = np.sort(np.concatenate(chunks)).astype(np.int64)
            split[part] = dict(common, dataset="", part=part, split=i, indices=idx.tolist(),
                               class_counts=_counts(y, idx, num_classes))
        out.append(split)
    return out


def _check_class_counts(counts: np.ndarray, names: list[str], *, per_class: int | None, train_per_class: int | None,
                        own_test: bool) -> None:
    """InputError unless every class (``counts`` (C,) pool images per class) has the images each part
    needs: ``per_class`` for trainval (and one more for test), one train and one val image, and with
    ``train_per_class`` at least one val image."""
    if per_class is not None:
        short = np.flatnonzero(counts < per_class)
        if short.size:
            k = int(short[0])
            raise InputError(f"per_class={per_class}: class {names[k]!r} has only {int(counts[k])} images in the "
                             f"pool ({short.size} classes are too small)")
        if own_test and np.any(counts - per_class < 1):
            k = int(np.flatnonzero(counts - per_class < 1)[0])
            raise InputError(f"per_class={per_class}: class {names[k]!r} leaves no image for the test split")
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        raise InputError(f"labels: class {names[int(empty[0])]!r} has no image in the pool")
    if per_class is not None and per_class < 2:
        raise InputError(f"per_class: expected at least 2 (one train and one val image per class), got {per_class}")
    if per_class is None and counts.min() < 2:
        k = int(np.argmin(counts))
        raise InputError(f"labels: class {names[k]!r} has {int(counts[k])} image; train and val need at least 2")
    if train_per_class is not None:
        tv_n = counts if per_class is None else np.minimum(counts, per_class)
        short = np.flatnonzero(tv_n <= train_per_class)
        if short.size:
            k = int(short[0])
            raise InputError(f"train_per_class={train_per_class}: class {names[k]!r} has {int(tv_n[k])} trainval "
                             f"images, which leaves none for val")


def _draw_split(rng: np.random.Generator, by_class: list[np.ndarray], *, per_class: int | None,
                train_per_class: int | None, val_fraction: float | None, own_test: bool,
                test_per_class: int | None) -> dict[str, list[np.ndarray]]:
    """One sub-sample: part -> per-class chunks of pool positions (``by_class[c]``: class c's positions).
    Each class draws ``per_class`` images (all when None), shuffles them and gives the first
    ``train_per_class`` (or ``round((1 - val_fraction) n_c)``, at least 1, at most n_c - 1) to train,
    the rest to val; with ``own_test``, test draws from the class's images outside trainval."""
    tv, tr, va, te = [], [], [], []
    for pool in by_class:
        if per_class is None:
            chosen = pool  # all images: trainval identical across splits, train/val vary
        else:
            chosen = rng.permutation(pool)[:per_class]
        chosen = rng.permutation(chosen)
        if train_per_class is not None:
            n_train = train_per_class
        else:
            n_train = int(np.floor((1.0 - val_fraction) * len(chosen) + 0.5))  # type: ignore[operator]
            n_train = min(max(n_train, 1), len(chosen) - 1)
        tv.append(chosen)
        tr.append(chosen[:n_train])
        va.append(chosen[n_train:])
        if own_test:
            rest = rng.permutation(np.setdiff1d(pool, chosen))
            te.append(rest if test_per_class is None else rest[:test_per_class])
    parts = {"trainval": tv, "train": tr, "val": va}
    if own_test:
        parts["test"] = te
    return parts


def write_splits(
    dataset: Dataset,
    out_dir: str | os.PathLike[str],
    *,
    dataset_name: str,
    per_class: int | None,
    seed: int,
    val_fraction: float | None = 0.4,
    train_per_class: int | None = None,
    num_splits: int = 3,
    own_test: bool = False,
    test_per_class: int | None = None,
) -> dict[str, Any]:
    """Write ``trainval{i}.json``, ``train{i}.json``, ``val{i}.json`` (and ``test{i}.json``) to ``out_dir``.

    Returns ``{"out": dir, "files": {name: sha256}, "counts": {name: size}}``.
    """
    splits = build_splits(dataset.labels, num_classes=dataset.num_classes, per_class=per_class, seed=seed,
                          val_fraction=val_fraction, train_per_class=train_per_class,
                          num_splits=num_splits, own_test=own_test,
                          test_per_class=test_per_class, class_names=list(dataset.class_names))
    out = Path(out_dir)
    files, sizes = {}, {}
    for i, parts in enumerate(splits):
        for part, content in parts.items():
            content["dataset"] = dataset_name
            sealed = write_split(out / f"{part}{i}.json", content)
            files[f"{part}{i}.json"] = sealed["sha256"]
            sizes[f"{part}{i}.json"] = len(sealed["indices"])
    return {"out": str(out), "files": files, "counts": sizes}


def write_preset_splits(
    data: DataSplits,
    out_dir: str | os.PathLike[str],
    *,
    dataset_name: str,
    preset: SmallDataPreset,
    seed: int,
    per_class: int | None = None,
    train_per_class: int | None = None,
    val_fraction: float | None = None,
) -> dict[str, Any]:
    """:func:`write_splits` with the preset's split sizes (overrides as in
    :meth:`SmallDataPreset.split_sizes`); datasets without an official test set get ``test{i}``."""
    own = data.test is None
    sizes = preset.split_sizes(per_class=per_class, train_per_class=train_per_class, val_fraction=val_fraction)
    res = write_splits(data.train, out_dir, dataset_name=dataset_name, seed=seed, num_splits=preset.num_splits,
                       own_test=own, test_per_class=preset.test_per_class if own else None, **sizes)
    res.update(sizes)
    return res


def read_splits(
    split_dir: str | os.PathLike[str],
    dataset: Dataset,
    *,
    dataset_name: str,
    splits: list[int] | None = None,
) -> list[SmallDataSplit]:
    """Read and verify the split files in ``split_dir`` against the training pool ``dataset``."""
    d = Path(split_dir)
    if not d.is_dir():
        raise InputError(f"splits {str(d)!r}: no such folder (write one with `vistabench smalldata splits`)")
    found = sorted(int(p.stem[len("trainval"):]) for p in d.glob("trainval*.json") if p.stem[len("trainval"):].isdigit())
    if not found:
        raise InputError(f"splits {str(d)!r}: no trainval{{i}}.json files")
    wanted = found if splits is None else list(splits)
    missing = [i for i in wanted if i not in found]
    if missing:
        raise InputError(f"splits {str(d)!r}: no trainval{missing[0]}.json (found splits {found})")
    fp = labels_fingerprint(dataset.labels)
    out = []
    for i in wanted:
        arrays, hashes = {}, {}
        for part in PARTS:
            p = d / f"{part}{i}.json"
            if part == "test" and not p.is_file():
                arrays[part] = None
                continue
            c = read_split(p, kind=SPLIT_KIND)
            if c.get("dataset") != dataset_name:
                raise InputError(f"split file {str(p)!r}: made for dataset {c.get('dataset')!r}, not {dataset_name!r}")
            if c.get("pool_labels_sha256") != fp or c.get("pool_size") != len(dataset):
                raise InputError(f"split file {str(p)!r}: made for a different pool ({c.get('pool_size')} images) "
                                 f"than the one loaded ({len(dataset)} images)")
            arrays[part] = np.asarray(c["indices"], dtype=np.int64)
            hashes[part] = c["sha256"]
        out.append(SmallDataSplit(i, arrays["trainval"], arrays["train"], arrays["val"], arrays["test"], hashes))
    return out
