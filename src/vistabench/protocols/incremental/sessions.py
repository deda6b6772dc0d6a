"""Few-shot class-incremental sessions: presets, a seeded builder, the literature's index lists.

A sessions file is a split file (``data.splits.write_split``, kind ``"incremental-sessions"``)::

    {"kind": "incremental-sessions", "version": 1, "source": "builder" | "index-lists",
     "dataset", "preset", "seed", "base_classes", "way", "shot", "num_sessions",
     "classes": [[session 1 classes], [session 2 classes], ...],
     "train_indices": [[positions in the training part used by session i], ...],
     "test_indices": [positions in the test part of every session class, ascending],
     "test_labels": [their labels], "sha256"}

Session i is evaluated on ``test_indices`` restricted to the classes of sessions 1..i, in that
(ascending) order: that is the order a per-session predictions file must follow. A hand-written
file with only ``kind`` and ``classes`` is accepted for scoring (no hash, no label check).

Class order follows the literature: label order, base = 0..B−1, then ``way`` classes per session
(``index_list/<dataset>/session_<i>.txt`` in CEC/FACT/SAVC and the paper's code use the same).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import numpy as np

from ..._validation import check_array, check_labels
from ...data.splits import read_split, write_split
from ...errors import InputError
from ...options import parse_int
from ...registry import did_you_mean
from .config import PRESETS

KIND = "incremental-sessions"
VERSION = 1

__all__ = [
    "KIND", "PRESETS", "Sessions", "build_sessions", "check_sessions", "checked_sessions", "image_folder_paths",
    "load_sessions", "preset_settings", "read_index_lists", "require_test_pool", "session_test_pool",
    "sessions_from_index_lists", "write_sessions",
]


def _int(v: Any, name: str, *, minimum: int = 1) -> int:
    return parse_int(v, name, low=minimum)


def preset_settings(name: str) -> dict[str, int]:
    """Settings of a named preset (``cifar100``, ``mini_imagenet``, ``cub200``)."""
    if name not in PRESETS:
        hint = did_you_mean(name, PRESETS, n=1, cutoff=0.6)
        raise InputError(f"unknown preset {name!r}{hint} (known: {', '.join(sorted(PRESETS))})")
    c, b, w, k, n = PRESETS[name]
    return {"num_classes": c, "base_classes": b, "way": w, "shot": k, "num_sessions": n}


def build_sessions(
    train_labels: Any,
    test_labels: Any,
    *,
    base_classes: int,
    way: int,
    shot: int,
    seed: int,
    num_sessions: int | None = None,
    base_shot: int | None = None,
    test_per_class: int | None = None,
    dataset: str = "",
    preset: str | None = None,
) -> dict[str, Any]:
    """Build an FSCIL split: base classes 0..B−1, then ``way`` new classes per session, ``shot`` each.

    Parameters
    ----------
    train_labels : int array, shape (N_train,)
        Labels of the training part; train indices are positions in it.
    test_labels : int array, shape (N_test,)
    base_classes, way, shot : int
        |Y_1|, classes per novel session, training samples per novel class.
    seed : int
        Which ``shot`` samples each novel class gets (numpy ``default_rng(seed)``, classes in order).
    num_sessions : int, optional
        Sessions including the base session; default: as many as the classes allow (the remaining
        classes must then divide evenly by ``way``).
    base_shot : int, optional
        Training samples per base class (default: all of them, as in the literature).
    test_per_class : int, optional
        Keep only this many test samples per class (seeded; default: the whole test part, as in
        the literature). For quick runs.

    Returns
    -------
    dict : the sessions-file content (unsealed; :func:`write_sessions` seals and writes it).
    """
    tr = check_labels(train_labels, "train_labels")
    te = check_labels(test_labels, "test_labels")
    b, w, k = _int(base_classes, "base_classes"), _int(way, "way"), _int(shot, "shot")
    seed = _int(seed, "seed", minimum=0)
    num_classes = int(max(tr.max(initial=-1), te.max(initial=-1)) + 1)
    if b > num_classes:
        raise InputError(f"base_classes: {b} base classes but the data has only {num_classes} classes")
    if num_sessions is None:
        rest = num_classes - b
        if rest % w:
            raise InputError(
                f"num_sessions: {rest} classes after the {b} base classes do not split into sessions of "
                f"way={w}; give num_sessions explicitly")
        n = 1 + rest // w
    else:
        n = _int(num_sessions, "num_sessions")
        if b + (n - 1) * w > num_classes:
            raise InputError(
                f"num_sessions: {n} sessions need {b} + {n - 1}x{w} = {b + (n - 1) * w} classes, "
                f"the data has {num_classes}")
    classes = [list(range(b))] + [list(range(b + (i - 1) * w, b + i * w)) for i in range(1, n)]
    rng = np.random.default_rng(seed)
    train_idx: list[list[int]] = []
    for i, cl in enumerate(classes):
        sess: list[np.ndarray] = []
        for c in cl:
            pool = np.flatnonzero(tr == c)
            want = k if i > 0 else base_shot
            if pool.size == 0:
                raise InputError(f"class {c} (session {i + 1}) has no training samples")
            if want is not None:
                want = _int(want, "base_shot" if i == 0 else "shot")
                if want > pool.size:
                    raise InputError(
                        f"{'base_shot' if i == 0 else 'shot'}: {want} shots requested but class {c} "
                        f"(session {i + 1}) has only {pool.size} training samples")
                pool = np.sort(rng.choice(pool, size=want, replace=False))
            sess.append(pool)
        train_idx.append(np.sort(np.concatenate(sess)).tolist())
    keep = None
    if test_per_class is not None:
        t = _int(test_per_class, "test_per_class")
        keep = []
        for c in (c for cl in classes for c in cl):
            pool = np.flatnonzero(te == c)
            if t > pool.size:
                raise InputError(f"test_per_class: {t} requested but class {c} has only {pool.size} test samples")
            keep.append(rng.choice(pool, size=t, replace=False))
        keep = np.sort(np.concatenate(keep))
    out = _content(classes, train_idx, te, dataset=dataset, seed=seed, base=b, way=w, shot=k,
                   preset=preset, source="builder", base_shot=base_shot, test_keep=keep)
    out["test_per_class"] = test_per_class
    return out


def _content(classes: list[list[int]], train_idx: list[list[int]] | None, test_labels: np.ndarray, *,
             dataset: str, seed: int | None, base: int, way: int | None, shot: int | None,
             preset: str | None, source: str, base_shot: int | None = None,
             test_keep: np.ndarray | None = None) -> dict[str, Any]:
    seen = np.asarray(sorted(c for cl in classes for c in cl), dtype=np.int64)
    test_idx = np.flatnonzero(np.isin(test_labels, seen)) if test_keep is None else test_keep
    missing = sorted(set(seen.tolist()) - set(test_labels[test_idx].tolist()))
    if missing:
        raise InputError(f"test_labels: classes {missing[:5]} of the sessions have no test samples")
    return {
        "kind": KIND, "version": VERSION, "source": source, "dataset": dataset, "preset": preset,
        "seed": seed, "base_classes": base, "way": way, "shot": shot, "base_shot": base_shot,
        "num_sessions": len(classes), "classes": classes, "train_indices": train_idx,
        "test_indices": test_idx.tolist(), "test_labels": test_labels[test_idx].tolist(),
    }


class Sessions(dict):
    """A sessions dict that :func:`check_sessions` has checked: a function given one trusts it (checks it
    no more); a plain dict is checked where it comes in (:func:`checked_sessions`)."""


def checked_sessions(content: Any, name: str = "sessions") -> Sessions:
    """``content`` as :class:`Sessions`: checked by :func:`check_sessions` unless it already is one."""
    return content if isinstance(content, Sessions) else check_sessions(content, name)


def write_sessions(path: str | os.PathLike[str], content: dict[str, Any]) -> Sessions:
    """Validate, seal (sha256) and write a sessions file; returns the sealed content."""
    checked_sessions(content, "sessions")
    return Sessions(write_split(path, content))  # sealing adds the hash only


def check_sessions(content: Any, name: str = "sessions") -> Sessions:
    """Check a sessions dict: kind, non-empty non-overlapping class lists, consistent optional parts.
    Returns it as :class:`Sessions` (checked)."""
    if not isinstance(content, dict):
        raise InputError(f"{name}: expected a JSON object, got {type(content).__name__}")
    if content.get("kind") != KIND:
        raise InputError(f"{name}: expected kind {KIND!r}, found {content.get('kind')!r}")
    classes = content.get("classes")
    if not isinstance(classes, list) or not classes:
        raise InputError(f"{name}: 'classes' must be a non-empty list of class lists, one per session")
    owner: dict[int, int] = {}
    for j, cl in enumerate(classes):
        c = check_array(cl, f"{name} classes[{j}]", ndim=1, kind="integer", allow_empty=False)
        if c.min() < 0:
            raise InputError(f"{name}: session {j + 1} lists a negative class id {int(c.min())}")
        for v in c.tolist():
            if v in owner:
                raise InputError(f"{name}: class {v} is in session {owner[v] + 1} and session {j + 1}; "
                                 "sessions must not overlap")
            owner[v] = j
    tr = content.get("train_indices")
    if tr is not None and (not isinstance(tr, list) or len(tr) != len(classes)):
        raise InputError(f"{name}: 'train_indices' must hold one list per session ({len(classes)})")
    ti, tl = content.get("test_indices"), content.get("test_labels")
    if (ti is None) != (tl is None):
        raise InputError(f"{name}: 'test_indices' and 'test_labels' go together")
    if ti is not None:
        ti_a = check_array(ti, f"{name} test_indices", ndim=1, kind="integer")
        tl_a = check_labels(tl, f"{name} test_labels")
        if len(ti_a) != len(tl_a):
            raise InputError(f"{name}: {len(ti_a)} test_indices but {len(tl_a)} test_labels")
        unknown = set(tl_a.tolist()) - set(owner)
        if unknown:
            raise InputError(f"{name}: test_labels hold classes {sorted(unknown)[:5]} of no session")
    return Sessions(content)


def load_sessions(path: str | os.PathLike[str]) -> Sessions:
    """Read a sessions file. A file with a ``sha256`` must match it; a hand-written file may omit it."""
    content = read_split(path, what="sessions file", require_hash=False)
    return check_sessions(content, f"sessions file {str(path)!r}")


class SessionPool(NamedTuple):
    """The test pool evaluated after a session: ``indices`` into the test part and their ``labels``."""

    indices: np.ndarray
    labels: np.ndarray


def require_test_pool(sessions: dict[str, Any], *, train: bool = False) -> None:
    """The sessions carry a test pool (``train``: and each session's training indices, as running a
    learner needs); one-line InputError otherwise."""
    if train and (sessions.get("train_indices") is None or sessions.get("test_indices") is None):
        raise InputError("sessions: running a learner needs train_indices and a test pool (build the file "
                         "with `vistabench incremental split`)")
    if sessions.get("test_indices") is None:
        raise InputError("sessions: this file has no test pool (test_indices/test_labels)")


def session_test_pool(sessions: dict[str, Any], i: int) -> SessionPool:
    """Test pool evaluated after session ``i`` (1-based)."""
    require_test_pool(sessions)
    n = len(sessions["classes"])
    if not 1 <= i <= n:
        raise InputError(f"session: expected 1..{n}, got {i}")
    return pool_after_session(sessions, i)


def pool_after_session(sessions: Sessions, i: int) -> SessionPool:
    """:func:`session_test_pool` for a caller that has checked the pool is there and ``i`` in 1..n."""
    seen = [c for cl in sessions["classes"][:i] for c in cl]
    idx = np.asarray(sessions["test_indices"], dtype=np.int64)
    lab = np.asarray(sessions["test_labels"], dtype=np.int64)
    keep = np.isin(lab, seen)
    return SessionPool(idx[keep], lab[keep])


# ----------------------------------------------------------------------------- index lists
_SESSION_FILE = re.compile(r"^session_(\d+)\.txt$")


def read_index_lists(folder: str | os.PathLike[str]) -> list[list[str]]:
    """The lines of ``session_1.txt .. session_n.txt`` in ``folder`` (the literature's index lists).

    CIFAR-100 lists hold training-set positions (one integer per line); miniImageNet and CUB-200
    lists hold image paths such as ``MINI-ImageNet/train/n03544143/n0354414300000811.jpg``.
    Sessions must be numbered 1..n without gaps.
    """
    root = Path(folder)
    if not root.is_dir():
        raise InputError(f"index lists {str(root)!r}: no such folder")
    found = {int(m.group(1)): f for f in root.iterdir() if (m := _SESSION_FILE.match(f.name))}
    if not found:
        raise InputError(f"index lists {str(root)!r}: no session_<i>.txt files")
    n = max(found)
    gaps = [i for i in range(1, n + 1) if i not in found]
    if gaps:
        raise InputError(f"index lists {str(root)!r}: missing session_{gaps[0]}.txt (found 1..{n} with gaps)")
    out = []
    for i in range(1, n + 1):
        lines = [l.strip() for l in found[i].read_text(encoding="utf-8").splitlines() if l.strip()]
        if not lines:
            raise InputError(f"index lists: {found[i]} is empty")
        out.append(lines)
    return out


def image_folder_paths(root: str | os.PathLike[str]) -> list[str]:
    """``class/file`` for every image of an image folder, in the order ``read_image_folder`` loads them."""
    from ...data.readers import IMAGE_SUFFIXES

    root = Path(root)
    if not root.is_dir():
        raise InputError(f"image folder {str(root)!r}: no such folder")
    out = []
    for d in sorted(x for x in root.iterdir() if x.is_dir()):
        out += [f"{d.name}/{f.name}" for f in sorted(d.iterdir()) if f.suffix.lower() in IMAGE_SUFFIXES]
    return out


def sessions_from_index_lists(
    folder: str | os.PathLike[str],
    *,
    train_labels: Any,
    test_labels: Any,
    train_paths: Sequence[str] | None = None,
    class_names: Sequence[str] | None = None,
    dataset: str = "",
) -> dict[str, Any]:
    """A sessions file from the literature's ``session_<i>.txt`` lists.

    Integer lines are positions in the training part (CIFAR-100); their classes come from
    ``train_labels``. Path lines (miniImageNet, CUB-200) name ``.../<class folder>/<file>``: the
    sample is found in ``train_paths`` (``class/file`` per training sample, e.g. from
    :func:`image_folder_paths`) by its last two path components, and its class is the
    sample's label. ``class_names`` is only used to name classes in error messages.
    """
    lists = read_index_lists(folder)
    tr = check_labels(train_labels, "train_labels")
    te = check_labels(test_labels, "test_labels")
    numeric = [all(l.isdigit() for l in s) for s in lists]
    if all(numeric):
        idx = [np.asarray([int(l) for l in s], dtype=np.int64) for s in lists]
        for i, a in enumerate(idx):
            if a.max() >= len(tr):
                raise InputError(f"session_{i + 1}.txt: index {int(a.max())} is past the {len(tr)} training samples")
    elif not any(numeric):
        if train_paths is None:
            raise InputError("index lists name image paths: pass train_paths (class/file per training sample; "
                             "see image_folder_paths) so they can be matched to training samples")
        if len(train_paths) != len(tr):
            raise InputError(f"train_paths has {len(train_paths)} entries but train_labels has {len(tr)}")
        where = {"/".join(Path(p).parts[-2:]): k for k, p in enumerate(train_paths)}
        idx = []
        for i, s in enumerate(lists):
            rows = []
            for l in s:
                key = "/".join(Path(l).parts[-2:])
                if key not in where:
                    raise InputError(f"session_{i + 1}.txt: {l!r} is not among the training images")
                rows.append(where[key])
            idx.append(np.asarray(rows, dtype=np.int64))
    else:
        raise InputError("index lists mix integer indices and paths across session files")
    classes = []
    for a in idx:
        cl: list[int] = []
        for c in tr[a].tolist():
            if c not in cl:
                cl.append(c)
        classes.append(sorted(cl))
    owner: dict[int, int] = {}
    for j, cl in enumerate(classes):
        for c in cl:
            if c in owner:
                nm = f" ({class_names[c]})" if class_names is not None and c < len(class_names) else ""
                raise InputError(f"index lists: class {c}{nm} appears in session_{owner[c] + 1}.txt and "
                                 f"session_{j + 1}.txt; sessions must not overlap")
            owner[c] = j
    ways = {len(cl) for cl in classes[1:]}
    shots = {int(v) for a in idx[1:] for v in np.bincount(tr[a])[np.bincount(tr[a]) > 0]}
    return _content(classes, [np.sort(a).tolist() for a in idx], te, dataset=dataset, seed=None,
                    base=len(classes[0]), way=ways.pop() if len(ways) == 1 else None,
                    shot=shots.pop() if len(shots) == 1 else None, preset=None, source="index-lists")
