"""Side-by-side cost of the shared trainer: bare PyTorch loops vs ``Trainer.fit`` (issue 21).

The same work three ways, from the stored uint8 (N, 32, 32, 3) images to a trained model: ResNet-32
(seeded), random 32 px images of 10 classes, batch 128, one epoch, no augmentation, SGD (momentum
0.9, weight decay 5e-4) with the per-step cosine learning rate, cross-entropy, the training loss
tracked per epoch, ``--threads`` CPU threads (2 by default). Building the model is outside the timing.

- ``bare/batch``: a hand-written loop that measures the channel mean/std once, then converts and
  standardises each batch as it goes, as one writes it (``torch.from_numpy(u8).permute(0, 3, 1, 2)
  .float()``: the batch keeps the arrays' channels-last memory, so the convolutions run
  channels-last). The trainer does the same work: the honest comparison;
- ``bare/set``: the same loop converting the whole set up front (4x the memory of the uint8
  images: 0.6 GB for CIFAR-100), then indexing it;
- ``bare/nchw``: ``bare/batch`` with ``.contiguous()`` batches (NCHW memory), as the trainer fed
  its model before issue 21: ~1.25x the time of ``bare/batch`` for ResNet-32 on a CPU. This
  memory-layout difference was the trainer's "fifth";
- ``trainer``: ``Trainer(model, TrainConfig(...)).fit(images, labels)``.

Rounds are interleaved (the order rotates each round) so that load from other work hits every
variant alike; the table shows medians of ``--repeat`` rounds of wall time and of the process's CPU
time (user + system), and the 1-minute load average around the runs. On a machine shared with other
work, wall times at 2 threads are unreliable (a descheduled OpenMP thread stalls its partner); the
CPU seconds (and ``OMP_WAIT_POLICY=passive``, which stops idle OpenMP threads from spinning) are
steadier.

    python benchmarks/bench_trainer_overhead.py --steps 20 40 --repeat 3 [--threads 2] [--flops]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from vistabench.learners.models import build_model
from vistabench.learners.trainer import TrainConfig, Trainer

BATCH = 128
LR = 0.05


def data(steps: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    n = steps * BATCH
    return rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, n)


def channel_stats(images: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and std of the [0, 1] pixels, shaped (1, C, 1, 1), as a user would write it."""
    flat = images.reshape(-1, images.shape[3])
    mean = flat.mean(axis=0, dtype=np.float64) / 255.0
    std = flat.std(axis=0, dtype=np.float64) / 255.0
    return (torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1),
            torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1))


def to_input(u8: np.ndarray, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    x = torch.from_numpy(u8).permute(0, 3, 1, 2).float().div_(255.0)
    return (x - mean) / std


def bare_loop(model: torch.nn.Module, labels: np.ndarray, get_batch: Callable[[np.ndarray], torch.Tensor]) -> float:
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9, weight_decay=5e-4)
    order = np.random.default_rng(0).permutation(len(labels))
    y_all = torch.from_numpy(labels)
    total = math.ceil(len(order) / BATCH)
    model.train()
    running = 0.0
    for t, s in enumerate(range(0, len(order), BATCH)):
        idx = order[s:s + BATCH]
        for g in opt.param_groups:
            g["lr"] = LR * 0.5 * (1.0 + math.cos(math.pi * t / total))
        x, y = get_batch(idx), y_all[torch.from_numpy(idx)]
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        running += loss.item() * len(idx)
    return running / len(order)


def bare_per_batch(model: torch.nn.Module, images: np.ndarray, labels: np.ndarray, threads: int,
                   flops: bool) -> None:
    torch.set_num_threads(threads)
    mean, std = channel_stats(images)
    bare_loop(model, labels, lambda idx: to_input(images[idx], mean, std))


def bare_whole_set(model: torch.nn.Module, images: np.ndarray, labels: np.ndarray, threads: int,
                   flops: bool) -> None:
    torch.set_num_threads(threads)
    mean, std = channel_stats(images)
    x_all = to_input(images, mean, std)
    bare_loop(model, labels, lambda idx: x_all[torch.from_numpy(idx)])


def bare_nchw(model: torch.nn.Module, images: np.ndarray, labels: np.ndarray, threads: int,
              flops: bool) -> None:
    torch.set_num_threads(threads)
    mean, std = channel_stats(images)
    bare_loop(model, labels, lambda idx: to_input(images[idx], mean, std).contiguous())


def trainer(model: torch.nn.Module, images: np.ndarray, labels: np.ndarray, threads: int, flops: bool) -> None:
    cfg = TrainConfig(epochs=1, batch_size=BATCH, lr=LR, threads=threads, count_flops=flops)
    Trainer(model, cfg).fit(images, labels)


Variant = Callable[[torch.nn.Module, np.ndarray, np.ndarray, int, bool], None]
VARIANTS: dict[str, Variant] = {"bare/batch": bare_per_batch, "bare/set": bare_whole_set, "bare/nchw": bare_nchw,
                                "trainer": trainer}


def timed(fn: Variant, images: np.ndarray, labels: np.ndarray, threads: int, flops: bool) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one variant; the model is built before the clocks start."""
    model = build_model("resnet32", num_classes=10, in_channels=3, seed=0)
    c0, w0 = time.process_time(), time.perf_counter()
    fn(model, images, labels, threads, flops)
    return time.perf_counter() - w0, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[20, 40])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--flops", action="store_true", help="count FLOPs in the trainer (default off)")
    ap.add_argument("--only", nargs="+", choices=list(VARIANTS),
                    help="run these variants only (the ratios need 'trainer')")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY', '(unset)')}, batch {BATCH}, ResNet-32 32 px, FLOP counting "
          f"{'on' if args.flops else 'off'}; medians of {args.repeat} interleaved rounds")
    print(f"{'steps':>5}  {'variant':<11} {'wall s':>7} {'cpu s':>7}  {'trainer/this wall':>17} {'cpu':>6}  load")
    for steps in args.steps:
        images, labels = data(steps)
        names = [k for k in VARIANTS if not args.only or k in args.only]
        runs: dict[str, list[tuple[float, float]]] = {k: [] for k in names}
        loads = [os.getloadavg()[0]]
        for r in range(args.repeat):
            for k in names[r % len(names):] + names[:r % len(names)]:
                runs[k].append(timed(VARIANTS[k], images, labels, args.threads, args.flops))
                loads.append(os.getloadavg()[0])
        med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in runs.items()}
        tw, tc = med.get("trainer", (float("nan"), float("nan")))
        for k in names:
            w, c = med[k]
            print(f"{steps:5d}  {k:<11} {w:7.2f} {c:7.2f}  {tw / w:17.3f} {tc / c:6.3f}  "
                  f"{min(loads):.1f}-{max(loads):.1f}   (wall rounds {[round(v, 2) for v, _ in runs[k]]})")


if __name__ == "__main__":
    main()
