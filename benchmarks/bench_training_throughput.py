"""Training throughput of the reference long-tail recipe: a bare PyTorch loop vs vistabench's Trainer.

The recipe is CIFAR-100-LT's: ResNet-32 (seeded), 32 x 32 x 3 uint8 images of 100 classes, batch
128, SGD (momentum 0.9, weight decay 2e-4, lr 0.1 set every step), random crop after 4-pixel zero
padding + horizontal flip, per-channel standardisation, cross-entropy. The images are synthetic:
``--steps`` x 128 random uint8 images and labels drawn by the script from a seeded generator (the
speed of a step does not depend on the pixel values). One epoch per run; building the model is
outside the clock, everything else (channel statistics, moving the set, starting workers) inside.

Each row runs one data source both ways on the same uint8 array:

- ``bare``: the loop written plainly below (no vistabench code): cut the batch, make it a float
  tensor in [0, 1], crop/flip, standardise, forward/backward/step. ``memory``: the batch is cut and
  converted in the training process; ``stream``: a ``torch.utils.data.DataLoader`` with
  ``workers`` processes gathers the batch's items, converted in the training process;
  ``device``: the whole uint8 set is moved to the device once and batches are cut, converted,
  cropped/flipped and standardised there. On a CPU the batch keeps the array's channels-last
  memory (as the trainer's); on CUDA in bf16 the model and batches are channels-last (as the
  trainer's). bf16: forward and loss under ``torch.autocast``.
- ``trainer``: ``Trainer(model, TrainConfig(loader=..., workers=..., precision=..., augment=True,
  count_flops=False)).fit(images, labels)`` (FLOP counting off: the bare loop counts none).
- ``devices 2``: data-parallel over two processes (gloo on a CPU, NCCL on GPUs), the global batch
  of 128 split in two; the bare side is a plain ``DistributedDataParallel`` loop in two processes
  (forked with one thread each on a CPU, spawned on CUDA), the trainer side
  ``TrainConfig(devices=2)``. Run only when this build's TrainConfig takes ``devices=2``.

Rounds are interleaved (the order of the runs rotates each round) so that load from other work
hits both sides alike; the table gives images/s of the trainer and the bare loop from the median
times of ``--repeat`` rounds, the median over the rounds of trainer time / bare time (each round's
pair runs back to back), the per-round ratios, and what one CIFAR-100-LT reference run
(200 epochs x 10,847 images, ResNet-32) would take at the trainer's measured images/s.

    python benchmarks/bench_training_throughput.py                       # CPU, small defaults
    python benchmarks/bench_training_throughput.py --device cuda --steps 200 --repeat 3
    python benchmarks/bench_training_throughput.py --json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from vistabench.errors import InputError
from vistabench.learners.models import build_model
from vistabench.learners.trainer import TrainConfig, Trainer

BATCH = 128
CLASSES = 100
LR, MOMENTUM, WEIGHT_DECAY = 0.1, 0.9, 2e-4
CIFAR100_LT_IMAGES = 10_847  # CIFAR-100-LT training set at imbalance 100
REFERENCE_EPOCHS = 200
NO_DEVICES = "n/a (this build has no devices option)"


def data(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic CIFAR-style data: seeded random uint8 (N, 32, 32, 3) images and labels of 100 classes."""
    rng = np.random.default_rng(0)
    n = steps * BATCH
    return rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8), rng.integers(0, CLASSES, n)


def has_devices_option() -> bool:
    """Whether this build's TrainConfig takes ``devices=2`` (no such field, or a build that declares it
    but refuses data-parallel training: no)."""
    if not any(f.name == "devices" for f in dataclasses.fields(TrainConfig)):
        return False
    try:
        TrainConfig(batch_size=BATCH, devices=2)
    except InputError:
        return False
    return True


# ------------------------------------------------------------------------------ the bare loop


