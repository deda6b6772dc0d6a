"""Feature rectification (``fr``) against the plain prototype baseline on the bundled MNIST-5k.

Both methods share one base session (same seeded ViT, same prototypes; ``base_cache``), so the
difference is the FR modules alone. Prints base accuracy A_1^1, aAcc, gAcc (exact and compat), gAcc(0) (the session-averaged curve
at α = 0: novel-class accuracy, session 1 counting its base accuracy) and, per session, the base
and novel accuracies.

    PYTHONPATH=src python benchmarks/incremental_fr_vs_prototype.py --epochs 15 --lr 0.1 --patch-size 7
"""

from __future__ import annotations

import argparse
import time

from vistabench.data import load_dataset
from vistabench.metrics.incremental import incremental_scores
from vistabench.protocols.incremental.runner import build_sessions, run_sessions
from vistabench.protocols.incremental.config import IncrementalConfig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--base-shot", type=int, default=200)
    ap.add_argument("--test-per-class", type=int, default=100)
    ap.add_argument("--fr-epochs", type=int, default=20)
    ap.add_argument("--recipe", default="cpu", choices=("cpu", "paper"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--patch-size", type=int, default=4)
    ap.add_argument("--ce-novel", type=float, default=0.5, help="weight of the FR novel-class CE (authors: 0.5)")
    args = ap.parse_args()
    data = load_dataset("mnist5k")
    sessions = build_sessions(data.train.labels, data.test.labels, base_classes=5, way=1, shot=5, seed=args.seed,
                              base_shot=args.base_shot, test_per_class=args.test_per_class, dataset="mnist5k")
    cache: dict = {}
    vit = {"dim": 64, "depth": 6, "heads": 4, "patch_size": args.patch_size}
    print(f"mnist5k 5 base + 5x1-way 5-shot, vit_small {vit}, {args.epochs} base epochs, lr {args.lr}, "
          f"FR recipe {args.recipe} ({args.fr_epochs} epochs, ce_novel {args.ce_novel}), seed {args.seed}")
    print(f"{'method':10s} {'A_1^1':>6s} {'aAcc':>6s} {'gAcc':>6s} {'compat':>6s} {'gAcc(0)':>7s} {'seconds':>7s}")
    for method in ("prototype", "fr"):
        t0 = time.perf_counter()
        opts = {"recipe": args.recipe, "epochs_fr": args.fr_epochs, "ce_novel": args.ce_novel} if method == "fr" else {}
        config = IncrementalConfig.from_dict({
            "data": "mnist5k", "base_classes": 5, "way": 1, "shot": 5, "base_shot": args.base_shot,
            "test_per_class": args.test_per_class, "method": method, "model": "vit_small", "model_opt": vit,
            "method_options": opts, "epochs": args.epochs, "lr": args.lr, "batch_size": 64, "seed": args.seed})
        m = run_sessions(config, data, sessions, base_cache=cache).metrics
        compat = incremental_scores(m["matrix"], session_sizes=[len(c) for c in sessions["classes"]],
                                    mode="compat").gacc
        print(f"{method:10s} {100 * m['matrix'][0][0]:6.2f} {100 * m['aacc']:6.2f} {100 * m['gacc']:6.2f} "
              f"{100 * compat:6.2f} {100 * m['curve'][0]['gacc']:7.2f} {time.perf_counter() - t0:7.1f}", flush=True)
        print("  base accuracy A_i^1 per session:", " ".join(f"{100 * x['base_acc']:.1f}" for x in m["sessions"]))
        print("  novel accuracy per session:     ",
              " ".join(f"{100 * x['novel_acc']:.1f}" for x in m["sessions"][1:]), flush=True)


if __name__ == "__main__":
    main()
