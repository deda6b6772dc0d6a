"""Few-shot class-incremental protocol (docs/incremental.md): sessions → per-session predictions → scores.

Pipeline: :func:`~vistabench.protocols.incremental.sessions.build_sessions` (or a preset, or the
literature's index lists) writes a sessions file; a learner trains on session 1, then on each novel
session's few shots, and after every session predicts the test pool of the classes seen so far
(one predictions file per session); :func:`score_predictions` turns those files into the accuracy
matrix and every metric of :mod:`vistabench.metrics.incremental`; :func:`run` does all of it with a
reference learner and writes a record to the results store.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ...data.predictions import Predictions, load_predictions, predictions_sha256, save_predictions
from ...errors import InputError
from ...options import parse_int
from ...metrics.incremental import IncrementalScores, Mode, accuracy_matrix, corner_case_matrix, incremental_scores
from ...store import Record, ResultsStore
from .config import IncrementalConfig
from .sessions import (  # noqa: F401  (re-exported: the protocol's public API)
    PRESETS,
    build_sessions,
    check_sessions,
    checked_sessions,
    image_folder_paths,
    load_sessions,
    preset_settings,
    pool_after_session,
    read_index_lists,
    require_test_pool,
    session_test_pool,
    sessions_from_index_lists,
    write_sessions,
)

PROTOCOL = "incremental"

__all__ = [
    "PRESETS", "build_sessions", "load_sessions", "write_sessions", "read_index_lists",
    "sessions_from_index_lists", "image_folder_paths", "session_test_pool", "predicted_over_seen",
    "score_predictions", "score_prediction_files", "reference_scores", "run", "run_sessions", "score", "to_record",
    "record_for", "layout_settings", "sessions_for_data", "score_matrix", "layout_sessions", "reference_for", "score_from",
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
    labels are checked against it. aAcc_i is sample-weighted. ``sessions``: checked here unless it is
    :class:`~vistabench.protocols.incremental.sessions.Sessions` (checked already).
    """
    sessions = checked_sessions(sessions)
    n = len(sessions["classes"])
    if len(predictions) != n:
        raise InputError(f"predictions: the sessions file has {n} sessions, got {len(predictions)} predictions files")
    names = list(names) if names is not None else [f"predictions {i + 1}" for i in range(n)]
    y_true, y_pred = [], []
    for i, p in enumerate(predictions):
        seen = [c for cl in sessions["classes"][: i + 1] for c in cl]
        if sessions.get("test_labels") is not None:  # the pool is there (the test indices go with the labels)
            _, lab = pool_after_session(sessions, i + 1)
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


def score_matrix(content: Any, *, base_classes: int | None, way: int | None, mode: Mode = "exact",
                 num_alphas: int = 101, name: str = "matrix") -> IncrementalScores:
    """Scores of an accuracy matrix given as ``{"matrix": [[A_1^1], [A_2^1, A_2^2], ...]}`` (fractions)
    for ``base_classes`` base classes and ``way`` classes per novel session; ``name`` names the
    input in messages."""
    from ...metrics.incremental import session_sizes_uniform

    if base_classes is None or way is None:
        raise InputError("base_classes: a `matrix` needs `base_classes` and `way` (the sessions' sizes)")
    if not isinstance(content, dict) or "matrix" not in content:
        keys = f" with keys {sorted(content)}" if isinstance(content, dict) else ""
        raise InputError(f"{name}: expected a JSON object with a 'matrix' key, got {type(content).__name__}{keys}")
    m = content["matrix"]
    n = len(m) if isinstance(m, list) else 0
    if n == 0:
        raise InputError(f"{name}: 'matrix' must be a non-empty list of rows")
    sizes = session_sizes_uniform(base_classes=base_classes, way=way, num_sessions=n)
    try:
        return incremental_scores(m, session_sizes=sizes, mode=mode, num_alphas=num_alphas, way=way)
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from exc


