"""Data-parallel training on a CPU: ``devices: 1`` vs ``devices: 2`` (two gloo processes), side by side.

The same fit both ways: a seeded ResNet-32 (or ``--model``) on random 32 px RGB images of 10
classes, the global batch ``--batch`` (each of the 2 processes trains half of it), ``--epochs``
epochs, no augmentation, SGD with the per-step cosine schedule, one CPU thread per process (a
data-parallel fit on a CPU runs every rank single-threaded; see ``vistabench.learners.distributed``),
so ``devices: 1`` is timed with ``threads=1`` too. Rounds are interleaved (the order alternates)
and the table shows the median wall time of ``Trainer.fit`` (process start-up and group set-up
included), the images per second the trainer reports, and the largest absolute difference between
the two runs' weights. ResNet-32 has batch norm, which a CPU cannot synchronise (gloo): each process
normalises with its half of the batch, so the weights differ by more than rounding; ``--model
vit_small`` (layer norm only) agrees to float rounding, as the tests' batch-norm-free network does
(``tests/learners/test_distributed.py``).

On a 2-core machine two processes can at best halve the time; on a machine shared with other work
the second process competes for the same cores, so read the ratio with the load average printed
beside it.

    python benchmarks/bench_devices.py --images 512 --epochs 1 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

from vistabench.learners.models import build_model
from vistabench.learners.trainer import TrainConfig, Trainer


def fit(devices: int, args: argparse.Namespace, x: np.ndarray, y: np.ndarray) -> tuple[float, float, torch.Tensor]:
    model = build_model(args.model, num_classes=10, in_channels=3, image_size=32, seed=0)
    cfg = TrainConfig(epochs=args.epochs, batch_size=args.batch, lr=0.05, threads=1, devices=devices,
                      count_flops=False)
    t0 = time.perf_counter()
    res = Trainer(model, cfg).fit(x, y)
    wall = time.perf_counter() - t0
    return wall, res.images_per_second, torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--model", default="resnet32")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (args.images, 32, 32, 3), dtype=np.uint8)
    y = rng.integers(0, 10, args.images)
    walls: dict[int, list[float]] = {1: [], 2: []}
    ips: dict[int, list[float]] = {1: [], 2: []}
    weights: dict[int, torch.Tensor] = {}
    load0 = os.getloadavg()[0]
    for r in range(args.repeat):
        for d in ((1, 2) if r % 2 == 0 else (2, 1)):
            wall, rate, w = fit(d, args, x, y)
            walls[d].append(wall)
            ips[d].append(rate)
            weights[d] = w
    load1 = os.getloadavg()[0]
    print(f"{args.model}, {args.images} images x {args.epochs} epoch(s), global batch {args.batch}, "
          f"{args.repeat} interleaved rounds, load average {load0:.1f} -> {load1:.1f}")
    print(f"{'devices':>8} {'wall s (median)':>16} {'images/s (median)':>18}")
    for d in (1, 2):
        print(f"{d:>8} {statistics.median(walls[d]):>16.2f} {statistics.median(ips[d]):>18.1f}")
    print(f"ratio devices 2 / devices 1 wall time: {statistics.median(walls[2]) / statistics.median(walls[1]):.2f}")
    print(f"max |w(devices 2) - w(devices 1)|: {float((weights[2] - weights[1]).abs().max()):.3g}")


if __name__ == "__main__":
    main()
