"""Overhead of the stream runner's FLOP accounting (the ComputeLedger) relative to training.

Trains one search trial on an embedded-stream task three ways and prints side-by-side times:
no accounting at all, the ledger (one meta-device count per architecture/shape/batch, cached,
then steps x per-step), and the trainer's own per-fit counting. Not run in CI.

    python benchmarks/bench_stream_accounting.py [--steps 200]
"""

import argparse
import time

import numpy as np
import torch

from vistabench.learners.models import build_model
from vistabench.learners.flops import clear_cache
from vistabench.learners.stream.base import ComputeLedger
from vistabench.learners.trainer import TrainConfig, Trainer
from vistabench.streams import load_stream
from vistabench.streams.sources import resolve_task


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    s = load_stream("embedded")
    d = resolve_task(s.tasks[0], s).train
    bs = 32
    idx = np.resize(np.arange(len(d)), args.steps * bs)
    x, y = d.images[idx], d.targets[idx]

    def fit(count_in_trainer: bool) -> float:
        m = build_model("cnn28", num_classes=d.num_classes, in_channels=1, seed=0, width=8)
        t0 = time.perf_counter()
        Trainer(m, TrainConfig(epochs=1, batch_size=bs, count_flops=count_in_trainer)).fit(x, y)
        return time.perf_counter() - t0

    def ledger(first: bool) -> float:
        m = build_model("cnn28", num_classes=d.num_classes, in_channels=1, seed=0, width=8)
        if first:
            clear_cache()
        t0 = time.perf_counter()
        ComputeLedger().charge_train(m, (1, 16, 16), bs, args.steps)
        return time.perf_counter() - t0

    fit(False)  # warm-up
    base = min(fit(False) for _ in range(args.repeats))
    trainer_count = min(fit(True) for _ in range(args.repeats))
    first = min(ledger(True) for _ in range(args.repeats))
    cached = min(ledger(False) for _ in range(args.repeats))
    print(f"training {args.steps} steps (no accounting): {base:.3f} s")
    print(f"trainer counting inside fit:       {trainer_count:.3f} s  ratio {trainer_count / base:.3f}")
    print(f"ledger, first count (uncached):     {first:.4f} s  = {100 * first / base:.2f}% of training")
    print(f"ledger, cached (every later trial): {cached:.6f} s  = {100 * cached / base:.4f}% of training")


if __name__ == "__main__":
    main()
