"""FLOP accounting overhead: the same training run with and without counting.

The trainer counts one training step per distinct batch size on a meta-device copy of the model
(docs/stream.md) and multiplies; this prints how much wall time that adds, two ways: end to end
(best of ``--repeats`` runs each way, alternated, with the per-process count cache cleared so
every counted run pays for its counts), and the directly timed cost of the counts one fit makes
(median of 5) relative to the uncounted training time. Later fits of the same architecture in a
process (hyper-parameter trials) hit the cache and pay nothing. The first FlopCounterMode use in a
process pays a one-time set-up (about a second); it is done before timing and printed apart.

    .venv/bin/python benchmarks/bench_flop_accounting.py [--threads 1] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from vistabench.data import load_dataset
from vistabench.learners.flops import clear_cache, count_train_step_flops
from vistabench.learners.models import build_model
from vistabench.learners.trainer import TrainConfig, Trainer


def run(model: str, images: np.ndarray, labels: np.ndarray, classes: int, *, count: bool, epochs: int,
        batch_size: int, threads: int) -> tuple[float, int]:
    net = build_model(model, num_classes=classes, in_channels=images.shape[3], image_size=images.shape[1], seed=0)
    cfg = TrainConfig(epochs=epochs, batch_size=batch_size, lr=0.05, seed=0, count_flops=count, threads=threads)
    t0 = time.perf_counter()
    res = Trainer(net, cfg).fit(images, labels)
    return time.perf_counter() - t0, res.flops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    count_train_step_flops(build_model("cnn28", num_classes=2, in_channels=1), (1, 8, 8), 2)
    print(f"one-time FlopCounterMode set-up in this process: {time.perf_counter() - t0:.2f} s (not in the ratios)")
    mnist = load_dataset("mnist5k").train
    rng = np.random.default_rng(0)
    cifar_like = rng.integers(0, 256, (1024, 32, 32, 3), dtype=np.uint8)
    cases = [
        ("cnn28", mnist.images, mnist.labels, 10, 3, 64),
        ("resnet32", cifar_like, rng.integers(0, 10, 1024), 10, 2, 64),
    ]
    print(f"{'model':10s} {'steps':>6s} {'no count s':>11s} {'count s':>9s} {'ratio':>7s} "
          f"{'counts s':>9s} {'direct %':>9s} {'GFLOP':>9s}")
    for model, x, y, c, epochs, bs in cases:
        off, on, flops = [], [], 0
        for _ in range(args.repeats):  # alternate to share any drift in machine load
            off.append(run(model, x, y, c, count=False, epochs=epochs, batch_size=bs, threads=args.threads)[0])
            clear_cache()  # time the counting itself, as in the first fit of a process
            t, flops = run(model, x, y, c, count=True, epochs=epochs, batch_size=bs, threads=args.threads)
            on.append(t)
        steps = epochs * int(np.ceil(len(y) / bs))
        net = build_model(model, num_classes=c, in_channels=x.shape[3], image_size=x.shape[1])
        sizes = {bs} | ({len(y) % bs} if len(y) % bs > 1 else set())  # what one fit counts
        shape = (x.shape[3], x.shape[1], x.shape[2])
        per = []
        for _ in range(5):
            clear_cache()
            t0 = time.perf_counter()
            for n in sizes:
                count_train_step_flops(net, shape, n)
            per.append(time.perf_counter() - t0)
        direct = float(np.median(per))
        print(f"{model:10s} {steps:6d} {min(off):11.2f} {min(on):9.2f} {min(on) / min(off):7.3f} "
              f"{direct:9.3f} {100 * direct / min(off):8.1f}% {flops / 1e9:9.1f}")


if __name__ == "__main__":
    main()