def channel_stats(images: np.ndarray, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    flat = images.reshape(-1, images.shape[3])
    mean = flat.mean(axis=0, dtype=np.float64) / 255.0
    std = flat.std(axis=0, dtype=np.float64) / 255.0
    return (torch.tensor(mean, dtype=torch.float32, device=device).view(1, -1, 1, 1),
            torch.tensor(std, dtype=torch.float32, device=device).view(1, -1, 1, 1))


def crop_flip(x: torch.Tensor, gen: torch.Generator, pad: int = 4) -> torch.Tensor:
    """Random crop after zero padding and a random horizontal flip, per image (vectorised)."""
    n, c, h, w = x.shape
    dev = x.device
    xp = F.pad(x, (pad, pad, pad, pad))
    top = torch.randint(0, 2 * pad + 1, (n, 1), generator=gen).to(dev)
    left = torch.randint(0, 2 * pad + 1, (n, 1), generator=gen).to(dev)
    rows = (top + torch.arange(h, device=dev)).view(n, 1, h, 1)
    cols = (left + torch.arange(w, device=dev)).view(n, 1, 1, w)
    x = xp[torch.arange(n, device=dev).view(n, 1, 1, 1), torch.arange(c, device=dev).view(1, c, 1, 1), rows, cols]
    flip = (torch.rand(n, generator=gen) < 0.5).to(dev).view(n, 1, 1, 1)
    return torch.where(flip, x.flip(3), x)


class _Items(torch.utils.data.Dataset):
    def __init__(self, images: np.ndarray) -> None:
        self.images = images

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.images[i]


def _stack(items: list) -> np.ndarray:
    return np.stack(items)


def bare_fit(model: torch.nn.Module, images: np.ndarray, labels: np.ndarray, *, source: str, workers: int,
             precision: str, device: torch.device, batch: int = BATCH, order: np.ndarray | None = None) -> float:
    """One epoch of the plain loop; returns the mean training loss (read once, at the end)."""
    amp = torch.bfloat16 if precision == "bf16" else None
    channels_last = device.type == "cpu" or amp is not None
    if device.type == "cuda" and amp is not None:
        model.to(memory_format=torch.channels_last)
    mean, std = channel_stats(images, device)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    if order is None:
        order = np.random.default_rng(0).permutation(len(labels))
    batches = [order[s:s + batch] for s in range(0, len(order), batch)]
    gen = torch.Generator().manual_seed(1)
    y_all = torch.from_numpy(labels).to(device)

    if source == "device":
        on_device = torch.from_numpy(images).to(device)

        def raw_batches():
            for b in batches:
                yield on_device[torch.from_numpy(b).to(device)]
    elif source == "stream":
        loader = torch.utils.data.DataLoader(_Items(images), batch_sampler=[b.tolist() for b in batches],
                                             num_workers=workers, collate_fn=_stack)

        def raw_batches():
            for u8 in loader:
                yield torch.from_numpy(u8)
    else:
        def raw_batches():
            for b in batches:
                yield torch.from_numpy(images[b])

    model.train()
    total = len(batches)
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), dtype=torch.long, device=device)
    for t, (b, u8) in enumerate(zip(batches, raw_batches())):
        for g in opt.param_groups:
            g["lr"] = LR * 0.5 * (1.0 + math.cos(math.pi * t / total))
        x = u8.permute(0, 3, 1, 2).float().div_(255.0)  # NHWC memory seen as NCHW: channels-last
        x = crop_flip(x, gen)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        else:
            x = x.contiguous()
        x = (x.to(device, non_blocking=True) - mean) / std
        y = y_all[torch.from_numpy(b).to(device)]
        with torch.autocast(device.type, dtype=amp) if amp is not None else _no_autocast():
            logits = model(x)
            loss = F.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss_sum += loss.detach() * len(b)
        correct += (logits.detach().argmax(1) == y).sum()
    return float(loss_sum) / len(order)


