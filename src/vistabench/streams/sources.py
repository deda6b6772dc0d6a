"""Resolving a task's ``source`` to arrays, and bringing every task to the stream's input format.

Sources
-------
* embedded (``{"embedded": "digits" | "mnist5k", ...}``): built from the bundled data with
  ``classes`` (a subset, relabelled 0..k-1 in the given order), ``rotate`` (0/90/180/270 degrees,
  counter-clockwise), ``invert`` (``255 - x``), ``attributes`` (a multilabel task over digit
  attributes: ``even``, ``at least 5``, ``closed loop`` (0, 6, 8, 9), ``prime`` (2, 3, 5, 7)),
  ``n_train`` / ``n_test`` (random subsets, drawn with ``seed``, default 0, so a repeated task
  gets identical data), from the bundled train and test parts respectively.
* a dataset id under the user's data root: ``<root>/<id>.npz`` (``train_images``,
  ``train_labels``, ``test_images``, ``test_labels`` [, ``class_names``]; labels are (N,) ints, or an
  (N, C) 0/1 matrix for a multilabel task) or ``<root>/<id>/train/<class>/*`` and
  ``<root>/<id>/test/<class>/*`` image folders (multiclass).
* a :func:`vistabench.data.load_dataset` spec containing ``:`` (``npz:FILE``, ``cifar10:DIR``)
  that has an official test part.

Every image is then resized to ``image_size`` x ``image_size`` (bilinear, antialiased) and brought
to ``channels`` (grey -> RGB by repetition, RGB -> grey by the channel mean).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from . import Stream, Task

__all__ = ["TaskData", "TaskSplits", "resolve_task", "to_input_format", "ATTRIBUTES"]

ATTRIBUTES: dict[str, frozenset[int]] = {
    "even": frozenset({0, 2, 4, 6, 8}),
    "at least 5": frozenset({5, 6, 7, 8, 9}),
    "closed loop": frozenset({0, 6, 8, 9}),
    "prime": frozenset({2, 3, 5, 7}),
}


@dataclass
class TaskData:
    """Images and targets of one part (train or test) of a task.

    Attributes
    ----------
    images : ndarray, shape (N, H, W, B)
    targets : ndarray of int64
        shape (N,) class ids (multiclass) or (N, C) 0/1 indicators (multilabel).
    class_names : list of str, length C
    kind : {"multiclass", "multilabel"}
    """

    images: np.ndarray
    targets: np.ndarray
    class_names: list[str]
    kind: str

    def __post_init__(self) -> None:
        if self.images.ndim != 4:
            raise InputError(f"task images: expected (N, H, W, B), got shape {self.images.shape}")
        if len(self.images) != len(self.targets):
            raise InputError(f"task data: {len(self.images)} images but {len(self.targets)} targets")
        want = 1 if self.kind == "multiclass" else 2
        if self.targets.ndim != want:
            raise InputError(f"{self.kind} task: targets must be {want}-d, got shape {self.targets.shape}")

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def __len__(self) -> int:
        return len(self.targets)

    def read_only_copy(self) -> "TaskData":
        """A private copy whose arrays cannot be written (what the runner hands a learner)."""
        imgs, tg = self.images.copy(), self.targets.copy()
        imgs.setflags(write=False)
        tg.setflags(write=False)
        return TaskData(imgs, tg, list(self.class_names), self.kind)


@dataclass
class TaskSplits:
    train: TaskData
    test: TaskData


# ----------------------------------------------------------------------------- embedded sources
@lru_cache(maxsize=4)
def bundled_dataset(name: str):
    """The bundled ``digits`` or ``mnist5k`` DataSplits, loaded once per process."""
    from ..data import load_dataset

    return load_dataset(name)


def _subset(n_avail: int, n: int | None, rng: np.random.Generator) -> np.ndarray:
    if n is None or n >= n_avail:
        return np.arange(n_avail)
    return np.sort(rng.choice(n_avail, size=n, replace=False))


def _embedded(task: Task) -> TaskSplits:
    src: dict[str, Any] = task.source
    known = {"embedded", "classes", "rotate", "invert", "attributes", "n_train", "n_test", "seed"}
    extra = sorted(set(src) - known)
    if extra:
        raise InputError(f"task {task.uid}: unknown embedded source keys {extra} (known: {sorted(known)})")
    base = src["embedded"]
    if base not in ("digits", "mnist5k"):
        raise InputError(f"task {task.uid}: embedded must be 'digits' or 'mnist5k', got {base!r}")
    splits = bundled_dataset(base)
    rng = np.random.default_rng(int(src.get("seed", 0)))
    parts = []
    for ds, n in ((splits.train, src.get("n_train")), (splits.test, src.get("n_test"))):
        x, y = ds.images, ds.labels
        classes = src.get("classes")
        if classes is not None:
            keep = np.isin(y, classes)
            x, y = x[keep], y[keep]
            remap = {c: i for i, c in enumerate(classes)}
            y = np.array([remap[int(v)] for v in y], dtype=np.int64)
            names = [str(c) for c in classes]
        else:
            names = list(ds.class_names)
        idx = _subset(len(y), n, rng)
        x, y = x[idx], y[idx]
        rot = int(src.get("rotate", 0))
        if rot % 90:
            raise InputError(f"task {task.uid}: rotate must be a multiple of 90, got {rot}")
        if rot % 360:
            x = np.rot90(x, k=(rot // 90) % 4, axes=(1, 2))
        if src.get("invert", False):
            x = 255 - x
        x = np.ascontiguousarray(x, dtype=np.uint8)
        attrs = src.get("attributes")
        if attrs is not None:
            if task.kind != "multilabel":
                raise InputError(f"task {task.uid}: 'attributes' needs kind 'multilabel'")
            unknown = [a for a in attrs if a not in ATTRIBUTES]
            if unknown:
                raise InputError(f"task {task.uid}: unknown attributes {unknown} (known: {sorted(ATTRIBUTES)})")
            digit = ds.labels[np.isin(ds.labels, classes)] if classes is not None else ds.labels
            digit = digit[idx]
            y = np.stack([np.isin(digit, sorted(ATTRIBUTES[a])) for a in attrs], axis=1).astype(np.int64)
            names = list(attrs)
        elif task.kind == "multilabel":
            raise InputError(f"task {task.uid}: an embedded multilabel task needs 'attributes'")
        parts.append(TaskData(x, y, names, task.kind))
    return TaskSplits(*parts)


# ---------------------------------------------------------------------------------- disk sources
def _read_task_npz(path: Path, task: Task) -> TaskSplits:
    from ..data.predictions import read_npz_arrays

    arrays = read_npz_arrays(path, f"task {task.uid}: data file")
    need = ["train_images", "train_labels", "test_images", "test_labels"]
    missing = [k for k in need if k not in arrays]
    if missing:
        raise InputError(f"task {task.uid}: {str(path)!r} lacks arrays {missing} (has {sorted(arrays)})")
    parts = []
    for p in ("train", "test"):
        x, y = arrays[f"{p}_images"], arrays[f"{p}_labels"]
        x = x[..., None] if x.ndim == 3 else x
        if task.kind == "multilabel" and y.ndim != 2:
            raise InputError(f"task {task.uid}: multilabel {p}_labels must be (N, C) 0/1, got shape {y.shape}")
        if task.kind == "multiclass" and y.ndim != 1:
            raise InputError(f"task {task.uid}: multiclass {p}_labels must be (N,), got shape {y.shape}")
        parts.append((x, y.astype(np.int64)))
    if task.kind == "multilabel":
        c = parts[0][1].shape[1]
    else:
        c = int(max(parts[0][1].max(initial=-1), parts[1][1].max(initial=-1))) + 1
    names = [str(s) for s in arrays["class_names"]] if "class_names" in arrays else [str(i) for i in range(c)]
    return TaskSplits(*(TaskData(x, y, names, task.kind) for x, y in parts))


def _from_disk(task: Task, data_root: str | Path | None, image_size: int) -> TaskSplits:
    src: str = task.source
    if ":" in src:
        from ..data import load_dataset

        splits = load_dataset(src)
        if splits.test is None:
            raise InputError(f"task {task.uid}: dataset {src!r} has no test part; streams need one")
        return TaskSplits(*(TaskData(d.images, d.labels, list(d.class_names), task.kind)
                            for d in (splits.train, splits.test)))
    if data_root is None:
        raise InputError(f"data_root: task {task.uid} ({task.name!r}): its data are not bundled; set data_root=DIR, "
                         f"a folder holding {src}.npz or {src}/train and {src}/test image folders")
    root = Path(data_root)
    if (root / f"{src}.npz").is_file():
        return _read_task_npz(root / f"{src}.npz", task)
    folder = root / src
    if (folder / "train").is_dir() and (folder / "test").is_dir():
        if task.kind == "multilabel":
            raise InputError(f"task {task.uid}: a multilabel task needs {src}.npz with (N, C) labels, not image folders")
        from ..data import read_image_folder

        tr = read_image_folder(folder / "train", size=(image_size, image_size))
        te = read_image_folder(folder / "test", class_names=tr.class_names, size=(image_size, image_size))
        return TaskSplits(TaskData(tr.images, tr.labels, tr.class_names, task.kind),
                          TaskData(te.images, te.labels, te.class_names, task.kind))
    raise InputError(f"task {task.uid} ({task.name!r}): found neither {str(root / (src + '.npz'))!r} nor "
                     f"{str(folder)!r}/train and /test")


# ------------------------------------------------------------------------------ input format
def to_input_format(images: np.ndarray, *, image_size: int, channels: int) -> np.ndarray:
    """Resize (N, H, W, B) images to (N, S, S, channels) uint8 (bilinear, antialiased)."""
    import torch
    import torch.nn.functional as F

    x = images
    b = x.shape[3]
    if b != channels:
        if b == 1:
            x = np.repeat(x, channels, axis=3)
        elif channels == 1:
            x = x.astype(np.float64).mean(axis=3, keepdims=True)
        else:
            raise InputError(f"images have {b} channels; cannot convert to {channels}")
    if x.shape[1:3] == (image_size, image_size) and x.dtype == np.uint8:
        return np.ascontiguousarray(x)
    out = np.empty((len(x), image_size, image_size, channels), dtype=np.uint8)
    for s in range(0, len(x), 1024):
        t = torch.from_numpy(np.ascontiguousarray(x[s:s + 1024], dtype=np.float32)).permute(0, 3, 1, 2)
        if t.shape[2:] != (image_size, image_size):
            t = F.interpolate(t, size=(image_size, image_size), mode="bilinear", antialias=True, align_corners=False)
        out[s:s + 1024] = t.round().clamp_(0, 255).permute(0, 2, 3, 1).to(torch.uint8).numpy()
    return out


def resolve_task(task: Task, stream: Stream, *, data_root: str | Path | None = None) -> TaskSplits:
    """Load one task's train and test parts in the stream's input format."""
    raw = _embedded(task) if isinstance(task.source, dict) else _from_disk(task, data_root, stream.image_size)
    out = []
    for part in (raw.train, raw.test):
        if len(part) == 0:
            raise InputError(f"task {task.uid}: empty {'train' if part is raw.train else 'test'} part")
        imgs = to_input_format(part.images, image_size=stream.image_size, channels=stream.channels)
        out.append(TaskData(imgs, np.asarray(part.targets, dtype=np.int64), part.class_names, task.kind))
    return TaskSplits(*out)
