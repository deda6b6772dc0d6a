"""Side-by-side cost of the shared trainer: a bare PyTorch loop vs ``Trainer.fit`` (issue 21).

Same model (ResNet-32, seeded), same data (random 32 px uint8 images, 10 classes), batch 128, no
augmentation, SGD (momentum 0.9, weight decay 5e-4), cross-entropy, 2 CPU threads. The bare loop
converts and normalises the whole set once up front (as a hand-written loop would); the trainer
does it per batch, as it does for every protocol. Runs are interleaved (bare, trainer, bare, ...)
so that a machine loaded by other work slows both alike; medians of ``--repeat`` rounds.

    python benchmarks/bench_trainer_overhead.py --steps 20 40 --repeat 3 [--flops]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

from vistabench.learners.models import build_model
from vistabench.learners.tensors import Normaliser, to_float_nchw
from vistabench.learners.trainer import TrainConfig, Trainer

BATCH = 128


def data(steps: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    n = steps * BATCH
    return rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, n)


def bare(images: np.ndarray, labels: np.ndarray, threads: int) -> float:
    torch.set_num_threads(threads)
    model = build_model("resnet32", num_classes=10, in_channels=3, seed=0)
    x_all = Normaliser.fit(images).apply(to_float_nchw(images))
    y_all = torch.from_numpy(labels)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    order = np.random.default_rng(0).permutation(len(labels))
    model.train()
    t0 = time.perf_counter()
    for s in range(0, len(order), BATCH):
        idx = torch.from_numpy(order[s:s + BATCH])
        x, y = x_all[idx], y_all[idx]
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return time.perf_counter() - t0


def trainer(images: np.ndarray, labels: np.ndarray, threads: int, flops: bool) -> float:
    model = build_model("resnet32", num_classes=10, in_channels=3, seed=0)
    cfg = TrainConfig(epochs=1, batch_size=BATCH, lr=0.05, num_threads=threads, count_flops=flops)
    t0 = time.perf_counter()
    Trainer(model, cfg).fit(images, labels)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[20, 40])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--flops", action="store_true", help="count FLOPs in the trainer (default off)")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {args.threads} threads, batch {BATCH}, ResNet-32 32 px, "
          f"FLOP counting {'on' if args.flops else 'off'}; medians of {args.repeat} interleaved rounds")
    print(f"{'steps':>5}  {'bare s':>8}  {'Trainer.fit s':>13}  {'ratio':>6}")
    for steps in args.steps:
        images, labels = data(steps)
        b, t = [], []
        for _ in range(args.repeat):
            b.append(bare(images, labels, args.threads))
            t.append(trainer(images, labels, args.threads, args.flops))
        mb, mt = statistics.median(b), statistics.median(t)
        print(f"{steps:5d}  {mb:8.2f}  {mt:13.2f}  {mt / mb:6.3f}   (rounds: bare {[round(v, 2) for v in b]}, "
              f"trainer {[round(v, 2) for v in t]})")


if __name__ == "__main__":
    main()