class _no_autocast:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _bare_ddp_worker(rank: int, world: int, port: int, images: np.ndarray, labels: np.ndarray, precision: str,
                     device_type: str, threads: int) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(threads)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("nccl" if device_type == "cuda" else "gloo", rank=rank, world_size=world)
    device = torch.device(f"cuda:{rank}") if device_type == "cuda" else torch.device("cpu")
    model = build_model("resnet32", num_classes=CLASSES, in_channels=3, seed=0).to(device)
    if device_type == "cuda" and precision == "bf16":
        model.to(memory_format=torch.channels_last)  # before wrapping, as bare_fit would
    ddp = DDP(model, device_ids=[rank] if device_type == "cuda" else None)
    order = np.random.default_rng(0).permutation(len(labels))
    mine = np.concatenate([order[s:s + BATCH][rank::world] for s in range(0, len(order), BATCH)])
    bare_fit(ddp, images, labels, source="memory", workers=0, precision=precision, device=device,
             batch=BATCH // world, order=mine)
    dist.destroy_process_group()


def bare_ddp(images: np.ndarray, labels: np.ndarray, precision: str, device: torch.device, threads: int) -> None:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # a CPU forks its two ranks, one thread each (a fork cannot use the parent's OpenMP pool); CUDA
    # spawns them (a fork cannot use CUDA): as the trainer's devices option does
    cpu = device.type == "cpu"
    torch.multiprocessing.start_processes(
        _bare_ddp_worker, args=(2, port, images, labels, precision, device.type, 1 if cpu else threads),
        nprocs=2, join=True, start_method="fork" if cpu else "spawn")


# -------------------------------------------------------------------------------- the trainer


def trainer_fit(model: torch.nn.Module, images: np.ndarray, labels: np.ndarray, *, source: str, workers: int,
                precision: str, device: torch.device, threads: int, devices: int = 1) -> None:
    extra = {"devices": devices} if devices != 1 else {}
    cfg = TrainConfig(epochs=1, batch_size=BATCH, lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY, seed=0,
                      augment=True, loader=source, workers=workers, precision=precision, device=str(device),
                      threads=threads, count_flops=False, **extra)
    Trainer(model, cfg).fit(images, labels)


# ------------------------------------------------------------------------------------ the table


@dataclasses.dataclass
class Row:
    source: str
    workers: int
    precision: str
    devices: int

    @property
    def label(self) -> str:
        src = f"stream w{self.workers}" if self.source == "stream" else self.source
        return f"{src:<10} {self.precision:<5} {self.devices}"


def rows_for(args: argparse.Namespace) -> list[Row]:
    rows = []
    for precision in args.precision:
        for source in args.sources:
            for w in ([0, 2] if source == "stream" else [0]):
                rows.append(Row(source, w, precision, 1))
    for precision in args.precision:
        rows.append(Row("memory", 0, precision, 2))
    return rows


def run_once(row: Row, side: str, images: np.ndarray, labels: np.ndarray, device: torch.device,
             threads: int) -> float:
    """Wall seconds of one epoch of ``side`` ('bare' or 'trainer') for ``row``."""
    torch.set_num_threads(threads)
    model = None
    if not (row.devices == 2 and side == "bare"):
        model = build_model("resnet32", num_classes=CLASSES, in_channels=3, seed=0).to(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    if side == "bare" and row.devices == 2:
        bare_ddp(images, labels, row.precision, device, threads)
    elif side == "bare":
        bare_fit(model, images, labels, source=row.source, workers=row.workers, precision=row.precision,
                 device=device)
    else:
        trainer_fit(model, images, labels, source=row.source, workers=row.workers, precision=row.precision,
                    device=device, threads=threads, devices=row.devices)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "load average: " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


def duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "n/a"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="Prints images/s per data source, precision and device count, and the "
                                        "trainer/bare time ratio per row.")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    ap.add_argument("--steps", type=int, default=6, help="optimisation steps of 128 images per run (default 6)")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds; medians are shown (default 3)")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads torch may use (default 2)")
    ap.add_argument("--sources", nargs="+", default=["memory", "stream", "device"],
                    choices=["memory", "stream", "device"], help="data sources (stream runs with 0 and 2 workers)")
    ap.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    ap.add_argument("--json", action="store_true", help="print the results as one JSON object instead of a table")
    args = ap.parse_args()
    if args.steps < 1 or args.repeat < 1 or args.threads < 1:
        ap.error("--steps, --repeat and --threads: expected integers >= 1")
    try:
        device = torch.device(args.device)
    except RuntimeError:
        ap.error(f"--device: expected cpu, cuda or cuda:N, got {args.device!r}")
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device: cuda requested but torch sees no CUDA device")
    if device.type not in ("cpu", "cuda"):
        ap.error(f"--device: expected cpu, cuda or cuda:N, got {args.device!r}")
    torch.set_num_threads(args.threads)

    images, labels = data(args.steps)
    rows = rows_for(args)
    ddp_ok = has_devices_option()
    two_gpus = device.type != "cuda" or torch.cuda.device_count() >= 2
    skipped = {i: (NO_DEVICES if not ddp_ok else "n/a (needs 2 CUDA devices)")
               for i, r in enumerate(rows) if r.devices == 2 and not (ddp_ok and two_gpus)}
    runs = [(i, side) for i in range(len(rows)) if i not in skipped for side in ("bare", "trainer")]
    load_before = uptime()
    if not args.json:
        print(f"torch {torch.__version__}, device {device}, {args.threads} threads, ResNet-32, batch {BATCH}, "
              f"{args.steps} steps of synthetic seeded uint8 32x32x3 images per run, medians of {args.repeat} "
              "interleaved rounds")
        print(f"before: {load_before}", flush=True)

    # warm-up (not timed): first-use costs of the kernels of each precision
    for precision in args.precision:
        run_once(Row("memory", 0, precision, 1), "bare", images[:2 * BATCH], labels[:2 * BATCH], device, args.threads)

    times: dict[tuple[int, str], list[float]] = {k: [] for k in runs}
    for r in range(args.repeat):
        shift = (r * 2) % max(1, len(runs))
        for i, side in runs[shift:] + runs[:shift]:
            times[(i, side)].append(run_once(rows[i], side, images, labels, device, args.threads))
        print(f"round {r + 1}/{args.repeat} done ({time.strftime('%H:%M:%S')})", file=sys.stderr, flush=True)
    load_after = uptime()

    n = len(labels)
    out = []
    for i, row in enumerate(rows):
        entry = {"source": row.source, "workers": row.workers, "precision": row.precision, "devices": row.devices}
        if i in skipped:
            entry["skipped"] = skipped[i]
        else:
            bare, tr = statistics.median(times[(i, "bare")]), statistics.median(times[(i, "trainer")])
            # each round's trainer and bare runs are neighbours in time: the median of the paired
            # ratios is steadier under outside load than the ratio of the two medians
            paired = statistics.median(t / b for t, b in zip(times[(i, "trainer")], times[(i, "bare")]))
            entry.update(bare_seconds=bare, trainer_seconds=tr, bare_images_per_s=n / bare,
                         trainer_images_per_s=n / tr, trainer_over_bare=paired,
                         reference_run_seconds=REFERENCE_EPOCHS * CIFAR100_LT_IMAGES / (n / tr),
                         bare_rounds=times[(i, "bare")], trainer_rounds=times[(i, "trainer")])
        out.append(entry)

    if args.json:
        print(json.dumps({"torch": torch.__version__, "device": str(device), "threads": args.threads,
                          "steps": args.steps, "batch": BATCH, "repeat": args.repeat, "model": "resnet32",
                          "data": "synthetic seeded uint8 32x32x3, 100 classes", "load_before": load_before,
                          "load_after": load_after, "rows": out}, indent=2))
        return
    print(f"\n{'source':<10} {'prec':<5} {'dev':>3}  {'bare img/s':>10} {'trainer img/s':>13}  {'trainer/bare':>12}  "
          f"{'CIFAR-100-LT run':>16}  rounds trainer/bare")
    for row, e in zip(rows, out):
        if "skipped" in e:
            print(f"{row.label:<20}  {e['skipped']}")
            continue
        ratios = [t / b for t, b in zip(e["trainer_rounds"], e["bare_rounds"])]
        print(f"{row.label:<20}  {e['bare_images_per_s']:10.1f} {e['trainer_images_per_s']:13.1f}  "
              f"{e['trainer_over_bare']:12.3f}  {duration(e['reference_run_seconds']):>16}  "
              f"{[round(v, 2) for v in ratios]}")
    print(f"\ntrainer/bare: median over the rounds of the trainer's time over the bare loop's in the same round "
          f"(1.10 = 10% slower); images/s from the median times. CIFAR-100-LT run: "
          f"{REFERENCE_EPOCHS} epochs x {CIFAR100_LT_IMAGES:,} images at the trainer's images/s.")
    print(f"after:  {load_after}")


if __name__ == "__main__":
    main()
