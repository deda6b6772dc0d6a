"""Few-shot class-incremental (FSCIL) metrics: aAcc, lAcc, tAcc, generalized accuracy (gAcc), PD, KR.

Notation (docs/incremental.md; paper 003, Eq. 1-6). Session 1 holds the base classes Y_1; sessions 2..n
add novel classes Y_j. ``A[i, j]`` (0-based here, A_{i+1}^{j+1} in the paper) is the accuracy after
session i on the test samples of session j's classes (j <= i), predicted over every class seen so
far. Everything is a fraction in [0, 1]; higher is better. Entries above the diagonal are NaN.

The generalized accuracy at session i (paper Eq. 4), with n_j = |Y_j| classes in session j::

    gAcc_i(α) = (α n_1 A_i^1 + Σ_{j=2..i} n_j A_i^j) / (α n_1 + Σ_{j=2..i} n_j),   gAcc_1(α) = A_1^1

(the paper writes n_j = |Y_nov| for every novel session; the weighted form is the same formula and
also covers sessions of unequal size). Its area over α ∈ [0, 1] (Eq. 5) has a closed form: with
a = n_1 A_i^1, b = Σ n_j A_i^j, c = n_1, d = Σ n_j,

    gAcc_i = ∫_0^1 (αa + b) / (αc + d) dα = a/c + (bc − ad)/c² · ln((c + d)/d)

and gAcc = mean_i gAcc_i (Eq. 6). ``mode="compat"`` reproduces the authors' public code instead
(iSEE-Laboratory/Revisting_FSCIL, ``models/metric.py``): β = α n_1/|Y_nov| on the integer grid
0..⌊n_1/|Y_nov|⌋, a trapezoid over that grid divided by its length, and the base-only session set
to 0 at β = 0. That makes a base-only session score (1 − 1/(2⌊n_1/|Y_nov|⌋))·A_1^1 instead of
A_1^1, and trades the integral for a coarse trapezoid; the default ``"exact"`` is the paper's
definition.

Forgetting: PD = A_1^1 − A_n^1 (performance drop), KR = A_n^1 / A_1^1 (knowledge retention; NaN
when A_1^1 = 0).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, NamedTuple, Sequence

import numpy as np

from .._validation import check_array, check_labels, check_value
from ..errors import InputError, InputTypeError

Mode = Literal["exact", "compat"]
MODES: tuple[str, ...] = ("exact", "compat")
CornerCase = Literal["lazy", "greedy", "greedy_nf"]
CORNER_CASES: tuple[str, ...] = ("lazy", "greedy", "greedy_nf")

__all__ = [
    "AccuracyMatrix",
    "IncrementalScores",
    "accuracy_matrix",
    "check_accuracy_matrix",
    "corner_case_matrix",
    "gacc_at",
    "gacc_compat",
    "gacc_sessions",
    "incremental_scores",
    "session_sizes_uniform",
]


# --------------------------------------------------------------------------------------- input
def check_accuracy_matrix(matrix: Any, name: str = "matrix") -> np.ndarray:
    """Validate an accuracy matrix and return it as a square float array, NaN above the diagonal.

    Parameters
    ----------
    matrix : list of lists, or array of shape (n, n)
        Either the literature's ragged form ``[[A_1^1], [A_2^1, A_2^2], ...]`` (row i has i
        entries) or a square array/list with NaN (or JSON null) strictly above the diagonal.
        Entries on and below the diagonal must be finite fractions in [0, 1].

    Returns
    -------
    ndarray of float64, shape (n, n)

    >>> check_accuracy_matrix([[0.9], [0.8, 0.5]])
    array([[0.9, nan],
           [0.8, 0.5]])
    """
    if isinstance(matrix, np.ndarray) and matrix.dtype != object:
        a = check_array(matrix, name, ndim=2, kind="float", finite=False)
        if a.shape[0] != a.shape[1]:
            raise InputError(f"{name}: expected a square (n, n) array or a lower-triangular list, got shape {a.shape}")
        rows = [a[i, : i + 1] for i in range(a.shape[0])]
        upper = a[np.triu_indices(a.shape[0], k=1)]
        if upper.size and not np.all(np.isnan(upper)):
            raise InputError(f"{name}: entries above the diagonal must be NaN (A_i^j is defined for j <= i only)")
    else:
        if not isinstance(matrix, (list, tuple)):
            raise InputTypeError(f"{name}: expected a list of rows [[A_1^1], [A_2^1, A_2^2], ...], got {type(matrix).__name__}")
        n = len(matrix)
        rows = []
        for i, row in enumerate(matrix):
            if not isinstance(row, (list, tuple, np.ndarray)):
                raise InputTypeError(f"{name}: row {i + 1} must be a list of accuracies, got {type(row).__name__}")
            row = list(row)
            if len(row) == n and n != i + 1:  # square form: nulls/NaN above the diagonal
                tail = row[i + 1:]
                if any(v is not None and not (isinstance(v, float) and math.isnan(v)) for v in tail):
                    raise InputError(
                        f"{name}: row {i + 1} has {len(row)} entries with values above the diagonal; "
                        f"expected a lower-triangular matrix (row i lists A_i^1..A_i^i)")
                row = row[: i + 1]
            if len(row) != i + 1:
                raise InputError(
                    f"{name}: row {i + 1} has {len(row)} entries, expected {i + 1} "
                    f"(a lower-triangular matrix: row i lists A_i^1..A_i^i)")
            if any(v is None for v in row):
                raise InputError(f"{name}: row {i + 1} has a null entry on or below the diagonal")
            bad = next((v for v in row if isinstance(v, (str, bytes, bool, np.bool_))), None)
            if bad is not None:  # "0.9" or true would silently become a number
                raise InputTypeError(f"{name}: row {i + 1} must hold numbers, found {bad!r} ({type(bad).__name__})")
            try:
                vals = np.asarray(row, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise InputTypeError(f"{name}: row {i + 1} must hold numbers, got {row!r}") from exc
            rows.append(check_array(vals, f"{name} row {i + 1}", ndim=1, kind="float", finite=False))
    n = len(rows)
    if n == 0:
        raise InputError(f"{name}: expected at least one session (row), got an empty matrix")
    out = np.full((n, n), np.nan)
    for i, r in enumerate(rows):
        if not np.all(np.isfinite(r)):
            raise InputError(f"{name}: row {i + 1} has NaN/inf on or below the diagonal")
        out[i, : i + 1] = r
    low = out[np.tril_indices(n)]
    if low.min() < 0 or low.max() > 1:
        bad = low[(low < 0) | (low > 1)][0]
        hint = "; these look like percentages: divide by 100" if low.min() >= 0 and low.max() <= 100 else ""
        raise InputError(f"{name}: accuracies must be fractions in [0, 1], found {bad:g}{hint}")
    return out


def _check_sizes(session_sizes: Any, n: int) -> np.ndarray:
    s = check_array(session_sizes, "session_sizes", ndim=1, kind="integer")
    if len(s) != n:
        raise InputError(f"session_sizes: expected {n} entries (one per session of the matrix), got {len(s)}")
    if s.size and s.min() < 1:
        raise InputError(f"session_sizes: every session needs at least one class, found {int(s.min())}")
    return s.astype(np.float64)


def session_sizes_uniform(*, base_classes: int, way: int, num_sessions: int) -> np.ndarray:
    """Classes per session for the usual setting: ``[base_classes, way, way, ...]``, shape (n,).

    >>> session_sizes_uniform(base_classes=60, way=5, num_sessions=3).tolist()
    [60, 5, 5]
    """
    base_classes = check_value(base_classes, "base_classes", type=int, low=0, low_open=True)
    way = check_value(way, "way", type=int, low=0, low_open=True)
    num_sessions = check_value(num_sessions, "num_sessions", type=int, low=0, low_open=True)
    return np.asarray([base_classes] + [way] * (num_sessions - 1), dtype=np.int64)


# ------------------------------------------------------------------------------ accuracy matrix
class AccuracyMatrix(NamedTuple):
    """:func:`accuracy_matrix`'s result: ``matrix`` (lower-triangular rows, ``matrix[i][j]`` =
    A_{i+1}^{j+1}) and ``sample_counts`` (test samples behind each entry, same layout)."""

    matrix: np.ndarray
    sample_counts: np.ndarray


def accuracy_matrix(
    y_true: Sequence[Any],
    y_pred: Sequence[Any],
    *,
    session_classes: Sequence[Sequence[int]],
) -> AccuracyMatrix:
    """The accuracy matrix from per-session predictions.

    Parameters
    ----------
    y_true : sequence of n int arrays, the i-th of shape (N_i,)
        True labels of the test pool evaluated after session i (every test sample of the classes
        seen up to session i).
    y_pred : sequence of n int arrays, shapes (N_i,)
        Predicted labels after session i.
    session_classes : sequence of n class-id lists
        The classes each session introduces; they must not overlap.

    Returns
    -------
    acc : ndarray, shape (n, n)
        ``acc[i, j]`` = accuracy after session i on the test samples of session j's classes
        (j <= i), NaN above the diagonal.
    counts : ndarray of int, shape (n, n)
        Number of those test samples (0 above the diagonal).

    A test label from a class not seen by session i is an error; a session with no test samples
    is an error (its accuracy is undefined). Individual classes may lack test samples: accuracy is
    per sample, so such a class simply contributes nothing.

    >>> acc, cnt = accuracy_matrix([[0, 1], [0, 1, 2, 2]], [[0, 1], [0, 2, 2, 0]],
    ...                            session_classes=[[0, 1], [2]])
    >>> acc.tolist()[1], cnt.tolist()
    ([0.5, 0.5], [[2, 0], [2, 2]])
    """
    if not isinstance(session_classes, (list, tuple)) or not session_classes:
        raise InputError("session_classes: expected a non-empty list of class lists, one per session")
    cls_session: dict[int, int] = {}
    for j, cl in enumerate(session_classes):
        c = check_array(cl, f"session_classes[{j}]", ndim=1, kind="integer", allow_empty=False)
        for k in c.tolist():
            if k in cls_session:
                raise InputError(
                    f"session_classes: class {k} appears in session {cls_session[k] + 1} and session {j + 1}; "
                    "sessions must not overlap")
            cls_session[k] = j
    n = len(session_classes)
    if len(y_true) != n or len(y_pred) != n:
        raise InputError(f"expected one y_true and one y_pred per session ({n}), got {len(y_true)} and {len(y_pred)}")
    max_cls = max(cls_session) + 1
    lut = np.full(max_cls, -1, dtype=np.int64)
    for k, j in cls_session.items():
        lut[k] = j
    acc = np.full((n, n), np.nan)
    counts = np.zeros((n, n), dtype=np.int64)
    for i in range(n):
        t = check_labels(y_true[i], f"y_true[{i}]")
        p = check_labels(y_pred[i], f"y_pred[{i}]")
        if len(t) != len(p):
            raise InputError(f"session {i + 1}: y_true has {len(t)} entries but y_pred has {len(p)}")
        sess = np.where(t < max_cls, lut[np.minimum(t, max_cls - 1)], -1)
        bad = (sess < 0) | (sess > i)
        if bad.any():
            raise InputError(
                f"session {i + 1}: test label {int(t[bad][0])} belongs to no session up to {i + 1}; "
                "the test pool after session i holds the classes of sessions 1..i only")
        hit = (t == p).astype(np.int64)
        cnt = np.bincount(sess, minlength=n)[: i + 1]
        if np.any(cnt == 0):
            j = int(np.flatnonzero(cnt == 0)[0])
            raise InputError(f"session {i + 1}: no test samples of session {j + 1}'s classes; its accuracy is undefined")
        cor = np.bincount(sess, weights=hit, minlength=n)[: i + 1]
        acc[i, : i + 1] = cor / cnt
        counts[i, : i + 1] = cnt
    return AccuracyMatrix(acc, counts)


# ------------------------------------------------------------------------------------- gAcc
def _abcd(acc: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    n = acc.shape[0]
    a = sizes[0] * acc[:, 0]
    b = np.array([np.dot(sizes[1: i + 1], acc[i, 1: i + 1]) for i in range(n)])
    d = np.array([sizes[1: i + 1].sum() for i in range(n)])
    return a, b, float(sizes[0]), d


def gacc_at(matrix: Any, alpha: float, *, session_sizes: Any) -> np.ndarray:
    """gAcc_i(α) for every session (paper Eq. 4), shape (n,).

    Parameters
    ----------
    matrix : accuracy matrix, see :func:`check_accuracy_matrix`
    alpha : float in [0, 1]
        Weight of the base classes: 0 = novel classes only, n_nov/n_1 = task-wise mean (tAcc_i),
        1 = class-weighted mean (aAcc_i).
    session_sizes : int array, shape (n,)
        Number of classes of each session (n_1 = base classes).

    >>> gacc_at([[0.9], [0.9, 0.1]], 1.0, session_sizes=[4, 1]).round(2).tolist()
    [0.9, 0.74]
    """
    acc = check_accuracy_matrix(matrix)
    return _gacc_at(acc, check_value(alpha, "alpha", low=0, high=1), _check_sizes(session_sizes, acc.shape[0]))


def _gacc_at(acc: np.ndarray, al: float, sizes: np.ndarray) -> np.ndarray:
    """:func:`gacc_at` of a checked matrix, weight and sizes (the curve's points: checked once for all)."""
    a, b, c, d = _abcd(acc, sizes)
    out = np.empty(acc.shape[0])
    out[0] = acc[0, 0]
    if acc.shape[0] > 1:
        out[1:] = (al * a[1:] + b[1:]) / (al * c + d[1:])
    return out


def gacc_sessions(matrix: Any, *, session_sizes: Any) -> np.ndarray:
    """gAcc_i = ∫_0^1 gAcc_i(α) dα per session, by the closed form (paper Eq. 5), shape (n,).

    With a = n_1 A_i^1, b = Σ_{j≥2} n_j A_i^j, c = n_1, d = Σ_{j≥2} n_j:
    gAcc_i = a/c + (bc − ad)/c² · ln(1 + c/d); gAcc_1 = A_1^1.

    >>> gacc_sessions([[0.8], [0.8, 0.0]], session_sizes=[60, 5]).round(4).tolist()
    [0.8, 0.629]
    """
    acc = check_accuracy_matrix(matrix)
    return _gacc_sessions(acc, _check_sizes(session_sizes, acc.shape[0]))


def _gacc_sessions(acc: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """:func:`gacc_sessions` of a checked matrix and sizes."""
    a, b, c, d = _abcd(acc, sizes)
    out = np.empty(acc.shape[0])
    out[0] = acc[0, 0]
    if acc.shape[0] > 1:
        out[1:] = a[1:] / c + (b[1:] * c - a[1:] * d[1:]) / (c * c) * np.log1p(c / d[1:])
    return out


def gacc_compat(matrix: Any, *, base_classes: int, way: int) -> dict[str, Any]:
    """The authors' public gAcc (``get_gacc`` in iSEE-Laboratory/Revisting_FSCIL ``models/metric.py``).

    β runs over the integers 0..R with R = ⌊base_classes / way⌋; at each β the per-session value is
    (β A_i^1 + Σ_{j≥2} A_i^j) / (i − 1 + β), and A_1^1 for the base-only session except 0 at β = 0;
    the session mean is integrated with a trapezoid over β and divided by R. Inputs are fractions
    (the original code takes percentages and divides the area by 100).

    Returns
    -------
    dict with ``beta`` (R + 1,), ``alpha`` = β·way/base_classes (R + 1,), ``curve`` (R + 1,) the
    session-averaged values, ``sessions`` (n,) each session's trapezoid area / R, and ``gacc``.

    >>> round(gacc_compat([[0.9]], base_classes=60, way=5)["gacc"], 6)  # base-only session
    0.8625
    """
    acc = check_accuracy_matrix(matrix)
    base_classes = check_value(base_classes, "base_classes", type=int, low=0, low_open=True)
    way = check_value(way, "way", type=int, low=0, low_open=True)
    ratio = int(base_classes // way)
    if ratio < 1:
        raise InputError(f"compat mode needs base_classes >= way (the β grid is 0..floor(base/way)), got {base_classes} < {way}")
    n = acc.shape[0]
    beta = np.arange(ratio + 1, dtype=np.float64)
    per = np.empty((n, ratio + 1))
    per[0] = acc[0, 0]
    per[0, 0] = 0.0
    for i in range(1, n):
        per[i] = (beta * acc[i, 0] + acc[i, 1: i + 1].sum()) / (i + beta)
    # trapezoid on a unit grid, divided by the grid length
    area = (per[:, 1:] + per[:, :-1]).sum(axis=1) / 2.0 / ratio
    curve = per.mean(axis=0)
    return {"beta": beta, "alpha": beta * way / base_classes, "curve": curve, "sessions": area,
            "gacc": float(area.mean())}


# --------------------------------------------------------------------------------- all scores
@dataclass
class IncrementalScores:
    """Every FSCIL number for one run; ``to_dict()`` is the CLI's JSON object.

    Attributes
    ----------
    aacc, lacc, tacc, gacc, pd, kr : float
        Mean session accuracy, last-session accuracy, mean task-wise accuracy, generalized accuracy
        (AUC over α, averaged over sessions), performance drop, knowledge retention.
    sessions : list of dict
        Per session: ``session`` (1-based), ``aacc``, ``tacc``, ``gacc``, ``base_acc`` (A_i^1),
        ``novel_acc`` (accuracy over the novel classes seen so far; NaN for session 1).
    curve : list of dict
        ``{"alpha", "gacc"}``: the session-averaged gAcc(α) curve.
    matrix : list of lists
        The accuracy matrix in ragged form.
    settings : dict
        ``mode``, ``session_sizes``, ``weights`` ("samples" or "classes") and, with predictions,
        ``sample_counts``.
    """

    aacc: float
    lacc: float
    tacc: float
    gacc: float
    pd: float
    kr: float
    sessions: list[dict[str, Any]]
    curve: list[dict[str, float]]
    matrix: list[list[float]]
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def incremental_scores(
    matrix: Any,
    *,
    session_sizes: Any,
    sample_counts: Any | None = None,
    mode: Mode = "exact",
    num_alphas: int = 101,
    way: int | None = None,
) -> IncrementalScores:
    """aAcc, lAcc, tAcc, gAcc (with its curve), PD, KR and per-session numbers from an accuracy matrix.

    Parameters
    ----------
    matrix : accuracy matrix (see :func:`check_accuracy_matrix`), n sessions
    session_sizes : int array, shape (n,)
        Classes per session; ``session_sizes[0]`` = |Y_1|.
    sample_counts : int array, shape (n, n), optional
        Test samples behind each A_i^j (from :func:`accuracy_matrix`). With them aAcc_i is the
        sample-weighted accuracy Σ_j N_ij A_i^j / Σ_j N_ij; without, the class-weighted mean
        Σ_j n_j A_i^j / Σ_j n_j (identical when every class has equally many test samples).
    mode : {"exact", "compat"}
        ``"exact"``: gAcc by the closed-form integral (Eq. 5), curve on ``num_alphas`` points of
        [0, 1]. ``"compat"``: the authors' public formula (:func:`gacc_compat`); needs equal-size
        novel sessions; the curve is on the β grid (alpha = β·way/base).
    num_alphas : int
        Points of the reported curve in exact mode (the gAcc value never depends on it).
    way : int, optional
        Classes per novel session, for ``"compat"`` when the matrix has only the base session
        (the β grid depends on it); otherwise it must match ``session_sizes``.

    Equations: aAcc = mean_i aAcc_i, lAcc = aAcc_n, tAcc_i = mean_{j≤i} A_i^j, tAcc = mean_i tAcc_i,
    gAcc = mean_i gAcc_i, PD = A_1^1 − A_n^1, KR = A_n^1/A_1^1.

    >>> s = incremental_scores([[0.9], [0.8, 0.4]], session_sizes=[2, 1])
    >>> round(s.aacc, 4), round(s.tacc, 4), round(s.pd, 4), round(s.kr, 4)
    (0.7833, 0.75, 0.1, 0.8889)
    """
    acc = check_accuracy_matrix(matrix)
    n = acc.shape[0]
    sizes = _check_sizes(session_sizes, n)
    check_value(mode, "mode", choices=MODES)
    num_alphas = check_value(num_alphas, "num_alphas", type=int, low=2)
    low = np.tril(np.ones((n, n), dtype=bool))
    if sample_counts is not None:
        w = check_array(sample_counts, "sample_counts", ndim=2, kind="integer")
        if w.shape != (n, n):
            raise InputError(f"sample_counts: expected shape {(n, n)}, got {w.shape}")
        if np.any(w[low] < 1):
            raise InputError("sample_counts: every A_i^j with j <= i needs at least one test sample")
        w = w.astype(np.float64)
        weights = "samples"
    else:
        w = np.tile(sizes, (n, 1))
        weights = "classes"
    w = np.where(low, w, 0.0)
    a0 = np.where(low, acc, 0.0)
    aacc_i = (w * a0).sum(axis=1) / w.sum(axis=1)
    tacc_i = a0.sum(axis=1) / np.arange(1, n + 1)
    novel_w = w[:, 1:].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        novel_i = np.where(novel_w > 0, (w[:, 1:] * a0[:, 1:]).sum(axis=1) / np.where(novel_w > 0, novel_w, 1), np.nan)
    base_i = acc[:, 0]
    settings: dict[str, Any] = {"mode": mode, "session_sizes": sizes.astype(int).tolist(), "weights": weights}
    if sample_counts is not None:
        settings["sample_counts"] = w.astype(int).tolist()
    if mode == "exact":
        g_i = _gacc_sessions(acc, sizes)
        alphas = np.linspace(0.0, 1.0, int(num_alphas))
        curve_vals = np.array([_gacc_at(acc, float(al), sizes).mean() for al in alphas])
    else:
        novel = sizes[1:]
        if novel.size and not np.all(novel == novel[0]):
            raise InputError(f"compat mode needs equally many classes in every novel session, got {novel.astype(int).tolist()}")
        if novel.size:
            if way is not None and way != int(novel[0]):
                raise InputError(f"way: {way} contradicts session_sizes (novel sessions of {int(novel[0])} classes)")
            way = int(novel[0])
        elif way is None:
            raise InputError("way: compat mode on a base-only matrix needs way (its beta grid is 0..floor(base/way))")
        comp = gacc_compat(acc, base_classes=int(sizes[0]), way=way)
        g_i = comp["sessions"]
        alphas = comp["alpha"]
        curve_vals = comp["curve"]
        settings["way"] = way
        settings["beta_max"] = int(comp["beta"][-1])
    a11, an1 = acc[0, 0], acc[-1, 0]
    sessions = [
        {"session": i + 1, "aacc": float(aacc_i[i]), "tacc": float(tacc_i[i]), "gacc": float(g_i[i]),
         "base_acc": float(base_i[i]), "novel_acc": float(novel_i[i])}
        for i in range(n)
    ]
    return IncrementalScores(
        aacc=float(aacc_i.mean()),
        lacc=float(aacc_i[-1]),
        tacc=float(tacc_i.mean()),
        gacc=float(np.mean(g_i)),
        pd=float(a11 - an1),
        kr=float(an1 / a11) if a11 > 0 else math.nan,
        sessions=sessions,
        curve=[{"alpha": float(al), "gacc": float(v)} for al, v in zip(alphas, curve_vals)],
        matrix=[acc[i, : i + 1].tolist() for i in range(n)],
        settings=settings,
    )


# ----------------------------------------------------------------------------- corner cases
def corner_case_matrix(case: CornerCase, *, num_sessions: int, base_accuracy: float = 0.85) -> np.ndarray:
    """The paper's reference corner cases (§3.3) as accuracy matrices, shape (n, n).

    ``"lazy"``: keeps the base accuracy, learns nothing new (A_i^1 = base_accuracy, A_i^j = 0 for
    j > 1). ``"greedy"``: A_1^1 = base_accuracy, A_i^i = 1 for i > 1, everything else 0.
    ``"greedy_nf"``: greedy without forgetting of novel classes (A_i^j = 1 for 1 < j <= i).

    >>> corner_case_matrix("greedy_nf", num_sessions=3)[2].tolist()
    [0.0, 1.0, 1.0]
    """
    check_value(case, "case", choices=CORNER_CASES)
    num_sessions = check_value(num_sessions, "num_sessions", type=int, low=0, low_open=True)
    base = check_value(base_accuracy, "base_accuracy", low=0, high=1)
    n = int(num_sessions)
    m = np.full((n, n), np.nan)
    m[np.tril_indices(n)] = 0.0
    m[0, 0] = base
    if case == "lazy":
        m[:, 0] = base
    elif case == "greedy":
        for i in range(1, n):
            m[i, i] = 1.0
    else:
        for i in range(1, n):
            m[i, 1: i + 1] = 1.0
    return m
