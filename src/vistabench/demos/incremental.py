"""Demo of the few-shot class-incremental protocol on MNIST-5k: prototype vs fine-tune baselines,
scored from their predictions files, with the corner cases."""

from __future__ import annotations

from pathlib import Path

from ..store import ResultsStore


def demo(store: ResultsStore, out_dir: Path, *, quick: bool = False) -> str:
    """MNIST-5k: 5 base digits (0-4), then 5 sessions of 1-way 5-shot (digits 5..9).

    The prototype baseline (frozen backbone, cosine classifier over class means) keeps its base
    accuracy; the fine-tune baseline forgets it. Both are scored from their predictions files and
    shown with the Lazy / Greedy / Greedy-NF corner cases.
    """
    from ..data import load_dataset
    from ..protocols.incremental.runner import build_sessions, run_sessions, write_sessions
    from ..protocols.incremental.config import IncrementalConfig
    from ..report.incremental import incremental_table

    out_dir = Path(out_dir)
    data = load_dataset("mnist5k")
    base_shot = 40 if quick else 200
    sessions = build_sessions(data.train.labels, data.test.labels, base_classes=5, way=1, shot=5, seed=0,
                              base_shot=base_shot, test_per_class=30 if quick else None, dataset="mnist5k")
    sessions = write_sessions(out_dir / "sessions.json", sessions)
    cache: dict = {}  # both methods start from the same (seeded) base session: train it once
    for method in ("prototype", "finetune"):
        config = IncrementalConfig.from_dict({
            "data": "mnist5k", "base_classes": 5, "way": 1, "shot": 5, "base_shot": base_shot,
            "test_per_class": 30 if quick else None, "method": method, "model": "cnn28",
            "epochs": 2 if quick else 4, "novel_epochs": 5, "lr": 0.05, "novel_lr": 0.01,
            "batch_size": 32 if quick else 64, "seed": 0, "tag": "demo"})
        store.add(run_sessions(config, data, sessions, work_dir=out_dir / method, base_cache=cache))
    return incremental_table(store, dataset="mnist5k").render("markdown")
