"""Small-data benchmark datasets (Brigato et al., §V): the loaders (the presets: :mod:`.smalldata_presets`).

Loaders read the datasets' own published layouts from the user's disk (nothing is downloaded):

- ``cifair10``: ROOT holds ``cifar-10-batches-py/`` (CIFAR-10 python batches: the training pool)
  and ``ciFAIR-10/test_batch`` (the ciFAIR-10 test set, same pickle format).
- ``cub200``: the ``CUB_200_2011`` folder: ``images.txt``, ``image_class_labels.txt``,
  ``train_test_split.txt``, ``classes.txt``, ``images/``.
- ``isic2018``: ``ISIC2018_Task3_Training_GroundTruth.csv`` (one-hot columns MEL NV BCC AKIEC BKL DF
  VASC) and ``ISIC2018_Task3_Training_Input/*.jpg``; no official test labels, so the benchmark
  draws its own test splits from the rest of the pool.
- ``eurosat``: EuroSAT multispectral: one folder per class of 13-band GeoTIFFs (``allBands/``,
  ``EuroSAT_MS/`` or ROOT itself); all 13 bands become channels; own test splits.
- ``clamm``: ICFHR 2016 CLaMM: grayscale TIFFs with ``@CLaMM-filelist.csv`` (training) and
  ``@CLaMM_task1.csv`` (test), ``;``-separated, in ``images/`` or ROOT.
- ``mnist5k``, ``digits``: the bundled data; ``folder``: ROOT/<class>/* (or ROOT/train + ROOT/test).

Images of varying size (CUB, ISIC, CLaMM, folders) are resized to ``image_size`` x ``image_size``
(bilinear, whole image, aspect ratio not kept) when loaded, so every dataset is one array.
"""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path
from typing import Literal

import numpy as np

from ..errors import InputError
from ..registry import resolve_ref
from .dataset import DataSplits, Dataset
from .readers import read_cifar_batch, read_image_folder, readers
from .smalldata_presets import (CIFAR10_CLASSES, CLAMM_CLASSES, EUROSAT_BANDS, EUROSAT_CLASSES, ISIC2018_CLASSES,
                                RECIPES, SmallDataPreset, get_preset, presets, vistabench_recipe)

__all__ = ["SmallDataPreset", "presets", "get_preset", "RECIPES", "vistabench_recipe", "load_smalldata", "labels_fingerprint",
           "CIFAR10_CLASSES", "ISIC2018_CLASSES", "EUROSAT_CLASSES", "CLAMM_CLASSES"]


def labels_fingerprint(labels: np.ndarray) -> str:
    """sha256 of the int64 label array: ties a split file to the pool it indexes."""
    return hashlib.sha256(np.ascontiguousarray(labels, dtype="<i8").tobytes()).hexdigest()


# ----------------------------------------------------------------------------------- helpers
def _dir(root: str | Path | None, what: str) -> Path:
    if root is None:
        raise InputError(f"root: dataset {what!r} needs the folder that holds its files")
    p = Path(root)
    if not p.is_dir():
        raise InputError(f"root {str(p)!r}: no such folder (dataset {what!r})")
    return p


def _resize(arr: np.ndarray, size: int | None, path: Path) -> np.ndarray:
    if size is None or arr.shape[:2] == (size, size):
        return arr
    from PIL import Image

    if arr.shape[2] not in (1, 3):
        raise InputError(f"{str(path)!r}: cannot resize a {arr.shape[2]}-band image")
    if arr.dtype != np.uint8:
        raise InputError(f"{str(path)!r}: cannot resize a {arr.dtype} image; expected 8-bit")
    im = Image.fromarray(arr[:, :, 0] if arr.shape[2] == 1 else arr)
    out = np.asarray(im.resize((size, size), Image.BILINEAR))
    return out[:, :, None] if out.ndim == 2 else out


def _read(path: Path, *, mode: Literal["RGB", "L"], size: int | None) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    if not path.is_file():
        raise InputError(f"{str(path)!r}: image file listed but not found")
    try:
        with Image.open(path) as im:
            arr = np.asarray(im.convert(mode))
    except (UnidentifiedImageError, OSError) as exc:
        raise InputError(f"{str(path)!r}: not a readable image ({exc})") from exc
    if arr.ndim == 2:
        arr = arr[:, :, None]
    return _resize(arr, size, path)


