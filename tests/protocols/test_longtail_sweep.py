"""Sweep files and sweep scoring against independent re-computation."""

import json
import math

import numpy as np
import pytest

from vistabench.data import Predictions, write_split
from vistabench.errors import InputError
from vistabench.metrics import longtail as M
from vistabench.protocols.longtail.sweep import (SWEEP_KEYS, build_sweep, read_sweep, score_sweep,
                                                 write_sweep)


def _pool(C=5, per_class=40, seed=0):
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(C), per_class)
    return labels[rng.permutation(len(labels))]


def _preds(labels, C, acc_by_class, seed=0):
    rng = np.random.default_rng(seed)
    pred = labels.copy()
    for i, y in enumerate(labels):
        if rng.random() > acc_by_class[y]:
            pred[i] = (y + 1) % C
    return Predictions(labels=labels, kind="pred", values=pred)


def test_sweep_file_shape_and_counts():
    labels = _pool()
    counts = np.array([100, 50, 20, 10, 4])
    sw = build_sweep(labels, counts, test_imbalance=10, points=5, repeats=3, seed=1)
    assert set(sw) == SWEEP_KEYS
    assert sw["n_max"] == 40 and sw["repeats"] == 3 and len(sw["points"]) == 5
    p = counts / counts.sum()
    for pt, alpha in zip(sw["points"], M.peaks(5, 5)):
        # independent: positions = classes in frequency order (here the identity)
        n_tst = sum(40 * 10 ** (-(c - 1) / 4) for c in range(1, 6))
        w = [10 ** (-abs(c - alpha) / 4) for c in range(1, 6)]
        ref = [max(1, math.floor(n_tst * wi / sum(w) + 0.5)) for wi in w]
        assert pt["class_counts"] == ref
        q = np.array(w) / sum(w)
        assert pt["divergence"] == pytest.approx(float(np.sum(p * np.log(p / q) + q * np.log(q / p))), abs=1e-12)
        for s in pt["samples"]:
            s = np.array(s)
            assert len(s) == sum(ref)
            # class-ordered draws, without replacement within a class
            assert labels[s].tolist() == np.repeat(np.arange(5), ref).tolist()
            for c in range(5):
                sc = s[labels[s] == c]
                assert len(np.unique(sc)) == len(sc)


def test_positions_follow_training_frequency_not_index():
    labels = _pool(C=3, per_class=30)
    sw = build_sweep(labels, np.array([5, 50, 20]), test_imbalance=4, points=3, repeats=1)
    by_pos = M.sweep_class_counts(3, test_imbalance=4, n_max=30, alpha=1.0).tolist()
    # head (position 1) is class 1, then class 2, then class 0
    assert sw["points"][0]["class_counts"] == [by_pos[2], by_pos[0], by_pos[1]]


def test_same_seed_byte_identical(tmp_path):
    labels = _pool()
    counts = [100, 50, 20, 10, 4]
    a = write_sweep(tmp_path / "a.json", build_sweep(labels, counts, test_imbalance=10, seed=3))
    write_sweep(tmp_path / "b.json", build_sweep(labels, counts, test_imbalance=10, seed=3))
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    c = build_sweep(labels, counts, test_imbalance=10, seed=4)
    assert c["sha256"] != a["sha256"]
    assert read_sweep(tmp_path / "a.json") == a


def test_tampered_sweep_rejected(tmp_path):
    labels = _pool()
    write_sweep(tmp_path / "s.json", build_sweep(labels, [9, 8, 7, 6, 5], test_imbalance=10))
    d = json.loads((tmp_path / "s.json").read_text())
    d["points"][0]["samples"][0][0] = d["points"][0]["samples"][0][1]
    (tmp_path / "s.json").write_text(json.dumps(d))
    with pytest.raises(InputError, match="sha256 mismatch"):
        read_sweep(tmp_path / "s.json")


def test_wrong_kind_rejected(tmp_path):
    write_split(tmp_path / "x.json", {"kind": "something-else", "indices": [1, 2]})
    with pytest.raises(InputError, match="expected kind"):
        read_sweep(tmp_path / "x.json")


