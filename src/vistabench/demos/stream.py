"""Demo of the stream protocol: every baseline (Indep, FT-prev, FT-d, MT, ensembling, BHPO, PT) at
several budgets on the embedded stream."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from ..atomic import write_figure
from ..store import ResultsStore

# (trials, steps) per budget; quick: one tiny budget and three learners (a smoke test)
BUDGETS = [(1, 12), (2, 24)]
QUICK_BUDGETS = [(1, 4)]
LEARNERS = ["indep", "ft-prev", "ft-d", "mt", "ensemble", "bhpo", "pt"]
QUICK_LEARNERS = ["indep", "ft-d", "pt"]
OPTIONS = {"model": "cnn28", "width": 8, "min_batch": 32}


def pretrain_checkpoint(path: Path, *, steps: int, image_size: int, seed: int = 0) -> dict:
    """Train the demo backbone on all of MNIST-5k's training part (external to the stream's test
    images) and save its state dict: the ``pt`` learner's checkpoint. Returns what it cost."""
    import numpy as np

    from ..learners.models import build_model
    from ..learners.stream.base import save_checkpoint
    from ..learners.trainer import TrainConfig, Trainer
    from ..streams.sources import bundled_dataset, to_input_format

    train = bundled_dataset("mnist5k").train
    rng = np.random.default_rng(seed)
    bs = 64
    idx = rng.permutation(len(train))[: steps * bs]
    x = to_input_format(train.images[idx], image_size=image_size, channels=1)
    model = build_model(OPTIONS["model"], num_classes=10, in_channels=1, seed=seed, width=OPTIONS["width"])
    res = Trainer(model, TrainConfig(epochs=1, lr=0.1, batch_size=bs, seed=seed)).fit(x, train.labels[idx])
    save_checkpoint(model, path)
    return {"steps": res.steps, "flops": res.flops, "seconds": res.seconds}


def demo(store: ResultsStore, out_dir: Path, *, quick: bool) -> str:
    import torch

    from ..protocols.stream.runner import default_run_id, run
    from ..protocols.stream.config import StreamConfig
    from ..report.stream import pareto_figure, runs_table
    from ..streams import load_stream
    from ..report.stream_analysis import analyse

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread is faster than two that contend
    try:
        stream = load_stream("embedded")
        t0 = time.perf_counter()
        ckpt = out_dir / "pretrained_cnn28.pt"
        pre = pretrain_checkpoint(ckpt, steps=10 if quick else 40, image_size=stream.image_size)
        runs = []
        for learner_name in (QUICK_LEARNERS if quick else LEARNERS):
            for trials, steps in (QUICK_BUDGETS if quick else BUDGETS):
                extra = {"checkpoint": str(ckpt)} if learner_name == "pt" else {}
                rid = default_run_id(stream, learner_name, trials, steps, 0)
                config = StreamConfig.from_dict({"stream": stream.name, "learner": learner_name, "trials": trials,
                                                 "steps": steps, "seed": 0, "run_id": rid, **OPTIONS, **extra})
                store.delete(protocol="stream", run_id=rid)  # a demo starts its runs afresh
                shutil.rmtree(out_dir / "runs" / rid, ignore_errors=True)
                run(config, store=store, work_dir=out_dir / "runs")
                runs.append(rid)
        a = analyse(store, runs)
        fig = pareto_figure(a, stream=stream.name)
        write_figure(fig, out_dir / "pareto.png", dpi=110, bbox_inches="tight")  # legend outside the axes
        import matplotlib.pyplot as plt

        plt.close(fig)
    finally:
        torch.set_num_threads(threads)
    from ..report.units import si_text

    lines = [runs_table(a, stream=stream.name).render("markdown"), ""]
    lines += [v["text"] for v in a["verdicts"].get(stream.name, {}).values()]
    lines.append(f"PT checkpoint: {pre['steps']} steps on MNIST-5k train ({si_text(pre['flops'])}, "
                 "not part of cFLOP, like the paper's external pretraining).")
    lines.append(f"Pareto plot: {out_dir / 'pareto.png'} ({time.perf_counter() - t0:.1f} s for {len(runs)} runs)")
    return "\n".join(lines)
