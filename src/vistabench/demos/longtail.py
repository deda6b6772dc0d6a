"""Demo of the long-tailed protocol: MNIST-5k made long-tailed (rho = 100), reference methods
trained, the sweep scored, records to the store."""

from __future__ import annotations

from pathlib import Path

from ..store import ResultsStore

DEMO_METHODS = ("ce", "balanced_softmax", "logit_adjust", "ldam_drw", "tade")  # tade: test-agnostic experts


def demo(store: ResultsStore, out_dir: Path, *, quick: bool = False) -> str:
    """MNIST-5k made long-tailed (rho = 100), reference methods trained, the sweep scored."""
    from ..progress import track
    from ..protocols.longtail.runner import run
    from ..protocols.longtail.config import LongtailConfig
    from ..report.longtail import longtail_table

    methods = DEMO_METHODS[:2] if quick else DEMO_METHODS
    epochs = 2 if quick else 8
    for method in track(methods, description="longtail: training methods"):
        config = LongtailConfig.from_dict({"data": "mnist5k", "method": method, "imbalance": 100,
                                           "epochs": epochs, "seed": 0, "tag": "demo"})
        run(config, work_dir=Path(out_dir) / method, store=store)
    return longtail_table(store).render("markdown")
