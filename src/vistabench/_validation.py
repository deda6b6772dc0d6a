"""Shared input validation (numpy only). Every public function validates here, once.

A scalar argument is checked by :func:`check_value` (:mod:`vistabench.options`): the rules a config
field declares with ``option()`` (type, ``low``/``high``/``low_open``, ``choices``, ``finite``), the same
code and messages, so a function's boundary and a config speak one vocabulary. The checks here add
what ``option()`` has no words for: arrays (rank, kind, finiteness, labels, scores), lengths that must
match, and files and folders that must exist. numpy is imported by the array checks when they run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

from .errors import InputError, InputTypeError
from .options import check_value

__all__ = [
    "check_array",
    "check_labels",
    "check_scores",
    "check_value",
    "check_same_length",
    "check_classes",
    "check_input_file",
    "check_input_dir",
    "check_json_file",
]


def _describe(a: np.ndarray) -> str:
    return f"shape {a.shape}, dtype {a.dtype}"


def check_array(
    x: Any,
    name: str,
    *,
    ndim: int | None = None,
    kind: str = "numeric",
    finite: bool = True,
    allow_empty: bool = True,
) -> np.ndarray:
    """Convert ``x`` to an ndarray and check its rank, kind and finiteness.

    ``kind`` is ``"numeric"`` (int/float/bool), ``"integer"`` (ints, or floats that are whole) or
    ``"float"``.
    """
    import numpy as np

    try:
        a = np.asarray(x)
    except Exception as exc:  # pragma: no cover - numpy raises many kinds
        raise InputTypeError(f"{name}: expected an array, got {type(x).__name__} ({exc})") from exc
    if a.dtype == object or a.dtype.kind in "USV":
        raise InputTypeError(f"{name}: expected a numeric array, got {_describe(a)}")
    if ndim is not None and a.ndim != ndim:
        raise InputError(f"{name}: expected a {ndim}-d array, got {_describe(a)}")
    if not allow_empty and a.size == 0:
        raise InputError(f"{name}: expected a non-empty array, got {_describe(a)}")
    if kind == "integer":
        if a.dtype.kind == "b":
            a = a.astype(np.int64)
        elif a.dtype.kind == "f":
            if not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
                raise InputError(f"{name}: expected integer values, got non-integer floats")
            a = a.astype(np.int64)
        elif a.dtype.kind not in "iu":
            raise InputTypeError(f"{name}: expected integers, got {_describe(a)}")
    elif kind == "float":
        a = a.astype(np.float64, copy=False)
    if finite and a.dtype.kind == "f" and a.size and not np.all(np.isfinite(a)):
        bad = int(np.count_nonzero(~np.isfinite(a)))
        raise InputError(f"{name}: expected finite values, found {bad} NaN/inf entries")
    return a


def check_labels(y: Any, name: str, *, num_classes: int | None = None) -> np.ndarray:
    """1-d integer labels in ``[0, num_classes)``."""
    import numpy as np

    a = check_array(y, name, ndim=1, kind="integer")
    if a.size and a.min() < 0:
        raise InputError(f"{name}: labels must be >= 0, found {int(a.min())}")
    if num_classes is not None and a.size and a.max() >= num_classes:
        raise InputError(
            f"{name}: labels must be < num_classes={num_classes}, found {int(a.max())}"
        )
    return a.astype(np.int64, copy=False)


def check_scores(s: Any, name: str, *, n: int | None = None, num_classes: int | None = None) -> np.ndarray:
    """2-d finite float scores of shape (n, num_classes)."""
    a = check_array(s, name, ndim=2, kind="float")
    if n is not None and a.shape[0] != n:
        raise InputError(f"{name}: expected {n} rows, got shape {a.shape}")
    if num_classes is not None and a.shape[1] != num_classes:
        raise InputError(f"{name}: expected {num_classes} columns, got shape {a.shape}")
    return a


def check_same_length(name_a: str, a: np.ndarray, name_b: str, b: np.ndarray) -> None:
    if len(a) != len(b):
        raise InputError(f"{name_a} has {len(a)} entries but {name_b} has {len(b)}")


def check_classes(classes: Any, name: str = "classes") -> np.ndarray:
    """An explicit, duplicate-free 1-d list of integer class ids."""
    import numpy as np

    a = check_array(classes, name, ndim=1, kind="integer", allow_empty=False)
    if len(np.unique(a)) != len(a):
        raise InputError(f"{name}: class list has duplicates")
    return a


def check_input_file(path: Any, name: str, *, what: str = "file") -> "Path":
    """An existing regular file: a folder or a missing path gives a one-line :class:`InputError`."""
    from pathlib import Path

    p = Path(path)
    if p.is_dir():
        raise InputError(f"{name} {str(path)!r}: is a folder, expected a {what}")
    if not p.exists():
        raise InputError(f"{name} {str(path)!r}: no such {what}")
    if not p.is_file():
        raise InputError(f"{name} {str(path)!r}: not a regular {what}")
    return p


#: file signatures of the binary files users give where a JSON file is expected -> what the file is
_SIGNATURES = (
    (b"PK\x03\x04", "a zip archive"),
    (b"\x93NUMPY", "a NumPy .npy file"),
    (b"SQLite format 3\x00", "a SQLite database"),
    (b"\x1f\x8b", "a gzip-compressed file (decompress it first)"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"\x80", "a Python pickle"),
)


def binary_kind(head: bytes, suffix: str = "") -> str | None:
    r"""What a file starting with ``head`` is when it is not text (an ``.npz`` named as such), else None.

    >>> binary_kind(b"PK\x03\x04...", ".npz"), binary_kind(b'[{"image_id": 1'), binary_kind(b"\x00\x01")
    ('an .npz (NumPy) file', None, 'a binary file')
    """
    for magic, kind in _SIGNATURES:
        if head.startswith(magic):
            return "an .npz (NumPy) file" if magic == b"PK\x03\x04" and suffix.lower() == ".npz" else kind
    return "a binary file" if b"\x00" in head else None


def check_json_file(path: Any, name: str, *, expected: str = "a JSON file") -> "Path":
    """:func:`check_input_file`, and a one-line :class:`InputError` saying what the file is when it is
    binary (an ``.npz`` given for a JSON file), before a JSON parser calls it malformed."""
    p = check_input_file(path, name)
    with open(p, "rb") as fh:
        head = fh.read(512)
    kind = binary_kind(head, p.suffix)
    if kind is not None:
        raise InputError(f"{name} {str(path)!r}: {kind}, expected {expected}")
    return p


def check_input_dir(path: Any, name: str) -> "Path":
    """An existing folder: a file or a missing path gives a one-line :class:`InputError`."""
    from pathlib import Path

    p = Path(path)
    if p.is_file():
        raise InputError(f"{name} {str(path)!r}: is a file, expected a folder")
    if not p.is_dir():
        raise InputError(f"{name} {str(path)!r}: no such folder")
    return p
