"""Demo of the small-data protocol: MNIST-5k at 50 images per class (30 train + 20 val), untuned vs
tuned cross-entropy vs the cosine loss, with Welch's test, under gem's search rules."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..store import ResultsStore


def demo(store: ResultsStore, out_dir: Path, *, quick: bool) -> str:
    """MNIST-5k, 50 images per class: untuned vs tuned cross-entropy vs the cosine loss (cnn28)."""
    from ..protocols.smalldata.runner import SmalldataConfig, run
    from ..report.smalldata import accuracy_table

    out_dir = Path(out_dir)
    shutil.rmtree(out_dir / "studies", ignore_errors=True)  # a demo starts from scratch, like its store
    fixed = {"dataset": "mnist5k", "per_class": 50, "seed": 0, "split": [0], "model": "cnn28",
             "epochs": 2 if quick else 15, "trials": 2 if quick else 20, "grace_period": 1 if quick else 2,
             "repeats": 2 if quick else 3, "threads": 1}
    for method in ("ce_untuned", "ce", "cosine"):
        config = SmalldataConfig.from_dict({**fixed, "method": method})
        run(config, store=store, work_dir=out_dir)
    table = accuracy_table(store, dataset="mnist5k")
    p = config.preset()
    return (f"MNIST-5k, 30 train + 20 val images/class, split 0, {config.trials} ASHA trials (eta {p.reduction_factor}, "
            f"{p.sampler} search, mean val accuracy of the last {p.score_window} epochs, best of all trials) "
            f"x <= {config.epochs} epochs, {config.repeats} final runs per method\n\n" + table.render("markdown"))
