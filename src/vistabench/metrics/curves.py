"""Areas under curves, shared by the long-tailed sweep (accuracy against divergence) and the stream
protocol (accuracy against training progress)."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from .._validation import check_array, check_value
from ..errors import InputError
from ._area import merged_trapezoid

__all__ = ["normalised_auc"]


def normalised_auc(
    values: Any,
    x: Any | None = None,
    *,
    single_point: Literal["nan", "value"] = "nan",
) -> Any:
    """Normalised trapezoid area of a curve: the mean height of its piecewise-linear interpolation.

    ``AUC = (1 / (x_K - x_1)) * sum_k (x_{k+1} - x_k) (v_k + v_{k+1}) / 2`` over the points sorted
    by ``x``; points with equal ``x`` are first merged into one at their mean value, so the area does
    not depend on their order. A constant curve at ``a`` has area ``a``.

    Parameters
    ----------
    values : array-like of float, shape (T,) or (B, T)
        The curve's heights (B curves over the same ``x`` when 2-D).
    x : array-like of float, shape (T,), optional
        Abscissae (divergences, training progress); default equally spaced ``0..T-1``.
    single_point : {"nan", "value"}
        What a curve with fewer than two distinct ``x`` gives: NaN (the long-tailed sweep's AUC is
        undefined there) or its mean value (the stream's learning-curve area of a single evaluation).

    Returns
    -------
    float for 1-D ``values``, array of shape (B,) for 2-D; NaN for an empty curve.

    Examples
    --------
    >>> normalised_auc([0.0, 1.0], [0, 1])
    0.5
    >>> normalised_auc([0.9, 0.8, 0.6], [0.0, 1.0, 2.0])
    0.775
    >>> normalised_auc([0.7], single_point="value"), normalised_auc([0.7])
    (0.7, nan)
    """
    check_value(single_point, "single_point", choices=("nan", "value"))
    v = check_array(values, "values", kind="float")
    if v.ndim not in (1, 2):
        raise InputError(f"values: expected shape (T,) or (B, T), got {v.shape}")
    rows = v[None, :] if v.ndim == 1 else v
    T = rows.shape[1]
    xs = np.arange(T, dtype=float) if x is None else check_array(x, "x", ndim=1, kind="float")
    if len(xs) != T:
        raise InputError(f"x: expected {T} entries (one per value), got {len(xs)}")
    out = merged_trapezoid(rows, xs, single_point=single_point)
    return float(out[0]) if v.ndim == 1 else out