def test_single_sample_class_drawn_with_replacement():
    labels = np.array([0] * 30 + [1] * 30 + [2])  # class 2 has one pool sample
    with pytest.warns(UserWarning, match="with replacement"):
        sw = build_sweep(labels, [50, 20, 5], test_imbalance=10, n_max=20, points=3, repeats=2)
    for pt in sw["points"]:
        s = np.array(pt["samples"][0])
        assert np.all(s[labels[s] == 2] == 60)
        assert pt["class_counts"][2] >= 1
    # default n_max = smallest pool (1): no replacement needed beyond max(1, .)
    sw1 = build_sweep(labels, [50, 20, 5], test_imbalance=10, points=3, repeats=2)
    assert sw1["n_max"] == 1


def test_t_equals_one():
    labels = _pool()
    sw = build_sweep(labels, [100, 50, 20, 10, 4], test_imbalance=10, points=1, repeats=2)
    pred = _preds(labels, 5, [0.9, 0.8, 0.7, 0.6, 0.5])
    with pytest.warns(UserWarning, match="AUC undefined"):
        r = score_sweep(pred, sw)
    assert r["auc"] is None or math.isnan(r["auc"])
    assert r["std"] == 0 and r["max"] == r["min"] == r["avg"]


def test_score_matches_independent_recomputation():
    C = 5
    labels = _pool(C, 60, seed=2)
    counts = np.array([300, 120, 60, 15, 5])
    sw = build_sweep(labels, counts, test_imbalance=20, points=6, repeats=4, seed=9)
    pred = _preds(labels, C, [0.95, 0.85, 0.6, 0.4, 0.2], seed=5)
    r = score_sweep(pred, sw)
    correct = (pred.values == labels)
    V = [np.mean([correct[np.array(s)].mean() for s in pt["samples"]]) for pt in sw["points"]]
    d = [pt["divergence"] for pt in sw["points"]]
    ref = M.sweep_metrics(V, d)
    for k in ("auc", "avg", "std", "max", "min", "drop_ratio"):
        assert r[k] == pytest.approx(ref[k], abs=1e-12)
    acc = np.array([correct[labels == c].mean() for c in range(C)])
    assert r["balanced"] == pytest.approx(acc.mean())
    assert r["worst_class"] == pytest.approx(acc.min())
    assert r["many"] == pytest.approx(acc[[0, 1]].mean())          # 300, 120 > 100
    assert r["medium"] == pytest.approx(acc[[2]].mean())           # 60
    assert r["few"] == pytest.approx(acc[[3, 4]].mean())           # 15, 5
    assert [p["accuracy"] for p in r["points"]] == pytest.approx(V)
    ex = score_sweep(pred, sw, exact=True)
    for pt, p in zip(sw["points"], ex["points"]):
        w = np.array(pt["class_counts"])
        assert p["accuracy"] == pytest.approx(float(np.sum(w * acc) / w.sum()))
    assert ex["mode"] == "exact" and r["mode"] == "resampled"


def test_exact_is_the_limit_of_many_repeats():
    labels = _pool(4, 200, seed=1)
    sw = build_sweep(labels, [200, 60, 20, 8], test_imbalance=10, n_max=100, points=4, repeats=60, seed=0)
    pred = _preds(labels, 4, [0.9, 0.7, 0.5, 0.3], seed=1)
    a, b = score_sweep(pred, sw), score_sweep(pred, sw, exact=True)
    assert a["avg"] == pytest.approx(b["avg"], abs=0.01)


def test_logits_and_probs_inputs_agree():
    labels = _pool(3, 20)
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(len(labels), 3))
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    sw = build_sweep(labels, [30, 10, 3], test_imbalance=5, points=3, repeats=2)
    a = score_sweep(Predictions(labels=labels, kind="logits", values=logits), sw, exact=True)
    b = score_sweep(Predictions(labels=labels, kind="probs", values=probs), sw, exact=True)
    c = score_sweep(Predictions(labels=labels, kind="pred", values=logits.argmax(1)), sw, exact=True)
    assert a["points"] == b["points"] == c["points"]


def test_bootstrap_intervals_cover_point_estimate():
    labels = _pool(5, 80)
    sw = build_sweep(labels, [300, 120, 60, 15, 5], test_imbalance=10, points=5, repeats=2)
    pred = _preds(labels, 5, [0.9, 0.8, 0.6, 0.5, 0.3])
    r = score_sweep(pred, sw, exact=True, bootstrap=500)
    for k in ("auc", "avg", "balanced", "many", "few"):
        lo, hi = r["ci"][k]
        assert lo <= r[k] <= hi and hi - lo > 0
    # a perfect classifier has zero-width intervals
    perfect = Predictions(labels=labels, kind="pred", values=labels)
    r = score_sweep(perfect, sw, exact=True, bootstrap=50)
    assert r["ci"]["avg"] == [1.0, 1.0]


