"""Shared helpers of the compat tests: the official tools on the same inputs, and comparisons."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import random

import numpy as np


def restore_np_float() -> None:
    """lvis-api 0.5.3 uses ``np.float`` (removed in numpy 1.24): restored here, in the tests only."""
    if not hasattr(np, "float"):
        np.float = float  # type: ignore[attr-defined]


def shuffled(gt: dict, seed: int = 0) -> dict:
    """The same ground truth with images, categories and annotations in a shuffled file order."""
    gt = copy.deepcopy(gt)
    rng = random.Random(seed)
    for k in ("images", "categories", "annotations"):
        rng.shuffle(gt[k])
    return gt


def write(tmp_path, name: str, obj) -> str:
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return str(p)


def same_arrays(a, b, tol=1e-9) -> None:
    a, b = np.asarray(a, float), np.asarray(b, float)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert np.allclose(a, b, rtol=0, atol=tol), float(np.max(np.abs(a - b)))


def same_eval_imgs(ours, ref) -> None:
    """``evalImgs`` of our COCOeval equal pycocotools': the same images, ids, scores, matches, ignores."""
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert (a is None) == (b is None)
        if a is not None:
            for k in ("dtIds", "gtIds", "dtScores"):
                assert list(a[k]) == list(b[k]), k
            for k in ("dtMatches", "gtMatches", "dtIgnore", "gtIgnore"):
                assert np.array_equal(np.asarray(a[k], float), np.asarray(b[k], float)), k


def same_dict(ours, ref, tol=1e-9) -> None:
    assert list(ours.keys()) == list(ref.keys()), (list(ours), list(ref))
    for k in ref:
        a, b = float(ours[k]), float(ref[k])
        assert (a != a and b != b) or abs(a - b) <= tol, (k, ours[k], ref[k])


def quiet():
    return contextlib.redirect_stdout(io.StringIO())
