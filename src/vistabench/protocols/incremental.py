"""Few-shot class-incremental protocol (docs/incremental.md): sessions → per-session predictions → scores.

Pipeline: :func:`~vistabench.protocols.incremental_sessions.build_sessions` (or a preset, or the
literature's index lists) writes a sessions file; a learner trains on session 1, then on each novel
session's few shots, and after every session predicts the test pool of the classes seen so far
(one predictions file per session); :func:`score_predictions` turns those files into the accuracy
matrix and every metric of :mod:`vistabench.metrics.incremental`; :func:`run` does all of it with a
reference learner and writes a record to the results store.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import numpy as np

from ..data.predictions import Predictions, load_predictions, save_predictions
from ..errors import InputError
from ..metrics.incremental import IncrementalScores, Mode, accuracy_matrix, corner_case_matrix, incremental_scores
from ..store import Record, ResultsStore
from .incremental_sessions import (  # noqa: F401  (re-exported: the protocol's public API)
    PRESETS,
    build_sessions,
    check_sessions,
    image_folder_paths,
    load_sessions,
    preset_settings,
    read_index_lists,
    session_test_pool,
    sessions_from_index_lists,
    write_sessions,
)

PROTOCOL = "incremental"

__all__ = [
    "PRESETS", "build_sessions", "load_sessions", "write_sessions", "read_index_lists",
    "sessions_from_index_lists", "image_folder_paths", "session_test_pool", "predicted_over_seen",
    "score_predictions", "score_prediction_files", "reference_scores", "run", "score", "to_record", "record_for",
]


def session_sizes(sessions: dict[str, Any]) -> list[int]:
    return [len(cl) for cl in sessions["classes"]]


def predicted_over_seen(p: Predictions, seen: Sequence[int]) -> np.ndarray:
    """Predicted labels with the arg-max restricted to the classes seen so far, shape (N,).

    Logit/probability columns name classes through ``p.classes`` (or are the class ids 0..C−1);
    columns of classes not seen yet are ignored, as in the FSCIL literature (CEC, FACT, SAVC
    evaluate ``logits[:, :num_seen_classes]``). ``pred`` files are taken as they are.
    """
    if p.kind == "pred":
        return p.values
    cols = p.classes if p.classes is not None else np.arange(p.values.shape[1])
    keep = np.isin(cols, np.asarray(seen))
    missing = sorted(set(int(c) for c in seen) - set(cols[keep].tolist()))
    if missing:
        raise InputError(f"{p.kind}: no column for seen classes {missing[:5]} (give 'classes' naming the columns)")
    sub = p.values[:, keep]
    if len(sub) == 0:
        return np.zeros(0, dtype=np.int64)
    return cols[keep][np.argmax(sub, axis=1)].astype(np.int64)


def score_predictions(
    predictions: Sequence[Predictions],
    sessions: dict[str, Any],
    *,
    mode: Mode = "exact",
    names: Sequence[str] | None = None,
) -> IncrementalScores:
    """Score one predictions object per session against a sessions dict.

    Predictions i must cover the test pool after session i (every test sample of the classes of
    sessions 1..i, in the sessions file's order); when the sessions file carries its test pool, the
    labels are checked against it. aAcc_i is sample-weighted.
    """
    check_sessions(sessions)
    n = len(sessions["classes"])
    if len(predictions) != n:
        raise InputError(f"--predictions: the sessions file has {n} sessions, got {len(predictions)} predictions files")
    names = list(names) if names is not None else [f"predictions {i + 1}" for i in range(n)]
    y_true, y_pred = [], []
    for i, p in enumerate(predictions):
        seen = [c for cl in sessions["classes"][: i + 1] for c in cl]
        if sessions.get("test_labels") is not None:
            _, lab = session_test_pool(sessions, i + 1)
            if len(p.labels) != len(lab):
                raise InputError(f"{names[i]}: {len(p.labels)} samples, expected {len(lab)} "
                                 f"(the test pool of sessions 1..{i + 1} in the sessions file)")
            if not np.array_equal(p.labels, lab):
                k = int(np.flatnonzero(p.labels != lab)[0])
                raise InputError(f"{names[i]}: label {int(p.labels[k])} at position {k} differs from the "
                                 f"sessions file's test pool ({int(lab[k])}); keep the pool's order")
        try:
            pred = predicted_over_seen(p, seen)
        except InputError as exc:
            raise InputError(f"{names[i]}: {exc}") from exc
        y_true.append(p.labels)
        y_pred.append(pred)
    acc, counts = accuracy_matrix(y_true, y_pred, session_classes=sessions["classes"])
    return incremental_scores(acc, session_sizes=session_sizes(sessions), sample_counts=counts, mode=mode)


def score_prediction_files(
    paths: Sequence[str | os.PathLike[str]], sessions: dict[str, Any], *, mode: Mode = "exact"
) -> IncrementalScores:
    """:func:`score_predictions` on ``.npz`` predictions files, one per session, in session order."""
    preds = [load_predictions(p) for p in paths]
    return score_predictions(preds, sessions, mode=mode, names=[f"predictions file {str(p)!r}" for p in paths])


def reference_scores(
    *, base_classes: int, way: int, num_sessions: int, base_accuracy: float = 0.85, mode: Mode = "exact"
) -> dict[str, IncrementalScores]:
    """Scores of the paper's corner cases (Lazy, Greedy, Greedy-NF) for a session layout."""
    sizes = [base_classes] + [way] * (num_sessions - 1)
    return {
        label: incremental_scores(corner_case_matrix(case, num_sessions=num_sessions, base_accuracy=base_accuracy),
                                  session_sizes=sizes, mode=mode, way=way)
        for case, label in (("lazy", "Lazy"), ("greedy", "Greedy"), ("greedy_nf", "Greedy-NF"))
    }


def score(
    predictions: Sequence[str | os.PathLike[str]], sessions: dict[str, Any] | str | os.PathLike[str], *,
    mode: Mode = "exact", num_alphas: int = 101,
) -> dict[str, Any]:
    """Score one predictions file per session against a sessions file (content or path).

    Returns :meth:`IncrementalScores.to_dict`: aacc, lacc, tacc, gacc, pd, kr, per-session scores,
    the gAcc(alpha) curve (``num_alphas`` points), the matrix and the settings.
    """
    sess = sessions if isinstance(sessions, dict) else load_sessions(sessions)
    scores = score_prediction_files(predictions, sess, mode=mode)
    if mode == "exact" and num_alphas != 101:
        scores = incremental_scores(scores.matrix, session_sizes=session_sizes(sess),
                                    sample_counts=scores.settings["sample_counts"], num_alphas=num_alphas)
    return scores.to_dict()


def to_record(result: dict[str, Any], *, dataset: str, method: str, seed: int | None,
              sessions: dict[str, Any], settings: dict[str, Any], tag: str | None = None) -> Record:
    """A results-store record (protocol "incremental") of one scored run (``score``'s result)."""
    st = {
        "base_classes": sessions.get("base_classes", len(sessions["classes"][0])),
        "way": sessions.get("way"), "shot": sessions.get("shot"),
        "num_sessions": len(sessions["classes"]), "preset": sessions.get("preset"),
        **result["settings"], **settings,
    }
    st.pop("sample_counts", None)
    metrics = {k: v for k, v in result.items() if k != "settings"}
    metrics["sample_counts"] = result["settings"].get("sample_counts")
    return Record(protocol=PROTOCOL, dataset=dataset, method=method, seed=seed,
                  split_hash=sessions.get("sha256"), settings=st, metrics=metrics, tag=tag)


def record_for(scores: IncrementalScores, *, dataset: str, method: str, seed: int | None,
               sessions: dict[str, Any], settings: dict[str, Any], tag: str | None = None) -> Record:
    """:func:`to_record` of an :class:`IncrementalScores`."""
    return to_record(scores.to_dict(), dataset=dataset, method=method, seed=seed, sessions=sessions,
                     settings=settings, tag=tag)


class IncrementalRun(NamedTuple):
    """:func:`run`'s result: the ``scores`` and the per-session ``predictions`` files it wrote."""

    scores: IncrementalScores
    predictions: list[Path]


def run(
    data: Any,
    sessions: dict[str, Any],
    *,
    method: str,
    model: str | None = None,
    model_options: dict[str, Any] | None = None,
    method_options: dict[str, Any] | None = None,
    epochs: int = 5,
    novel_epochs: int = 10,
    lr: float = 0.05,
    novel_lr: float = 0.01,
    batch_size: int = 128,
    seed: int = 0,
    device: str = "cpu",
    mode: Mode = "exact",
    out_dir: str | os.PathLike[str] | None = None,
    store: ResultsStore | None = None,
    dataset: str | None = None,
    tag: str | None = None,
    base_cache: dict | None = None,
) -> "IncrementalRun":
    """Run a reference learner through every session, write one predictions file per session,
    score the files and (with ``store``) record the run.

    ``data`` is a :class:`~vistabench.data.DataSplits` with a test part; ``sessions`` a sessions dict
    with train indices and a test pool. ``method`` is ``"prototype"``, ``"finetune"`` or ``"fr"``
    (registry :data:`vistabench.learners.incremental.incremental_methods`). ``model`` defaults to the
    method's backbone (cnn28; for ``fr`` a small ``vit_small``, ``dim=64, depth=6, heads=4``, unless
    ``model_options`` says otherwise); ``method_options`` holds method settings (``{"fr": FRConfig}``).
    Pass the same ``base_cache`` dict to several runs to train an identical base session only once.
    """
    from ..learners.incremental import IncrementalConfig, incremental_methods

    check_sessions(sessions)
    if data.test is None:
        raise InputError("data: the incremental protocol needs a dataset with a test part")
    if sessions.get("train_indices") is None or sessions.get("test_indices") is None:
        raise InputError("sessions: running a learner needs train_indices and a test pool (build the file "
                         "with `vistabench incremental sessions`)")
    learner_cls = incremental_methods.get(method)
    if model is None:
        model = learner_cls.default_model
        model_options = {**learner_cls.default_model_options, **(model_options or {})}
    model_options = dict(model_options or {})
    cfg = IncrementalConfig(model=model, model_options=model_options, method_options=dict(method_options or {}),
                            epochs=epochs, novel_epochs=novel_epochs, lr=lr, novel_lr=novel_lr,
                            batch_size=batch_size, seed=seed, device=device)
    learner = learner_cls(cfg, in_channels=int(data.train.images.shape[-1]), image_size=int(data.train.images.shape[1]),
                          base_cache=base_cache)
    out = Path(out_dir) if out_dir is not None else None
    paths: list[Path] = []
    preds: list[Predictions] = []
    from ..progress import track

    t0 = time.perf_counter()
    n = len(sessions["classes"])
    for i in track(range(n), total=n, description=f"{method}: sessions"):
        idx = np.asarray(sessions["train_indices"][i], dtype=np.int64)
        learner.learn(data.train.images[idx], data.train.labels[idx], sessions["classes"][i], session=i + 1)
        pool, lab = session_test_pool(sessions, i + 1)
        scores, classes = learner.scores(data.test.images[pool])
        if out is not None:
            path = out / f"session_{i + 1}.npz"
            p = save_predictions(path, labels=lab, logits=scores, classes=classes)
            paths.append(path)
        else:
            p = Predictions(labels=lab, kind="logits", values=scores, classes=classes)
        preds.append(p)
    seconds = time.perf_counter() - t0
    if paths:  # score what was written: the same path a user's files take
        result = score_prediction_files(paths, sessions, mode=mode)
    else:
        result = score_predictions(preds, sessions, mode=mode)
    if store is not None:
        settings = {"model": model, "model_options": model_options, **learner.settings(),
                    "epochs": epochs, "novel_epochs": novel_epochs, "lr": lr,
                    "novel_lr": novel_lr, "batch_size": batch_size, "device": device,
                    "seconds": round(seconds, 2)}
        store.add(record_for(result, dataset=dataset or sessions.get("dataset") or data.train.name,
                             method=method, seed=seed, sessions=sessions, settings=settings, tag=tag))
    return IncrementalRun(result, paths)
