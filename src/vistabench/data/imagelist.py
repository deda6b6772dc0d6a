"""List-file data sets on disk: ``--data imagelist:DIR`` (images stay files, decoded per batch).

``DIR`` holds one of these layouts (the first that matches is read):

- ``train.txt``, ``test.txt`` and optionally ``val.txt``: one image per line,
  ``relative/path label``, the path relative to ``DIR`` (may contain spaces: the label is the last
  field), the label an integer >= 0; blank lines and lines starting with ``#`` are skipped;
- ImageNet-LT: ``ImageNet_LT_train.txt``, ``ImageNet_LT_test.txt``, ``ImageNet_LT_val.txt`` (the
  same line format; put them in the ImageNet root the paths start from);
- Places-LT: ``Places_LT_train.txt``, ``Places_LT_test.txt``, ``Places_LT_val.txt`` (a leading
  ``/`` of a path is read relative to ``DIR`` too);
- iNaturalist 2018: ``train2018.json`` and ``val2018.json`` (COCO-like: ``images`` with ``id`` and
  ``file_name``, ``annotations`` with ``image_id`` and ``category_id``, ``categories``); val2018 is
  the test part, as in the long-tail literature. Labels are the category ids' ranks.

Classes: C = the largest label + 1 over all parts (names ``"0"``, ``"1"``, ... for list files;
the categories' names for iNaturalist).

Image size: the named layouts (ImageNet-LT, Places-LT, iNaturalist) are decoded to 224 x 224;
``train.txt`` layouts to the size of the first training image. Every image is decoded as RGB and
resized/centre-cropped to that size (:class:`~.image_files.ImageFiles`).

Checks: a malformed line (no label, a label that is not an integer >= 0), a listed file that
does not exist and a file listed twice in one list (with two labels, or with one: it would count
twice) are errors naming the list file and the lines; an image of the training part also listed in
the test or validation part is an error naming both lists (a test image must not be trained on).
A path may leave ``DIR`` (``../images/a.png``): it is read as written, relative to ``DIR`` (the
lists may live apart from the images). Existence is checked **up front** for every line (a
``stat`` per file: about a second per 100k files on a local disk), so a typo fails before training.
Whether a file decodes is checked when it is first read (an error naming the image).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..jsonutil import decode_user_json
from .dataset import DataSplits, Dataset
from .image_files import ImageFiles, first_image_size
from .readers import readers

__all__ = ["read_image_list", "parse_list_file", "LAYOUTS"]

#: named layouts: (train, test, val) file names, decoded image size (None: the first image's)
LAYOUTS: dict[str, tuple[tuple[str, str, str], tuple[int, int] | None]] = {
    "list": (("train.txt", "test.txt", "val.txt"), None),
    "imagenet_lt": (("ImageNet_LT_train.txt", "ImageNet_LT_test.txt", "ImageNet_LT_val.txt"), (224, 224)),
    "places_lt": (("Places_LT_train.txt", "Places_LT_test.txt", "Places_LT_val.txt"), (224, 224)),
    "inat2018": (("train2018.json", "val2018.json", ""), (224, 224)),
}


def parse_list_file(path: Path, root: Path) -> tuple[list[str], np.ndarray]:
    """(absolute paths, int64 labels) of a ``relative/path label`` list file; errors name the line.

    An image listed twice (the same file after normalising ``./`` and ``a/../``) is refused naming
    both lines: with two labels it would be trained as both classes, with one it would count twice.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"list file {str(path)!r}: not UTF-8 text") from None
    paths: list[str] = []
    labels: list[int] = []
    seen: dict[str, tuple[int, int]] = {}  # normalised path -> (line, label)
    base = str(root)  # joined as strings: pathlib's parsing cost more than the stat per file
    for no, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        rel, _, lab = line.rpartition(" ")
        rel = rel.strip()
        if not rel:
            raise InputError(f"{path}:{no}: expected 'relative/path label', got {line!r}")
        try:
            label = int(lab)
        except ValueError:
            raise InputError(f"{path}:{no}: label {lab!r} is not an integer") from None
        if label < 0:
            raise InputError(f"{path}:{no}: label {label} is negative; labels are class indices >= 0")
        full = os.path.join(base, rel.lstrip("/"))
        if not os.path.isfile(full):
            raise InputError(f"{path}:{no}: image {rel!r} not found under {str(root)!r}")
        key = os.path.normpath(full)
        if key in seen:
            first, first_label = seen[key]
            what = (f"with labels {first_label} and {label}; an image has one label" if first_label != label
                    else f"twice (label {label}); it would count twice in its class")
            raise InputError(f"{path}:{first} and line {no}: image {rel!r} is listed {what}; keep one line")
        seen[key] = (no, label)
        paths.append(full)
        labels.append(label)
    if not paths:
        raise InputError(f"list file {str(path)!r}: no images listed")
    return paths, np.asarray(labels, dtype=np.int64)