def score_from(*, matrix: Any = None, predictions: Sequence[Predictions | str | os.PathLike[str]] | None = None,
               sessions: dict[str, Any] | str | os.PathLike[str] | None = None, base_classes: int | None = None,
               way: int | None = None, mode: Mode = "exact",
               num_alphas: int = 101) -> tuple[IncrementalScores, dict[str, Any]]:
    """Scores from either an accuracy ``matrix`` (its content or a JSON file, with ``base_classes`` and
    ``way``) or one ``predictions`` object or file per session (with ``sessions``: content or file).

    Returns the scores and the sessions they refer to (for :func:`to_record`; a matrix gets
    :func:`layout_sessions`).
    """
    if (matrix is None) == (predictions is None):
        raise InputError("matrix: give either `matrix` (with `base_classes` and `way`) or `predictions` "
                         "(with `sessions`)" + ("; both were given, which is not allowed" if matrix is not None else ""))
    if matrix is not None:
        if sessions is not None:
            raise InputError("sessions: goes with `predictions`; with `matrix` give `base_classes` and `way`")
        name = "matrix"
        if isinstance(matrix, (str, os.PathLike)):
            from ...jsonutil import read_json

            name = f"matrix {str(matrix)!r}"
            matrix = read_json(matrix, what="matrix")
        scores = score_matrix(matrix, base_classes=base_classes, way=way, mode=mode, num_alphas=num_alphas,
                              name=name)
        return scores, layout_sessions(scores.settings["session_sizes"], base_classes=base_classes, way=way)
    if sessions is None:
        raise InputError("predictions: needs `sessions` (the session classes and test pool)")
    if base_classes is not None or way is not None:
        given = "base_classes" if base_classes is not None else "way"
        raise InputError(f"{given}: goes with `matrix`; with `predictions` the sessions give the layout")
    sess = sessions if isinstance(sessions, dict) else load_sessions(sessions)
    return IncrementalScores(**score(predictions, sess, mode=mode, num_alphas=num_alphas)), sess


def layout_sessions(session_sizes: Sequence[int], *, base_classes: int | None = None,
                    way: int | None = None) -> dict[str, Any]:
    """A sessions dict (classes only, in label order) for scores that came without a sessions file."""
    ends = np.cumsum(list(session_sizes)).tolist()
    return {"classes": [list(range(a, b)) for a, b in zip([0] + ends[:-1], ends)], "base_classes": base_classes,
            "way": way}


def reference_for(*, preset: str | None = None, base_classes: int | None = None, way: int | None = None,
                  num_sessions: int | None = None, base_accuracy: float = 0.85,
                  mode: Mode = "exact") -> dict[str, IncrementalScores]:
    """:func:`reference_scores` for a preset's layout or the given one (every value checked)."""
    if preset is not None:
        st = preset_settings(preset)
        base_classes, way, num_sessions = st["base_classes"], st["way"], st["num_sessions"]
    else:
        missing = [k for k, v in (("base_classes", base_classes), ("way", way), ("num_sessions", num_sessions))
                   if v is None]
        if missing:
            raise InputError(f"{missing[0]}: give a preset or all of base_classes, way, num_sessions "
                             f"(missing {', '.join(missing)})")
        base_classes, way, num_sessions = (parse_int(v, k, low=1) for k, v in (
            ("base_classes", base_classes), ("way", way), ("num_sessions", num_sessions)))
    return reference_scores(base_classes=base_classes, way=way, num_sessions=num_sessions,  # type: ignore[arg-type]
                            base_accuracy=base_accuracy, mode=mode)


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
    predictions: Sequence[Predictions | str | os.PathLike[str]], reference: dict[str, Any] | str | os.PathLike[str],
    *, mode: Mode = "exact", num_alphas: int = 101,
) -> dict[str, Any]:
    """Score one predictions object or file per session against the sessions (content or path).

    Returns :meth:`IncrementalScores.to_dict`: aacc, lacc, tacc, gacc, pd, kr, per-session scores,
    the gAcc(alpha) curve (``num_alphas`` points), the matrix and the settings.
    """
    sess = reference if isinstance(reference, dict) else load_sessions(reference)
    if isinstance(predictions, (str, os.PathLike, Predictions)):
        predictions = [predictions]
    names = [f"predictions file {str(p)!r}" if not isinstance(p, Predictions) else f"predictions {i + 1}"
             for i, p in enumerate(predictions)]
    preds = [p if isinstance(p, Predictions) else load_predictions(p) for p in predictions]
    scores = score_predictions(preds, sess, mode=mode, names=names)
    if mode == "exact" and num_alphas != 101:
        scores = incremental_scores(scores.matrix, session_sizes=session_sizes(sess),
                                    sample_counts=scores.settings["sample_counts"], num_alphas=num_alphas)
    return scores.to_dict()


