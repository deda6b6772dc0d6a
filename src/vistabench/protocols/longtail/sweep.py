"""The evolving test sweep of Fang et al. (docs/longtail.md): building, reading and checking sweep
files, and scoring predictions against them (the arithmetic is :func:`vistabench.metrics.longtail.sweep_scores`).

A sweep file fixes, for T peak positions alpha_t, the per-class test counts N_c(alpha_t), the
divergence delta_t from the training distribution, and R drawn test sets (pool indices, class 0's
draws first, then class 1's, ...). Scoring is pure arithmetic on the predictions' correctness vector.

A sweep is checked once, where it enters: :func:`build_sweep`, :func:`read_sweep` and
:func:`validate_sweep` are the only makers of a :class:`Sweep` (a read-only mapping of the sealed
sweep-file content), and whatever takes a :class:`Sweep` (:func:`score_sweep`, :func:`write_sweep`)
uses it without checking its structure again. A plain mapping is checked on the way in.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..._validation import check_array, check_labels, check_value
from ...data.predictions import Predictions
from ...data.splits import content_hash, read_split, seal, write_split
from ...errors import InputError, InputTypeError
from ...metrics import longtail as M

SWEEP_KIND = "longtail-sweep"
SWEEP_VERSION = 1
SWEEP_KEYS = {"kind", "version", "seed", "num_classes", "train_counts", "test_imbalance", "n_max",
              "repeats", "pool_size", "points", "sha256"}
POINT_KEYS = {"alpha", "divergence", "class_counts", "samples"}
SCALARS = ("auc", "avg", "std", "max", "min", "drop_ratio", "balanced", "many", "medium", "few",
           "worst_class")


_MAKER = object()  # only this module's makers hold it: a Sweep is always a checked one


class Sweep(Mapping[str, Any]):
    """A checked, sealed sweep: a read-only mapping of the sweep-file content (keys :data:`SWEEP_KEYS`).

    Made only by :func:`build_sweep`, :func:`read_sweep` and :func:`validate_sweep`, which check it;
    functions that take one trust it. Its values are the sealed content itself (``sweep["sha256"]``
    is the hash of the rest): treat them as read-only, and use :meth:`to_dict` for an editable copy
    (which :func:`validate_sweep` checks again).
    """

    __slots__ = ("_content", "_scored")

    def __init__(self, content: dict[str, Any], *, _maker: object = None) -> None:
        if _maker is not _MAKER:
            raise InputTypeError("Sweep: made by build_sweep, read_sweep or validate_sweep (which check it), "
                                 "not directly")
        object.__setattr__(self, "_content", content)
        object.__setattr__(self, "_scored", None)

    def __getitem__(self, key: str) -> Any:
        return self._content[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._content)

    def __len__(self) -> int:
        return len(self._content)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Sweep is read-only (to_dict() gives an editable copy)")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:  # pickling/copying checks the content again
        return validate_sweep, (self.to_dict(),)

    def __repr__(self) -> str:
        c = self._content
        return (f"Sweep(num_classes={c['num_classes']}, points={len(c['points'])}, repeats={c['repeats']}, "
                f"sha256={c['sha256'][:12]}...)")

    def to_dict(self) -> dict[str, Any]:
        """An editable deep copy of the content."""
        return copy.deepcopy(self._content)

    def _scoring_content(self) -> dict[str, Any]:
        """The content with each drawn set as a read-only int64 array, converted once (scoring reads
        every set on every pass: the list-to-array conversion was most of a pass's time)."""
        if self._scored is None:
            points = []
            for pt in self._content["points"]:
                sets = [np.asarray(s, dtype=np.int64) for s in pt["samples"]]
                for a in sets:
                    a.flags.writeable = False
                points.append({**pt, "samples": sets})
            object.__setattr__(self, "_scored", {**self._content, "points": points})
        return self._scored


def _check_train_counts(train_counts: Any, num_classes: int) -> None:
    counts = check_array(train_counts, "train_counts", ndim=1, kind="integer", allow_empty=False)
    if np.any(counts <= 0):
        bad = np.flatnonzero(counts <= 0)[:10].tolist()
        raise InputError(f"train_counts: every class needs at least one training sample; classes {bad} have none")
    if len(counts) != num_classes:
        raise InputError(f"train_counts: expected {num_classes} entries, got {len(counts)}")


def _class_pools(pool_labels: np.ndarray, C: int) -> list[np.ndarray]:
    order = np.argsort(pool_labels, kind="stable")
    bounds = np.searchsorted(pool_labels[order], np.arange(C + 1))
    return [order[bounds[c]:bounds[c + 1]] for c in range(C)]


def _read_pool_labels(path: str | Path) -> np.ndarray:
    """The ``labels`` array of a ``.npz`` file (a predictions file works)."""
    from ...data.predictions import read_npz_arrays

    arrays = read_npz_arrays(path, "pool_labels")
    if "labels" not in arrays:
        raise InputError(f"pool_labels {str(path)!r}: no array 'labels' (found {sorted(arrays)})")
    return arrays["labels"]


def _read_train_counts(path: str | Path) -> list[Any]:
    """A JSON file holding the list of training counts by class index."""
    from ...jsonutil import read_json

    counts = read_json(path, what="train_counts")
    if not isinstance(counts, list):
        raise InputError(f"train_counts {str(path)!r}: expected a JSON list of counts, got {type(counts).__name__}")
    return counts


def build_sweep(
    pool_labels: np.ndarray | str | Path,
    train_counts: np.ndarray | str | Path,
    *,
    test_imbalance: float,
    n_max: int | None = None,
    points: int = 10,
    repeats: int = 5,
    seed: int = 0,
) -> Sweep:
    """Build a sealed sweep (the content of a sweep file), checked: pass it on as it is.

    Parameters
    ----------
    pool_labels : array of int, shape (N,), or the path of a ``.npz`` with a ``labels`` array
        Labels of the test pool, in the order of the predictions file (a predictions file works).
    train_counts : array of int, shape (C,), or the path of a JSON file holding that list
        Training samples per class, by class index; defines positions and the distribution p.
    test_imbalance : float
        rho_t > 1 (values < 1 read as 1/rho_t).
    n_max : int, optional
        n_max of the test counts (Eq. 2); default: the smallest class pool, so that no class is
        drawn with replacement.
    points, repeats : int
        T peaks and R test sets per peak.
    seed : int
        Seeds the draws: the same inputs and seed give a byte-identical file.
    """
    if isinstance(train_counts, (str, Path)):
        train_counts = _read_train_counts(train_counts)
    if isinstance(pool_labels, (str, Path)):
        pool_labels = _read_pool_labels(pool_labels)
    design = M.sweep_design(train_counts, test_imbalance=test_imbalance, points=points)  # checks them
    counts, rank, rho_t = design.train_counts, design.ranking, design.test_imbalance
    C = len(counts)
    labels = check_labels(pool_labels, "pool_labels", num_classes=C)
    R = check_value(repeats, "repeats", type=int, low=0, low_open=True)
    pools = _class_pools(labels, C)
    sizes = np.array([len(p) for p in pools])
    if np.any(sizes == 0):
        raise InputError(f"pool_labels: classes {np.flatnonzero(sizes == 0)[:10].tolist()} have no test sample in the pool")
    n_max = int(sizes.min()) if n_max is None else check_value(n_max, "n_max", type=int, low=0, low_open=True)
    rng = np.random.default_rng(check_value(seed, "seed", type=int, low=0))
    out_points = []
    short: set[int] = set()
    for alpha, divergence in zip(design.alphas, design.divergences):
        class_counts = np.empty(C, dtype=np.int64)
        class_counts[rank] = M.sweep_class_counts(C, test_imbalance=rho_t, n_max=n_max, alpha=float(alpha))
        samples = []
        for _ in range(R):
            drawn = []
            for c in range(C):
                n, pool = int(class_counts[c]), pools[c]
                if n <= len(pool):
                    drawn.append(pool[rng.permutation(len(pool))[:n]])
                else:
                    short.add(c)
                    drawn.append(pool[rng.integers(0, len(pool), size=n)])
            samples.append(np.concatenate(drawn).tolist())
        out_points.append({"alpha": float(alpha), "divergence": float(divergence),
                           "class_counts": class_counts.tolist(), "samples": samples})
    if short:
        warnings.warn(f"classes {sorted(short)[:10]} have fewer pool samples than the sweep needs: "
                      "drawn with replacement", UserWarning, stacklevel=2)
    return Sweep(seal({
        "kind": SWEEP_KIND, "version": SWEEP_VERSION, "seed": int(seed), "num_classes": C,
        "train_counts": counts.tolist(), "test_imbalance": rho_t, "n_max": int(n_max),
        "repeats": int(R), "pool_size": int(len(labels)), "points": out_points,
    }), _maker=_MAKER)


def write_sweep(path: str | Path, sweep: Sweep | Mapping[str, Any]) -> Sweep:
    """Write a sweep file (a plain mapping is checked first); returns the :class:`Sweep` written."""
    sw = validate_sweep(sweep)
    write_split(path, dict(sw))
    return sw


def read_sweep(path: str | Path) -> Sweep:
    """Read a sweep file: hash verified, structure checked (once: the :class:`Sweep` is passed on)."""
    content = read_split(path, kind=SWEEP_KIND, what="sweep file")
    return _checked(content, where=f"sweep file {str(path)!r}")


def train_imbalance(train_counts: Sequence[int]) -> float | None:
    """ρ_trn of training counts: the largest class count over the smallest (None without a non-empty class)."""
    counts = [int(c) for c in train_counts]
    return max(counts) / min(counts) if counts and min(counts) > 0 else None


def sweep_settings(sweep: Sweep | Mapping[str, Any]) -> dict[str, Any]:
    """What a record of predictions scored against ``sweep`` stores of it in its settings: the same
    keys a ``longtail run`` record has, ``imbalance`` (ρ_trn) being max / min of the training counts."""
    return {"imbalance": train_imbalance(sweep["train_counts"]),
            "train_counts": sweep["train_counts"], "test_imbalance": sweep["test_imbalance"],
            "points": len(sweep["points"]), "repeats": sweep["repeats"], "sweep_sha256": sweep["sha256"]}


def validate_sweep(sweep: Sweep | Mapping[str, Any], *, where: str = "sweep") -> Sweep:
    """A :class:`Sweep` as it is; a plain mapping (sweep-file content) checked — structure and
    ``sha256`` — and returned as a :class:`Sweep` of a copy of it."""
    if isinstance(sweep, Sweep):
        return sweep
    if not isinstance(sweep, Mapping):
        raise InputTypeError(f"{where}: expected a sweep (sweep-file content), got {type(sweep).__name__}")
    content = copy.deepcopy(dict(sweep))
    sw = _checked(content, where=where)
    if content_hash(content) != content["sha256"]:
        raise InputError(f"{where}: sha256 mismatch — the content was modified after it was sealed")
    return sw


def _checked(sweep: dict[str, Any], *, where: str) -> Sweep:
    if set(sweep) not in (SWEEP_KEYS, SWEEP_KEYS - {"pool_size"}):  # older files lack pool_size
        raise InputError(f"{where}: expected keys {sorted(SWEEP_KEYS)}, found {sorted(sweep)}")
    if sweep["version"] != SWEEP_VERSION:
        raise InputError(f"{where}: unsupported version {sweep['version']!r} (this vistabench reads {SWEEP_VERSION})")
    C = sweep["num_classes"]
    _check_train_counts(sweep["train_counts"], C)
    for i, pt in enumerate(sweep["points"]):
        if set(pt) != POINT_KEYS:
            raise InputError(f"{where}: point {i} has keys {sorted(pt)}, expected {sorted(POINT_KEYS)}")
        total = sum(pt["class_counts"])
        if len(pt["class_counts"]) != C or len(pt["samples"]) != sweep["repeats"] or \
                any(len(s) != total for s in pt["samples"]):
            raise InputError(f"{where}: point {i} is inconsistent (class_counts / samples lengths)")
    return Sweep(sweep, _maker=_MAKER)


def _check_predictions(pred: Predictions, sweep: Mapping[str, Any]) -> None:
    C = sweep["num_classes"]
    if pred.num_columns is not None and pred.num_columns != C:
        raise InputError(f"predictions: {pred.kind} has {pred.num_columns} columns, the sweep has {C} classes")


def score_sweep(
    pred: Predictions,
    sweep: Sweep | Mapping[str, Any],
    *,
    exact: bool = False,
    convention: Literal["tade", "oltr"] = "tade",
    bootstrap: int = 0,
    confidence: float = 0.95,
    seed: int = 0,
    set_predictions: list[list[np.ndarray]] | None = None,
) -> dict[str, Any]:
    """Score a predictions file's content over the sweep's test pool.

    The pipeline step: checks the predictions' shape against the sweep (a plain mapping is first
    checked by :func:`validate_sweep`; a :class:`Sweep` already was), then calls
    :func:`vistabench.metrics.longtail.sweep_scores` (which documents the options and the result).
    ``set_predictions[t][r]``: for methods that adapt to each unlabelled test set (test-time
    aggregation), the predicted labels of the drawn set ``points[t]["samples"][r]``, in its order;
    they become ``sweep_scores``'s ``set_correct``.
    """
    content = validate_sweep(sweep)._scoring_content()
    _check_predictions(pred, content)
    set_correct = None if set_predictions is None else _set_correct(pred.labels, content, set_predictions)
    return M.sweep_scores(pred.labels, pred.correct(), content, exact=exact, convention=convention,
                          bootstrap=bootstrap, confidence=confidence, seed=seed, set_correct=set_correct)


def _set_correct(labels: np.ndarray, sweep: Mapping[str, Any], set_predictions: Any) -> list[list[np.ndarray]]:
    points = sweep["points"]
    if len(set_predictions) != len(points):
        raise InputError(f"set_predictions: expected {len(points)} points, got {len(set_predictions)}")
    out = []
    for t, (pt, preds) in enumerate(zip(points, set_predictions)):
        if len(preds) != len(pt["samples"]):
            raise InputError(f"set_predictions: point {t} needs {len(pt['samples'])} sets, got {len(preds)}")
        row = []
        for s, p in zip(pt["samples"], preds):
            a, p = np.asarray(s, dtype=np.int64), np.asarray(p)
            if p.shape != a.shape:
                raise InputError(f"set_predictions: point {t} has a set of {len(a)} samples but {p.shape} predictions")
            row.append(p == labels[a])
        out.append(row)
    return out
