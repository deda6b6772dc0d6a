"""The normalised trapezoid area, unvalidated: the kernel shared by :func:`.curves.normalised_auc` and
the long-tailed sweep's metrics (:mod:`.longtail`), whose public functions validate their inputs once
and then call this. Not part of the API: inputs must already be float64 arrays of the documented shapes.
"""

from __future__ import annotations

import math

import numpy as np


def merged_trapezoid(rows: np.ndarray, xs: np.ndarray, *, single_point: str = "nan") -> np.ndarray:
    """Area of each row of ``rows`` (B, T) over ``xs`` (T,), equal ``x`` merged at their mean; shape (B,).

    ``single_point``: what fewer than two distinct ``x`` give, NaN (``"nan"``) or the mean value (``"value"``).
    """
    T = rows.shape[1]
    if T == 0:
        return np.full(rows.shape[0], math.nan)
    ds, inverse = np.unique(xs, return_inverse=True)
    onehot = np.zeros((T, len(ds)))
    onehot[np.arange(T), inverse] = 1.0
    vs = (rows @ onehot) / onehot.sum(axis=0)  # (B, distinct x): equal x merged at the mean
    if len(ds) < 2:
        return vs[:, 0] if single_point == "value" else np.full(rows.shape[0], math.nan)
    return np.sum(np.diff(ds)[None, :] * (vs[:, 1:] + vs[:, :-1]) / 2.0, axis=1) / (ds[-1] - ds[0])