def to_record(result: dict[str, Any], *, dataset: str, method: str, seed: int | None,
              sessions: dict[str, Any], settings: dict[str, Any], tag: str | None = None,
              seconds: float | None = None) -> Record:
    """A results-store record (protocol "incremental") of one scored run (``score``'s result);
    ``seconds``: the learner's wall time (None for predictions scored from files)."""
    st = {
        "base_classes": sessions.get("base_classes", len(sessions["classes"][0])),
        "way": sessions.get("way"), "shot": sessions.get("shot"),
        "num_sessions": len(sessions["classes"]), "preset": sessions.get("preset"),
        **result["settings"], **settings,
    }
    st.pop("sample_counts", None)
    metrics = {k: v for k, v in result.items() if k != "settings"}
    metrics["sample_counts"] = result["settings"].get("sample_counts")
    metrics["seconds"] = None if seconds is None else round(float(seconds), 2)
    return Record(protocol=PROTOCOL, dataset=dataset, method=method, seed=seed,
                  split_hash=sessions.get("sha256"), settings=st, metrics=metrics, tag=tag)


def record_for(scores: IncrementalScores, *, dataset: str, method: str, seed: int | None,
               sessions: dict[str, Any], settings: dict[str, Any], tag: str | None = None,
               seconds: float | None = None) -> Record:
    """:func:`to_record` of an :class:`IncrementalScores`."""
    return to_record(scores.to_dict(), dataset=dataset, method=method, seed=seed, sessions=sessions,
                     settings=settings, tag=tag, seconds=seconds)


def layout_settings(*, preset: str | None = None, base_classes: int | None = None, way: int | None = None,
                    shot: int | None = None, num_sessions: int | None = None) -> dict[str, Any]:
    """The session layout: a preset's (other values must agree with it) or the given values."""
    if preset is not None:
        st = preset_settings(preset)
        for k, v in (("base_classes", base_classes), ("way", way), ("shot", shot), ("num_sessions", num_sessions)):
            if v is not None and v != st[k]:
                raise InputError(f"{k}: {v} contradicts preset {preset} ({st[k]})")
        return st
    missing = [k for k, v in (("base_classes", base_classes), ("way", way), ("shot", shot)) if v is None]
    if missing:
        raise InputError(f"preset: give a preset or all of base_classes, way, shot (missing {', '.join(missing)})")
    return {"base_classes": base_classes, "way": way, "shot": shot, "num_sessions": num_sessions}


def sessions_for_data(data: Any, *, data_name: str, preset: str | None = None, base_classes: int | None = None,
                      way: int | None = None, shot: int | None = None, num_sessions: int | None = None,
                      base_shot: int | None = None, seed: int = 0, index_lists: str | None = None,
                      test_per_class: int | None = None) -> dict[str, Any]:
    """The sessions content for a loaded dataset: from the literature's index lists, else built
    from the layout (a preset or base_classes/way/shot). ``data_name`` is the dataset spec
    (``folder:DIR`` lets index lists name image paths)."""
    if data.test is None:
        raise InputError(f"data: {data_name!r} has no test part; the test pool comes from it")
    if index_lists:
        paths = None
        kind, _, arg = data_name.partition(":")
        if kind == "folder":
            root = Path(arg)
            paths = image_folder_paths(root / "train" if (root / "train").is_dir() else root)
        return sessions_from_index_lists(index_lists, train_labels=data.train.labels, test_labels=data.test.labels,
                                         train_paths=paths, class_names=data.train.class_names, dataset=data_name)
    st = layout_settings(preset=preset, base_classes=base_classes, way=way, shot=shot, num_sessions=num_sessions)
    if "num_classes" in st and data.train.num_classes != st["num_classes"]:
        raise InputError(f"preset: {preset} expects {st['num_classes']} classes, data {data_name!r} has "
                         f"{data.train.num_classes}")
    return build_sessions(data.train.labels, data.test.labels, base_classes=st["base_classes"], way=st["way"],
                          shot=st["shot"], num_sessions=st["num_sessions"], seed=seed, base_shot=base_shot,
                          test_per_class=test_per_class, dataset=data_name, preset=preset)