def _read_many(paths: list[Path], *, mode: Literal["RGB", "L"], size: int | None, what: str) -> np.ndarray:
    from ..progress import track

    imgs = [_read(p, mode=mode, size=size) for p in track(paths, total=len(paths), description=f"reading {what}")]
    shapes = {a.shape for a in imgs}
    if len(shapes) > 1:
        raise InputError(f"{what}: images differ in shape {sorted(shapes)[:3]}; pass an image size")
    return np.stack(imgs)


def _check_all_classes(labels: np.ndarray, names: list[str], where: str) -> None:
    counts = np.bincount(labels, minlength=len(names))
    missing = [names[i] for i in np.flatnonzero(counts == 0)]
    if missing:
        raise InputError(f"{where}: no images for classes {missing[:5]}"
                         + (f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""))


# ----------------------------------------------------------------------------------- loaders
def read_cifair10(root: str | Path) -> DataSplits:
    """CIFAR-10 training batches + the ciFAIR-10 test batch (see module docstring)."""
    r = _dir(root, "cifair10")
    train_dir = next((d for d in (r / "cifar-10-batches-py", r) if (d / "data_batch_1").is_file()), None)
    test_dir = next((d for d in (r / "ciFAIR-10", r / "cifair-10", r / "ciFAIR10") if (d / "test_batch").is_file()), None)
    if train_dir is None:
        raise InputError(f"root {str(r)!r}: expected cifar-10-batches-py/data_batch_1..5 (CIFAR-10 python version)")
    if test_dir is None:
        raise InputError(f"root {str(r)!r}: expected ciFAIR-10/test_batch (the ciFAIR-10 test set)")
    files = [train_dir / f"data_batch_{i}" for i in range(1, 6)]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise InputError(f"{str(train_dir)!r}: missing CIFAR-10 batches {missing}")
    parts = [read_cifar_batch(f, "labels") for f in files]
    xt, yt = read_cifar_batch(test_dir / "test_batch", "labels")
    x = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    for arr, where in ((y, str(train_dir)), (yt, str(test_dir / "test_batch"))):
        if arr.size and (arr.min() < 0 or arr.max() >= 10):
            raise InputError(f"{where!r}: labels outside 0..9")
        _check_all_classes(arr, CIFAR10_CLASSES, where)
    return DataSplits(Dataset(x, y, list(CIFAR10_CLASSES), "cifair10"),
                      Dataset(xt, yt, list(CIFAR10_CLASSES), "cifair10#test"))


def _table(path: Path, ncols: int) -> list[list[str]]:
    if not path.is_file():
        raise InputError(f"{str(path)!r}: no such file (CUB-200-2011 layout)")
    rows = []
    for ln, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(maxsplit=ncols - 1)
        if len(parts) != ncols:
            raise InputError(f"{str(path)!r} line {ln}: expected {ncols} fields, got {line!r}")
        rows.append(parts)
    return rows


def read_cub200(root: str | Path, *, image_size: int | None = 224) -> DataSplits:
    """CUB-200-2011 with its official train/test split (``train_test_split.txt``: 1 = train)."""
    r = _dir(root, "cub200")
    if not (r / "images.txt").is_file() and (r / "CUB_200_2011" / "images.txt").is_file():
        r = r / "CUB_200_2011"
    classes = _table(r / "classes.txt", 2)
    names = [c[1] for c in sorted(classes, key=lambda c: int(c[0]))]
    class_ids = sorted(int(c[0]) for c in classes)
    if class_ids != list(range(1, len(names) + 1)):
        raise InputError(f"{str(r / 'classes.txt')!r}: class ids must be 1..{len(names)}")
    images = {int(i): p for i, p in _table(r / "images.txt", 2)}
    labels = {int(i): int(c) for i, c in _table(r / "image_class_labels.txt", 2)}
    split = {int(i): int(s) for i, s in _table(r / "train_test_split.txt", 2)}
    ids = sorted(images)
    for what, d in (("image_class_labels.txt", labels), ("train_test_split.txt", split)):
        lack = [i for i in ids if i not in d]
        if lack:
            raise InputError(f"{str(r / what)!r}: no entry for image ids {lack[:5]}")
    bad = sorted({labels[i] for i in ids} - set(class_ids))
    if bad:
        raise InputError(f"{str(r / 'image_class_labels.txt')!r}: class ids {bad[:5]} not in classes.txt")
    out = []
    for flag, suffix in ((1, ""), (0, "#test")):
        sel = [i for i in ids if split[i] == flag]
        x = _read_many([r / "images" / images[i] for i in sel], mode="RGB", size=image_size, what="cub200")
        y = np.asarray([labels[i] - 1 for i in sel], dtype=np.int64)
        _check_all_classes(y, names, f"cub200 {'train' if flag else 'test'} part")
        out.append(Dataset(x, y, names, "cub200" + suffix, meta={"image_ids": sel}))
    return DataSplits(out[0], out[1])


