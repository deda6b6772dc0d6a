"""Predictions files: ``.npz`` with ``labels`` (N,) and exactly one of ``logits`` (N, C),
``probs`` (N, C) or ``pred`` (N,); optional ``classes`` (C,) naming the columns / label ids.

The input kind is explicit: nothing is auto-detected, nothing is clamped or passed through a sigmoid.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np

from .._validation import check_array, check_labels, check_same_length, check_value
from ..errors import InputError, InputTypeError

Kind = Literal["logits", "probs", "pred"]
KINDS: tuple[Kind, ...] = ("logits", "probs", "pred")


@dataclass(frozen=True)
class Predictions:
    """Validated predictions over a pool of N samples.

    Attributes
    ----------
    labels : ndarray of int, shape (N,)
        True labels.
    kind : {"logits", "probs", "pred"}
    values : ndarray, shape (N, C) for logits/probs, (N,) for pred
    classes : ndarray of int, shape (C,), or None
    """

    labels: np.ndarray
    kind: Kind
    values: np.ndarray
    classes: np.ndarray | None = None

    def __post_init__(self) -> None:
        labels = check_labels(self.labels, "labels")
        check_value(self.kind, "kind", choices=KINDS)
        if self.kind == "pred":
            values = check_labels(self.values, "pred")
        else:
            values = check_array(self.values, self.kind, ndim=2, kind="float")
            if self.kind == "probs":
                if values.size and (values.min() < 0 or values.max() > 1):
                    raise InputError("probs: values must lie in [0, 1]; did you mean to save 'logits'?")
                sums = values.sum(axis=1)
                if values.size and not np.allclose(sums, 1.0, atol=1e-3):
                    raise InputError(
                        f"probs: rows must sum to 1 (found sums in [{sums.min():.4g}, {sums.max():.4g}]); "
                        "save unnormalised scores as 'logits'"
                    )
        check_same_length("labels", labels, self.kind, values)
        classes = None
        if self.classes is not None:
            classes = check_array(self.classes, "classes", ndim=1, kind="integer")
            if self.kind != "pred" and len(classes) != values.shape[1]:
                raise InputError(
                    f"classes has {len(classes)} entries but {self.kind} has {values.shape[1]} columns"
                )
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "classes", classes)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def num_columns(self) -> int | None:
        return None if self.kind == "pred" else int(self.values.shape[1])

    def predicted(self) -> np.ndarray:
        """Predicted label per sample, shape (N,). Ties go to the lowest column."""
        if self.kind == "pred":
            return self.values
        idx = np.argmax(self.values, axis=1) if len(self.values) else np.zeros(0, dtype=np.int64)
        return self.classes[idx] if self.classes is not None else idx.astype(np.int64)

    def correct(self) -> np.ndarray:
        """Boolean (N,) array: prediction equals label."""
        return self.predicted() == self.labels


def save_predictions(
    path: str | os.PathLike[str],
    *,
    labels: np.ndarray,
    logits: np.ndarray | None = None,
    probs: np.ndarray | None = None,
    pred: np.ndarray | None = None,
    classes: np.ndarray | None = None,
) -> Predictions:
    """Validate and write a predictions file; exactly one of logits/probs/pred."""
    given = {k: v for k, v in (("logits", logits), ("probs", probs), ("pred", pred)) if v is not None}
    if len(given) != 1:
        raise InputError(f"give exactly one of logits/probs/pred, got {sorted(given) or 'none'}")
    (kind, values), = given.items()
    p = Predictions(labels=labels, kind=kind, values=values, classes=classes)  # type: ignore[arg-type]
    write_predictions(path, p)
    return p


def write_predictions(path: str | os.PathLike[str], predictions: Predictions) -> None:
    """Write already-validated predictions (a :class:`Predictions`) as a predictions file, unchecked."""
    if not isinstance(predictions, Predictions):
        raise InputTypeError(f"predictions: expected a Predictions, got {type(predictions).__name__}")
    arrays = {"labels": predictions.labels, predictions.kind: predictions.values}
    if predictions.classes is not None:
        arrays["classes"] = predictions.classes
    from ..atomic import write_with

    p = str(path)
    if not p.endswith(".npz"):  # as numpy names it
        p += ".npz"
    write_with(p, lambda f: np.savez_compressed(f, **arrays), what="predictions file")


def read_npz_arrays(path: str | os.PathLike[str], what: str) -> dict[str, np.ndarray]:
    """All arrays of a ``.npz`` file, never unpickling; one-line :class:`InputError` otherwise.

    ``what`` names the file for the message (e.g. ``"--labels"``, ``"predictions file"``).
    """
    import zipfile

    from .._validation import check_input_file

    p = check_input_file(path, what)
    where = f"{what} {str(path)!r}"
    try:
        with open(p, "rb") as f:
            head = f.read(4)
    except OSError as exc:
        raise InputError(f"{where}: cannot read ({exc.strerror})") from exc
    if head[:2] != b"PK":
        kind = "a .npy array" if head[:4] == b"\x93NUM" else "a pickle" if head[:1] == b"\x80" else "another format"
        raise InputError(f"{where}: not a .npz archive (the file is {kind}); save arrays with numpy.savez")
    try:
        with np.load(p, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except ValueError as exc:
        if "pickle" in str(exc):
            raise InputError(f"{where}: holds object (pickled) arrays, which are refused; save numeric "
                             "arrays only") from exc
        raise InputError(f"{where}: not a readable .npz archive ({str(exc).splitlines()[0]})") from exc
    except (zipfile.BadZipFile, OSError, EOFError, KeyError) as exc:
        raise InputError(f"{where}: corrupt .npz archive ({type(exc).__name__})") from exc


def load_predictions(path: str | os.PathLike[str]) -> Predictions:
    """Read and validate a predictions ``.npz`` (no pickles are loaded)."""
    p = Path(path)
    arrays = read_npz_arrays(p, "predictions file")
    if "labels" not in arrays:
        raise InputError(f"predictions file {str(p)!r}: missing array 'labels' (found {sorted(arrays)})")
    kinds = [k for k in KINDS if k in arrays]
    if len(kinds) != 1:
        raise InputError(
            f"predictions file {str(p)!r}: needs exactly one of logits/probs/pred, found {kinds or 'none'}"
        )
    unknown = set(arrays) - {"labels", "classes", *KINDS}
    if unknown:
        raise InputError(f"predictions file {str(p)!r}: unexpected arrays {sorted(unknown)}")
    try:
        return Predictions(labels=arrays["labels"], kind=kinds[0], values=arrays[kinds[0]],
                           classes=arrays.get("classes"))
    except InputError as exc:
        raise InputError(f"predictions file {str(p)!r}: {exc}") from exc


def predictions_sha256(*arrays: Predictions | np.ndarray) -> str:
    """sha256 of prediction arrays (their dtype, shape and bytes, in order): the same predictions give
    the same hash whether they came from a file or from a run in memory (a :class:`Predictions` is
    hashed by its kind, labels, values and classes)."""
    h = hashlib.sha256()
    for a in arrays:
        if isinstance(a, Predictions):
            h.update(str(a.kind).encode())
            parts = [a.labels, a.values] + ([a.classes] if a.classes is not None else [])
            for x in parts:
                _update(h, np.asarray(x))
        else:
            _update(h, np.asarray(a))
    return h.hexdigest()


def _update(h: "hashlib._Hash", x: np.ndarray) -> None:
    x = np.ascontiguousarray(x)
    h.update(f"{x.dtype.str}{x.shape}".encode())
    h.update(x.tobytes())


def file_sha256(path: str | os.PathLike[str], *, block_bytes: int = 1 << 20) -> str:
    """sha256 of a file's bytes (predictions kept as files the protocol reads whole, e.g. detections),
    read ``block_bytes`` at a time into one reused buffer (no new block per read: a file of any size
    costs one buffer's memory and page faults)."""
    h = hashlib.sha256()
    buf = bytearray(max(int(block_bytes), 1))
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def file_sha256_in_background(path: str | os.PathLike[str]) -> Callable[[], str]:
    """:func:`file_sha256` computed in a thread, beside the caller's work (reading and hashing
    release the GIL, so it runs on another core); the returned function waits for the digest and
    raises what the hashing raised (e.g. the file is gone). Large blocks: the thread needs the GIL
    only between them, so it seldom interrupts the caller."""
    import threading

    out: dict[str, Any] = {}

    def work() -> None:
        try:
            out["digest"] = file_sha256(path, block_bytes=4 << 20)
        except BaseException as exc:  # noqa: BLE001 - raised in the caller by result()
            out["error"] = exc

    thread = threading.Thread(target=work, name="vistabench-sha256", daemon=True)
    thread.start()

    def result() -> str:
        thread.join()
        if "error" in out:
            raise out["error"]
        return out["digest"]

    return result
