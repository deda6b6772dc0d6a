"""Demo of the small-data protocol: MNIST-5k at 50 images per class (30 train + 20 val), untuned vs
tuned cross-entropy vs the cosine loss, with Welch's test, under gem's search rules."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..store import ResultsStore


def demo(store: ResultsStore, out_dir: Path, *, quick: bool) -> str:
    """MNIST-5k, 50 images per class: untuned vs tuned cross-entropy vs the cosine loss (cnn28)."""
    from ..protocols.smalldata import Options, prepare, run_method
    from ..report.smalldata import accuracy_table

    out_dir = Path(out_dir)
    shutil.rmtree(out_dir / "studies", ignore_errors=True)  # a demo starts from scratch, like its store
    ctx = prepare("mnist5k", out_splits=out_dir / "splits", per_class=50, seed=0, splits=[0])
    opts = Options(model="cnn28", epochs=2 if quick else 15, trials=2 if quick else 20, grace_period=1 if quick else 2,
                   repeats=2 if quick else 3, work_dir=str(out_dir), seed=0, threads=1)
    for method in ("ce_untuned", "ce", "cosine"):
        run_method(ctx, method, opts, store)
    table = accuracy_table(store, dataset="mnist5k")
    st = opts.settings(ctx.preset)
    return (f"MNIST-5k, 30 train + 20 val images/class, split 0, {opts.trials} ASHA trials (eta {st.reduction_factor}, "
            f"{st.sampler} search, mean val accuracy of the last {st.score_window} epochs, best of all trials) "
            f"x <= {opts.epochs} epochs, {opts.repeats} final runs per method\n\n" + table.render("markdown"))
