"""Classification metrics over an explicit class list (numpy only).

Balanced accuracy is the small-data benchmark's metric (Brigato et al., §VI-A): the mean of the
diagonal of the row-normalised confusion matrix, i.e. the mean per-class recall.
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

import numpy as np

from .._validation import check_classes, check_labels, check_same_length
from ..errors import InputError

__all__ = ["balanced_accuracy", "per_class_recall"]


def _prepare(y_true: Any, y_pred: Any, classes: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    cls = check_classes(classes, "classes")
    yt = check_labels(y_true, "y_true")
    yp = check_labels(y_pred, "y_pred")
    check_same_length("y_true", yt, "y_pred", yp)
    known = set(cls.tolist())
    for name, arr in (("y_true", yt), ("y_pred", yp)):
        extra = sorted(set(np.unique(arr).tolist()) - known)
        if extra:
            raise InputError(f"{name}: labels {extra[:5]} are not in the declared class list "
                             f"({len(cls)} classes)")
    return yt, yp, cls


def per_class_recall(
    y_true: Any,
    y_pred: Any,
    *,
    classes: Sequence[int],
) -> np.ndarray:
    """Recall of each declared class: ``r_c = |{i: y_i = c, ŷ_i = c}| / |{i: y_i = c}|``.

    Parameters
    ----------
    y_true, y_pred : array-like of int, shape (N,)
        True and predicted class ids; every value must be in ``classes``.
    classes : array-like of int, shape (C,)
        The dataset's declared class list (no duplicates).

    Returns
    -------
    ndarray of float, shape (C,)
        ``r_c`` in the order of ``classes``; NaN for a class with no true sample (undefined).

    Examples
    --------
    >>> per_class_recall([0, 0, 1, 1], [0, 1, 1, 1], classes=[0, 1, 2]).tolist()
    [0.5, 1.0, nan]
    """
    yt, yp, cls = _prepare(y_true, y_pred, classes)
    out = np.full(len(cls), np.nan)
    for k, c in enumerate(cls):
        mask = yt == c
        n = int(mask.sum())
        if n:
            out[k] = float(np.count_nonzero(yp[mask] == c)) / n
    return out


def balanced_accuracy(
    y_true: Any,
    y_pred: Any,
    *,
    classes: Sequence[int],
    absent: Literal["error", "ignore"] = "error",
) -> float:
    """Balanced accuracy: the mean per-class recall over the declared class list.

    ``BA = (1/C) Σ_c r_c`` with ``r_c`` the recall of class c (see :func:`per_class_recall`),
    i.e. the mean of the diagonal of the row-normalised confusion matrix (Brigato et al. §VI-A).
    Higher is better; the value is a fraction in [0, 1].

    Parameters
    ----------
    y_true, y_pred : array-like of int, shape (N,)
        True and predicted class ids; every value must be in ``classes``.
    classes : array-like of int, shape (C,)
        The dataset's declared class list.
    absent : {"error", "ignore"}
        What to do when a declared class has no test sample. ``"error"`` (default) raises: a
        benchmark's test set that lacks a class is a broken split, not something to average over.
        ``"ignore"`` averages over the classes present in ``y_true`` (scikit-learn's behaviour);
        with no sample at all the result is NaN.

    Returns
    -------
    float

    Examples
    --------
    >>> balanced_accuracy([0, 0, 0, 1], [0, 0, 1, 1], classes=[0, 1])
    0.8333333333333333
    """
    if absent not in ("error", "ignore"):
        raise InputError(f"absent: expected 'error' or 'ignore', got {absent!r}")
    rec = per_class_recall(y_true, y_pred, classes=classes)
    missing = np.flatnonzero(np.isnan(rec))
    if missing.size and absent == "error":
        cls = np.asarray(classes)
        raise InputError(
            f"y_true: declared classes {cls[missing][:5].tolist()} have no test sample "
            f"({missing.size} of {len(cls)} absent); balanced accuracy would silently drop them"
        )
    present = rec[~np.isnan(rec)]
    return float(present.mean()) if present.size else float("nan")
