"""The protocol's test-time hook: a method's ``test_time`` function is applied to every drawn test
set, receives only pool indices (the images' rows, never labels) and its predictions score that set."""

import numpy as np

import vistabench.learners.longtail as L
from vistabench.data import load_dataset
from vistabench.protocols.longtail.runner import run
from vistabench.protocols.longtail.config import LongtailConfig


def test_run_applies_test_time_per_drawn_set(monkeypatch):
    splits = load_dataset("digits")
    calls = []

    def fake_fit_predict(method, train, test_images, **kw):
        C = train.num_classes

        def test_time(indices):
            calls.append(np.asarray(indices).copy())
            out = np.zeros((len(indices), C), np.float32)
            out[:, 0] = 1.0  # always class 0
            return out

        pool = np.zeros((len(test_images), C), np.float32)
        pool[np.arange(len(test_images)), splits.test.labels] = 1.0  # pool logits: all right
        return L.LTRunResult(method=method, logits=pool, train_results=[], flops=0, seconds=0.0,
                             settings={"method": method}, test_time=test_time)

    monkeypatch.setattr(L, "fit_predict", fake_fit_predict)
    (record,) = run(LongtailConfig.from_dict({"data": "digits", "method": "tade", "imbalance": 10, "epochs": 1,
                                              "points": 3, "repeats": 2}))
    rec = record.to_dict()
    # computed once, shared by both scorings: 3 points x 2 drawn sets, each called with its own indices
    assert len(calls) == 6 and all(c.dtype == np.int64 for c in calls)
    assert len({tuple(c) for c in calls}) == 6
    # "always class 0" is right on a set exactly for its class-0 share; pool-level BTD stays 1.0
    share0 = [np.mean(splits.test.labels[c] == 0) for c in calls]
    for mode in ("metrics", "exact"):
        pts = rec["metrics"]["points"] if mode == "metrics" else rec["metrics"]["exact"]["points"]
        assert [p["accuracy"] for p in pts] == [np.mean(share0[2 * i:2 * i + 2]) for i in range(3)]
    assert rec["metrics"]["balanced"] == 1.0
    assert rec["settings"]["test_time_adaptation"] is True