def _parse_coco_like(path: Path, root: Path) -> tuple[list[str], np.ndarray, dict[int, str]]:
    """iNaturalist's JSON: (paths, category ids, {category id: name})."""
    try:
        doc = decode_user_json(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{str(path)!r}: not valid JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("images"), list) \
            or not isinstance(doc.get("annotations"), list):
        raise InputError(f"{str(path)!r}: expected a JSON object with 'images' and 'annotations' lists")
    files: dict[int, str] = {}
    for k, im in enumerate(doc["images"]):
        if not (isinstance(im, dict) and isinstance(im.get("file_name"), str) and "id" in im):
            raise InputError(f"{str(path)!r}: images[{k}]: expected an object with 'id' and 'file_name'")
        files[im["id"]] = im["file_name"]
    paths, cats = [], []
    base = str(root)  # joined as strings: pathlib's parsing cost more than the stat per file
    for k, ann in enumerate(doc["annotations"]):
        if not (isinstance(ann, dict) and "image_id" in ann and isinstance(ann.get("category_id"), int)
                and not isinstance(ann.get("category_id"), bool)):
            raise InputError(f"{str(path)!r}: annotations[{k}]: expected an object with 'image_id' and an "
                             "integer 'category_id'")
        if ann["image_id"] not in files:
            raise InputError(f"{str(path)!r}: annotations[{k}]: image_id {ann['image_id']!r} is not in 'images'")
        rel = files[ann["image_id"]]
        full = os.path.join(base, rel.lstrip("/"))
        if not os.path.isfile(full):
            raise InputError(f"{str(path)!r}: annotations[{k}]: image {rel!r} not found under {str(root)!r}")
        paths.append(full)
        cats.append(ann["category_id"])
    if not paths:
        raise InputError(f"{str(path)!r}: no annotated images")
    names = {c["id"]: str(c.get("name", c["id"])) for c in doc.get("categories", [])
             if isinstance(c, dict) and "id" in c}
    return paths, np.asarray(cats, dtype=np.int64), names


def _layout(root: Path) -> str:
    for name, (files, _) in LAYOUTS.items():
        if (root / files[0]).is_file():
            return name
    wanted = ", ".join(f"{f[0]} + {f[1]}" for f, _ in LAYOUTS.values())
    raise InputError(f"imagelist {str(root)!r}: no list files found; expected one of: {wanted}")


def _refuse_shared_images(root: Path, parts: dict[str, tuple[list[str], np.ndarray]], files: dict[str, str]) -> None:
    """An image of the training part also in the test or validation part is refused in one line: it
    would be scored (or select the checkpoint) after being trained on. The same file is the same path
    after normalisation; a copy under another name is not detected."""
    if "train" not in parts:
        return
    train = {os.path.normpath(p) for p in parts["train"][0]}
    for part in ("test", "val"):
        if part not in parts:
            continue
        shared = [p for p in parts[part][0] if os.path.normpath(p) in train]
        if shared:
            first = os.path.relpath(shared[0], root)
            raise InputError(f"imagelist {str(root)!r}: {len(shared)} image(s) of {files[part]} are also in "
                             f"{files['train']} (first: {first!r}); a {part} image must not be trained on")


def read_image_list(root: str | os.PathLike[str], *, size: tuple[int, int] | None = None) -> DataSplits:
    """Read a list-file layout (see the module docstring); ``size`` (H, W) overrides the layout's."""
    from .._validation import check_input_dir

    root = check_input_dir(root, "imagelist directory")
    layout = _layout(root)
    (train_f, test_f, val_f), default_size = LAYOUTS[layout]
    if not (root / test_f).is_file():
        raise InputError(f"imagelist {str(root)!r}: has {train_f} but no {test_f} (the test part)")
    parts: dict[str, tuple[list[str], np.ndarray]] = {}
    names: dict[int, str] = {}
    for part, fname in (("train", train_f), ("test", test_f), ("val", val_f)):
        if not fname or not (root / fname).is_file():
            continue
        if layout == "inat2018":
            p, cats, n = _parse_coco_like(root / fname, root)
            parts[part] = (p, cats)
            names.update(n)
        else:
            parts[part] = parse_list_file(root / fname, root)
    _refuse_shared_images(root, parts, {"train": train_f, "test": test_f, "val": val_f})
    if layout == "inat2018":  # category ids -> 0..C-1 by rank
        ids = np.unique(np.concatenate([c for _, c in parts.values()] + [np.asarray(sorted(names), np.int64)]))
        parts = {k: (p, np.searchsorted(ids, c)) for k, (p, c) in parts.items()}
        class_names = [names.get(int(i), str(int(i))) for i in ids]
    else:
        n_classes = 1 + max(int(y.max()) for _, y in parts.values())
        class_names = [str(i) for i in range(n_classes)]
    if size is None:
        size = default_size or first_image_size(parts["train"][0][0])
    spec = f"imagelist:{root}"

    def dataset(part: str) -> Dataset | None:
        if part not in parts:
            return None
        p, y = parts[part]
        return Dataset(ImageFiles(p, size=size, channels=3), y, class_names,  # type: ignore[arg-type]
                       spec if part == "train" else f"{spec}#{part}", {"layout": layout})

    return DataSplits(dataset("train"), dataset("test"), dataset("val"))  # type: ignore[arg-type]


@readers.register("imagelist")
def _imagelist(arg: str | None = None) -> DataSplits:
    if not arg:
        raise InputError("dataset 'imagelist' needs a path: use imagelist:DIR")
    return read_image_list(arg)