def test_bootstrap_matches_index_resampling_in_distribution():
    """Binomial draws of per-class correct counts = stratified resampling of indices."""
    labels = _pool(3, 50)
    sw = build_sweep(labels, [60, 20, 5], test_imbalance=5, points=3, repeats=1)
    pred = _preds(labels, 3, [0.9, 0.6, 0.3])
    r = score_sweep(pred, sw, exact=True, bootstrap=4000, seed=1)
    rng = np.random.default_rng(2)
    correct = pred.values == labels
    bal = []
    for _ in range(4000):
        accs = [correct[rng.choice(np.flatnonzero(labels == c), 50)].mean() for c in range(3)]
        bal.append(np.mean(accs))
    assert r["ci"]["balanced"][0] == pytest.approx(np.percentile(bal, 2.5), abs=0.01)
    assert r["ci"]["balanced"][1] == pytest.approx(np.percentile(bal, 97.5), abs=0.01)


# ---------------------------------------------------------------- bad input
def test_predictions_length_differs_from_pool():
    labels = _pool()
    sw = build_sweep(labels, [9, 8, 7, 6, 5], test_imbalance=10)
    short = Predictions(labels=labels[:50], kind="pred", values=labels[:50])
    with pytest.raises(InputError, match="length differs"):
        score_sweep(short, sw)


def test_predictions_from_another_pool_order():
    labels = _pool()
    sw = build_sweep(labels, [9, 8, 7, 6, 5], test_imbalance=10)
    other = np.sort(labels)
    with pytest.raises(InputError, match="do not match"):
        score_sweep(Predictions(labels=other, kind="pred", values=other), sw)


def test_wrong_number_of_columns():
    labels = _pool()
    sw = build_sweep(labels, [9, 8, 7, 6, 5], test_imbalance=10)
    with pytest.raises(InputError, match="columns"):
        score_sweep(Predictions(labels=labels, kind="logits", values=np.zeros((len(labels), 7))), sw)


def test_class_missing_from_pool():
    with pytest.raises(InputError, match="no test sample"):
        build_sweep(np.array([0, 0, 1, 1]), [5, 4, 3], test_imbalance=10)


def test_zero_train_count():
    with pytest.raises(InputError, match="at least one training sample"):
        build_sweep(_pool(3), [5, 0, 3], test_imbalance=10)


@pytest.mark.parametrize("rho", [0, -2])
def test_nonpositive_test_imbalance(rho):
    with pytest.raises(InputError, match="test_imbalance"):
        build_sweep(_pool(3), [5, 4, 3], test_imbalance=rho)


def test_build_sweep_reads_its_inputs_from_files(tmp_path):
    from vistabench.data import save_predictions

    labels, counts = _pool(C=4), [200, 60, 20, 6]
    save_predictions(tmp_path / "pred.npz", labels=labels, logits=np.zeros((len(labels), 4)))
    (tmp_path / "counts.json").write_text(json.dumps(counts))
    from_files = build_sweep(tmp_path / "pred.npz", str(tmp_path / "counts.json"), test_imbalance=10, points=3)
    assert from_files == build_sweep(labels, np.array(counts), test_imbalance=10, points=3)
    (tmp_path / "obj.json").write_text('{"a": 1}')
    with pytest.raises(InputError, match=r"^train_counts '.*obj.json': expected a JSON list of counts, got dict"):
        build_sweep(labels, tmp_path / "obj.json", test_imbalance=10)
    np.savez(tmp_path / "nolabels.npz", images=np.zeros(3))
    with pytest.raises(InputError, match=r"^pool_labels '.*nolabels.npz': no array 'labels' \(found \['images'\]\)"):
        build_sweep(tmp_path / "nolabels.npz", counts, test_imbalance=10)
    with pytest.raises(InputError, match=r"^pool_labels '.*nope.npz'"):
        build_sweep(tmp_path / "nope.npz", counts, test_imbalance=10)