def run(config: IncrementalConfig, *, store: ResultsStore | None = None,
        work_dir: str | os.PathLike[str] | None = None) -> list[Record]:
    """Run ``config`` (an :class:`~vistabench.protocols.incremental.config.IncrementalConfig`): load
    the data, build (or read) the sessions, run the learner through them, score, record.

    With ``work_dir`` the sessions file (when built) and one predictions file per session
    (``session_<i>.npz``) are written there; with ``store`` the record is stored and returned with
    its id. Returns ``[record]``.
    """
    from ...data import load_dataset

    if not isinstance(config, IncrementalConfig):
        raise InputError(f"config: expected an IncrementalConfig, got {type(config).__name__}")
    config.refuse_tracking()
    data = load_dataset(config.data, what="data")
    if data.test is None:
        raise InputError(f"data: {config.data!r} has no test part; the test pool comes from it")
    if config.sessions is not None:
        sessions = load_sessions(config.sessions)
    else:
        sessions = sessions_for_data(data, data_name=config.data, seed=config.seed, **config.layout())
        if work_dir is not None:
            sessions = write_sessions(Path(work_dir) / "sessions.json", sessions)
    record = run_sessions(config, data, sessions, work_dir=work_dir)
    if store is not None:
        record = dataclasses.replace(record, id=store.add(record))
    return [record]


def run_sessions(config: Any, data: Any, sessions: dict[str, Any], *,
                 work_dir: str | os.PathLike[str] | None = None, base_cache: dict | None = None) -> Record:
    """The learner of ``config`` through ``sessions`` on a loaded ``data``: the run's record.

    For callers that already hold the data and the sessions (the demo runs two methods on one
    split). After each session the learner's scores of the test pool are kept as predictions (and
    written to ``work_dir/session_<i>.npz`` when given) and scored as they are. Pass one
    ``base_cache`` dict to several runs to train an identical base session once.
    """
    from ...learners.incremental import IncrementalContext, incremental_methods
    from ...learners.model_options import check_patch_size
    from ...progress import track

    sessions = checked_sessions(sessions)
    require_test_pool(sessions, train=True)
    model, model_options = config.backbone()
    image_size = int(data.train.images.shape[1])
    check_patch_size(model, model_options, image_size, data=config.data)
    ctx = IncrementalContext(  # the recipe whole (its backbone resolved), and the novel sessions' budget
        config.to_recipe(model=model), model_options=model_options,
        in_channels=int(data.train.images.shape[-1]), image_size=image_size, novel_epochs=config.novel_epochs,
        novel_lr=config.novel_lr, seed=config.seed, method_options=config.learner_options(), base_cache=base_cache,
        eval_transform=config.eval_transform)
    learner = incremental_methods.get(config.method).load()(ctx)
    out = Path(work_dir) if work_dir is not None else None
    preds: list[Predictions] = []
    t0 = time.perf_counter()
    n = len(sessions["classes"])
    for i in track(range(n), total=n, description=f"{config.method}: sessions"):
        idx = np.asarray(sessions["train_indices"][i], dtype=np.int64)
        learner.learn(data.train.images[idx], data.train.labels[idx], sessions["classes"][i], session=i + 1)
        pool, lab = pool_after_session(sessions, i + 1)
        scores, classes = learner.scores(data.test.images[pool])
        if out is not None:  # a by-product for the user: the run scores the objects it holds
            preds.append(save_predictions(out / f"session_{i + 1}.npz", labels=lab, logits=scores, classes=classes))
        else:
            preds.append(Predictions(labels=lab, kind="logits", values=scores, classes=classes))
    seconds = time.perf_counter() - t0
    result = score_predictions(preds, sessions, mode="compat" if config.compat else "exact")
    settings = {**config.to_dict(), "model": model, "model_options": model_options, **learner.settings()}
    # the record's own columns, and the layout, which the record takes from the sessions themselves
    for name in ("data", "tag", "seed", "method", "preset", "base_classes", "way", "shot", "num_sessions"):
        settings.pop(name, None)
    settings["config"] = config.to_dict()  # what --print-config printed, whole
    settings["predictions_sha256"] = predictions_sha256(*preds)
    return record_for(result, dataset=config.data, method=config.method, seed=config.seed, sessions=sessions,
                      settings=settings, tag=config.tag, seconds=seconds)
