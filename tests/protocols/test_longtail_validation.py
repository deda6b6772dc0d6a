"""Validate once at the boundary, pass objects within a run (issue 20).

``check_array`` is counted (every module's binding of it is replaced) on one ``longtail run``, on
``longtail score`` and ``longtail sweep``: each named input is validated at most once per scoring
pass (``metrics.longtail.sweep_scores`` call) and once while the sweep is built; a built or read
:class:`Sweep` is never checked again. Also: a :class:`Sweep` is made only by the functions that
check it, and a plain mapping is checked once on its way in.
"""

from __future__ import annotations

import json
import pickle
import sys
from collections import Counter

import numpy as np
import pytest

import vistabench._validation as V
from vistabench.cli import main
from vistabench.data import Predictions, save_predictions
from vistabench.errors import InputError
from vistabench.metrics import longtail as M
from vistabench.protocols.longtail import runner as P
from vistabench.protocols.longtail import sweep as S
from vistabench.protocols.longtail.config import LongtailConfig


class Calls:
    """check_array calls by input name, grouped by phase: ``build`` (inside build_sweep), ``passes``
    (one Counter per scoring pass) and ``other`` (everything else, by (calling module, name))."""

    def __init__(self):
        self.phase: Counter | None = None
        self.build, self.other, self.passes = Counter(), Counter(), []

    def record(self, name, module):
        if self.phase is not None:
            self.phase[name] += 1
        else:
            self.other[(module, name)] += 1

    def other_names(self, *prefixes):
        return Counter({n: k for (m, n), k in self.other.items() if m.startswith(prefixes)})


@pytest.fixture
def calls(monkeypatch):
    import vistabench.learners.longtail  # noqa: F401 (its modules' bindings are replaced too)

    c, original = Calls(), V.check_array

    def counted(x, name, **kw):
        f = sys._getframe(1)
        if f.f_globals["__name__"] == V.__name__:  # check_labels & co: count their caller
            f = f.f_back
        c.record(name, f.f_globals["__name__"])
        return original(x, name, **kw)

    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("vistabench") and getattr(mod, "check_array", None) is original:
            monkeypatch.setattr(mod, "check_array", counted)

    def phase(fn, where):
        def wrapped(*a, **kw):
            c.phase = Counter()
            if where == "pass":
                c.passes.append(c.phase)
            try:
                return fn(*a, **kw)
            finally:
                if where == "build":
                    c.build.update(c.phase)
                c.phase = None
        return wrapped

    monkeypatch.setattr(M, "sweep_scores", phase(M.sweep_scores, "pass"))
    monkeypatch.setattr(P, "build_sweep", phase(P.build_sweep, "build"))
    return c


def _assert_once_per_pass(c, passes):
    assert len(c.passes) == passes
    for p in c.passes:
        assert p == Counter({"labels": 1, "correct": 1, "train_counts": 1, "divergences": 1}), p


def test_one_run_validates_each_input_once_per_scoring_pass(calls, tmp_path):
    cfg = LongtailConfig.from_dict({"data": "digits", "method": "ce", "imbalance": 10, "epochs": 1, "points": 3,
                                    "repeats": 2})
    (rec,) = P.run(cfg, work_dir=tmp_path)
    _assert_once_per_pass(calls, passes=2)  # resampled and exact
    assert calls.build == Counter({"pool_labels": 1, "train_counts": 1}), calls.build
    # outside the sweep and the scoring passes: the run's Predictions (labels, logits), once; nothing of the
    # metrics or the protocol (the dataset and the learner check their own inputs)
    assert calls.other_names("vistabench.metrics", "vistabench.protocols", "vistabench.data.predictions") == \
        Counter({"labels": 1, "logits": 1}), calls.other
    assert rec.metrics["exact"]["avg"] == pytest.approx(np.mean([p["accuracy"] for p in rec.metrics["exact"]["points"]]))


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(6), 20)[rng.permutation(120)]
    logits = rng.normal(size=(120, 6))
    save_predictions(tmp_path / "pred.npz", labels=labels, logits=logits)
    (tmp_path / "counts.json").write_text(json.dumps([300, 120, 60, 25, 10, 4]))
    return tmp_path


def test_longtail_sweep_and_score_validate_once(calls, files, capsys):
    calls.other.clear()  # writing the fixture's predictions file
    rc = main(["longtail", "sweep", "--labels", str(files / "pred.npz"), "--train-counts", str(files / "counts.json"),
               "--test-imbalance", "10", "--points", "4", "--repeats", "2", "--out", str(files / "sweep.json"), "--json"])
    assert rc == 0, capsys.readouterr().err
    assert calls.other_names("vistabench") == Counter({"pool_labels": 1, "train_counts": 1}), calls.other  # build_sweep
    calls.other.clear()
    rc = main(["longtail", "score", "--predictions", str(files / "pred.npz"), "--sweep", str(files / "sweep.json"),
               "--no-store", "--json"])
    assert rc == 0, capsys.readouterr().err
    _assert_once_per_pass(calls, passes=2)
    # reading: the predictions file (labels, logits) and the sweep file (train_counts), once each
    assert calls.other_names("vistabench") == Counter({"labels": 1, "logits": 1, "train_counts": 1}), calls.other


def _sweep():
    labels = np.repeat(np.arange(4), 15)
    return labels, S.build_sweep(labels, [200, 60, 20, 6], test_imbalance=10, points=3, repeats=2)


def test_sweep_is_made_only_by_its_checkers():
    labels, sw = _sweep()
    assert isinstance(sw, S.Sweep) and set(sw) == S.SWEEP_KEYS
    with pytest.raises(InputError, match="Sweep: made by build_sweep"):
        S.Sweep(sw.to_dict())
    with pytest.raises(AttributeError, match="read-only"):
        sw._content = {}
    with pytest.raises(TypeError):
        sw["seed"] = 1  # no item assignment on a Mapping
    assert S.validate_sweep(sw) is sw  # already checked: passed through
    copy = S.validate_sweep(sw.to_dict())
    assert copy == sw and copy is not sw
    again = pickle.loads(pickle.dumps(sw))  # unpickling checks it again
    assert isinstance(again, S.Sweep) and again == sw


def test_plain_mapping_is_checked_once_on_the_way_in(calls):
    labels, sw = _sweep()
    pred = Predictions(labels=labels, kind="pred", values=labels)
    as_dict = sw.to_dict()
    calls.other.clear()
    assert P.score(pred, as_dict) == P.score(pred, sw)
    # the dict is checked once (train_counts), not once per pass; the Sweep not at all
    assert calls.other_names("vistabench") == Counter({"train_counts": 1}) and len(calls.passes) == 4
    edited = sw.to_dict()
    edited["seed"] = 99
    with pytest.raises(InputError, match="sha256 mismatch"):
        S.score_sweep(pred, edited)
    broken = sw.to_dict()
    del broken["points"][0]["samples"][1]
    with pytest.raises(InputError, match="point 0 is inconsistent"):
        P.score(pred, broken)
