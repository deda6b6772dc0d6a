"""Scoring the long-tailed sweep is arithmetic on cached predictions.

100,000 predictions (100 classes), 10 sweep points x 5 repeats: times `score_sweep` (and reading
the sweep file) against a straightforward per-test-set Python re-evaluation of the same sets (what
re-running an evaluation script per test set amounts to), and prints the ratio.

    python benchmarks/bench_longtail_score.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from vistabench.data import Predictions
from vistabench.metrics.longtail import training_profile
from vistabench.protocols.longtail.sweep import build_sweep, read_sweep, score_sweep, write_sweep


def naive(labels, pred, sweep):
    out = []
    for pt in sweep["points"]:
        accs = []
        for s in pt["samples"]:
            hit = 0
            for i in s:
                hit += int(pred[i] == labels[i])
            accs.append(hit / len(s))
        out.append(sum(accs) / len(accs))
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    C, N = 100, 100_000
    labels = np.repeat(np.arange(C), N // C)[rng.permutation(N)]
    logits = rng.normal(size=(N, C)).astype(np.float32)
    logits[np.arange(N), labels] += rng.normal(1.0, 1.0, size=N)
    pred = Predictions(labels=labels, kind="logits", values=logits)
    counts = training_profile(C, n_max=500, imbalance=100)
    sweep = build_sweep(labels, counts, test_imbalance=100, points=10, repeats=5, seed=0)
    n_sets = sum(len(s) for pt in sweep["points"] for s in pt["samples"])
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "sweep.json"
        write_sweep(path, sweep)
        t0 = time.perf_counter()
        sw = read_sweep(path)
        t_read = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = score_sweep(pred, sw)
    t_score = time.perf_counter() - t0
    t0 = time.perf_counter()
    r_exact = score_sweep(pred, sw, exact=True)
    t_exact = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = naive(labels, pred.predicted(), sw)
    t_naive = time.perf_counter() - t0
    assert np.allclose(ref, [p["accuracy"] for p in r["points"]])
    print(f"predictions: {N:,} x {C} classes; sweep: 10 points x 5 repeats = {n_sets:,} sampled test items")
    print(f"read + verify sweep file : {t_read:8.3f} s")
    print(f"score (resampled)        : {t_score:8.3f} s")
    print(f"score (exact)            : {t_exact:8.3f} s")
    print(f"read + score, total      : {t_read + t_score:8.3f} s")
    print(f"naive per-set loop       : {t_naive:8.3f} s   (same accuracies: yes)")
    print(f"ratio naive / vistabench : {t_naive / t_score:8.1f}x")
    print(f"AUC {r['auc']:.4f}  AVG {r['avg']:.4f}  (exact AVG {r_exact['avg']:.4f})")


if __name__ == "__main__":
    main()