def read_isic2018(root: str | Path, *, image_size: int | None = 224) -> DataSplits:
    """ISIC 2018 task 3 training data (10,015 images); the benchmark draws its own test splits."""
    r = _dir(root, "isic2018")
    csvs = sorted(r.glob("**/ISIC2018_Task3_Training_GroundTruth.csv"))
    if not csvs:
        raise InputError(f"root {str(r)!r}: ISIC2018_Task3_Training_GroundTruth.csv not found")
    img_dir = next((d for d in r.glob("**/ISIC2018_Task3_Training_Input") if d.is_dir()), None)
    if img_dir is None:
        raise InputError(f"root {str(r)!r}: folder ISIC2018_Task3_Training_Input not found")
    with open(csvs[0], newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    if not rows or rows[0][1:] != ISIC2018_CLASSES or rows[0][0] != "image":
        raise InputError(f"{str(csvs[0])!r}: expected header image,{','.join(ISIC2018_CLASSES)}, "
                         f"got {','.join(rows[0]) if rows else 'an empty file'}")
    paths, labels = [], []
    for ln, row in enumerate(rows[1:], 2):
        try:
            onehot = [float(v) for v in row[1:]]
        except ValueError as exc:
            raise InputError(f"{str(csvs[0])!r} line {ln}: non-numeric label ({exc})") from exc
        if len(onehot) != 7 or sorted(onehot) != [0.0] * 6 + [1.0]:
            raise InputError(f"{str(csvs[0])!r} line {ln}: expected one 1.0 among 7 columns, got {row[1:]}")
        paths.append(img_dir / f"{row[0]}.jpg")
        labels.append(int(np.argmax(onehot)))
    y = np.asarray(labels, dtype=np.int64)
    _check_all_classes(y, ISIC2018_CLASSES, str(csvs[0]))
    x = _read_many(paths, mode="RGB", size=image_size, what="isic2018")
    return DataSplits(Dataset(x, y, list(ISIC2018_CLASSES), "isic2018"), None)


def read_eurosat(root: str | Path) -> DataSplits:
    """EuroSAT multispectral: 13-band 64x64 GeoTIFFs, one folder per class; all bands as channels."""
    import tifffile

    r = _dir(root, "eurosat")
    base = next((d for d in (r / "allBands", r / "EuroSAT_MS", r / "EuroSATallBands", r)
                 if d.is_dir() and any((d / c).is_dir() for c in EUROSAT_CLASSES)), None)
    if base is None:
        raise InputError(f"root {str(r)!r}: no EuroSAT class folders ({', '.join(EUROSAT_CLASSES[:3])}, ...)")
    missing = [c for c in EUROSAT_CLASSES if not (base / c).is_dir()]
    if missing:
        raise InputError(f"eurosat root {str(base)!r}: missing class folders {missing}")
    images, labels = [], []
    for ci, c in enumerate(EUROSAT_CLASSES):
        files = sorted(f for f in (base / c).iterdir() if f.suffix.lower() in (".tif", ".tiff"))
        if not files:
            raise InputError(f"eurosat class folder {str(base / c)!r}: no .tif files")
        for f in files:
            arr = tifffile.imread(f)
            if arr.ndim == 3 and arr.shape[0] == EUROSAT_BANDS and arr.shape[-1] != EUROSAT_BANDS:
                arr = np.moveaxis(arr, 0, -1)
            if arr.ndim != 3 or arr.shape[-1] != EUROSAT_BANDS:
                bands = arr.shape[-1] if arr.ndim == 3 else 1
                raise InputError(f"{str(f)!r}: expected {EUROSAT_BANDS} spectral bands, found {bands} "
                                 f"(array shape {arr.shape}); use the multispectral (allBands) release")
            images.append(arr)
            labels.append(ci)
    shapes = {a.shape for a in images}
    if len(shapes) > 1:
        raise InputError(f"eurosat: images differ in shape {sorted(shapes)[:3]}")
    return DataSplits(Dataset(np.stack(images), np.asarray(labels), list(EUROSAT_CLASSES), "eurosat"), None)


def _clamm_label(name: str, where: str) -> int:
    key = name.strip().lower()
    for i, c in enumerate(CLAMM_CLASSES):
        if c.lower() == key:
            return i
    raise InputError(f"{where}: unknown CLaMM script class {name!r} (known: {', '.join(CLAMM_CLASSES)})")


def read_clamm(root: str | Path, *, image_size: int | None = 224) -> DataSplits:
    """CLaMM 2016: training (``@CLaMM-filelist.csv``) and task-1 test (``@CLaMM_task1.csv``) sets.

    Class names are matched case-insensitively after stripping spaces (the two CSVs spell
    ``Humanistic_Cursive`` and ``Semitextualis`` differently).
    """
    r = _dir(root, "clamm")
    d = r / "images" if (r / "images").is_dir() else r
    out = []
    for fname, suffix in (("@CLaMM-filelist.csv", ""), ("@CLaMM_task1.csv", "#test")):
        path = d / fname
        if not path.is_file():
            raise InputError(f"clamm root {str(d)!r}: {fname} not found")
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            rows = [row for row in csv.reader(f, delimiter=";") if row and row[0].strip()]
        if len(rows) < 2:
            raise InputError(f"{str(path)!r}: no images listed")
        files, labels = [], []
        for ln, row in enumerate(rows[1:], 2):
            if len(row) < 2:
                raise InputError(f"{str(path)!r} line {ln}: expected FILENAME;SCRIPT_TYPE, got {';'.join(row)!r}")
            files.append(d / row[0].strip())
            labels.append(_clamm_label(row[1], f"{str(path)!r} line {ln}"))
        y = np.asarray(labels, dtype=np.int64)
        _check_all_classes(y, CLAMM_CLASSES, str(path))
        x = _read_many(files, mode="L", size=image_size, what="clamm")
        out.append(Dataset(x, y, list(CLAMM_CLASSES), "clamm" + suffix))
    return DataSplits(out[0], out[1])


def read_folder_dataset(root: str | Path, *, image_size: int | None = 64) -> DataSplits:
    """ROOT/<class>/* (own test splits) or ROOT/train/<class>/* + ROOT/test/<class>/* (official)."""
    r = _dir(root, "folder")
    size = None if image_size is None else (image_size, image_size)
    if (r / "train").is_dir():
        train = read_image_folder(r / "train", size=size)
        test = read_image_folder(r / "test", class_names=train.class_names, size=size) \
            if (r / "test").is_dir() else None
        return DataSplits(train, test)
    return DataSplits(read_image_folder(r, size=size), None)


def load_smalldata(name: str, root: str | Path | None = None, *, image_size: int | None = None) -> DataSplits:
    """Load a small-data dataset by preset name.

    Parameters
    ----------
    name : str
        A preset (``presets.names()``); unknown names raise with suggestions.
    root : path, optional
        The dataset's folder (required except for ``mnist5k`` and ``digits``).
    image_size : int, optional
        Side length that variable-size images are resized to (default: the preset's).

    Returns
    -------
    DataSplits
        ``test`` is None for datasets whose test splits the benchmark draws itself.
    """
    p = get_preset(name)
    if not p.needs_root:
        if root is not None:
            raise InputError(f"root: dataset {name!r} is bundled and takes no root folder")
        from .readers import load_dataset

        return load_dataset(name)
    if p.folder_reader is None:
        raise RuntimeError(f"small-data preset {name!r} needs a folder but has no folder reader")
    loader = resolve_ref(p.folder_reader, what=f"folder reader of dataset {name!r}")
    if p.native_size is not None:  # its images keep their size
        return loader(root)
    return loader(root, image_size=image_size if image_size is not None else p.image_size)


for _name, _p in presets.items():  # each preset with a folder reader of its own is also a data reader
    if _p.folder_reader is not None and _p.as_data_reader:
        readers.register(_name)(lambda arg=None, _n=_name: load_smalldata(_n, arg))
