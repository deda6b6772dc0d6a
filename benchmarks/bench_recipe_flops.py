"""Training FLOPs of the papers' reference recipes, and their projected time on GPUs (docs/scale.md).

Every FLOP figure comes from the project's own counter (:mod:`vistabench.learners.flops`): one
training step (forward + backward, multiply-add = 2, element-wise work not counted) is counted on
a meta-device copy of the recipe's model and divided by the batch; nothing is trained. The images
per epoch and the epochs are the recipes' (each row's note says where they come from). The GPU
columns are **projections**, not measurements: total FLOPs / (peak × utilisation × GPUs ×
scaling efficiency), with the peak and the utilisation printed above the table (change them with
the flags). ``bench_training_throughput.py --device cuda`` measures a GPU.

    .venv/bin/python benchmarks/bench_recipe_flops.py [--gpus 8] [--util 0.35] [--json]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass

from vistabench.learners.flops import count_train_step_flops
from vistabench.learners.models import build_model
from vistabench.learners.stream.options import batch_size_for
from vistabench.streams import load_stream

#: H100 SXM dense peaks (NVIDIA's H100 datasheet, without sparsity), FLOP/s.
H100_BF16 = 989e12
H100_FP32 = 67e12


@dataclass
class Recipe:
    name: str
    model: str
    classes: int
    channels: int
    side: int
    batch: int
    images_per_epoch: int
    epochs: float  # epochs of training over images_per_epoch (searches: trial epochs summed)
    note: str
    options: dict | None = None


def asha_epochs(trials: int, epochs: int, grace: int, eta: int) -> float:
    """Trial epochs of an idealised ASHA search: every trial reaches the first rung (``grace``
    epochs), a fraction 1/eta**k of them rung k (``grace · eta**k``), 1/eta**K the last epoch."""
    rungs = [grace * eta ** k for k in range(64) if grace * eta ** k < epochs] + [epochs]
    total, prev = 0.0, 0
    for k, r in enumerate(rungs):
        total += trials / eta ** k * (r - prev)
        prev = r
    return total


def smalldata(name: str, model: str, classes: int, channels: int, side: int, per_class: int, val: int,
              trials: int, epochs: int, grace: int, batch: int, opts: dict | None = None) -> Recipe:
    search = asha_epochs(trials, epochs, grace, 2)
    final = 10 * epochs * (per_class + val) / per_class  # 10 final runs on train + val, in train-set epochs
    return Recipe(f"gem {name}", model, classes, channels, side, batch, classes * per_class, search + final,
                  f"ASHA (eta 2, grace {grace}) over {trials} trials x {epochs} epochs on {per_class}/class "
                  f"+ 10 final runs on {per_class + val}/class; batch {batch} (the preset's largest)", opts)


def nevis(steps: int) -> Recipe:
    """The Nevis'22 FULL stream: 16 trials per task, ``steps`` SGD steps each, the dm-nevis batch rule."""
    stream = load_stream("nevis-full")
    sizes = [t.size for t in stream.tasks if t.size]
    images = sum(16 * steps * batch_size_for(n, rule="0.0025n", min_batch=16, max_batch=512) for n in sizes)
    return Recipe("Nevis'22 FULL (dm-nevis)", "cifar_resnet34", 10, stream.channels, stream.image_size, 64,
                  images, 1.0, f"{len(stream.tasks)} tasks x 16 trials x {steps} steps (--steps) x the task's "
                  f"batch (0.0025n rule, 16..512); {sum(sizes):,} training images in the stream")


def recipes(nevis_steps: int) -> list[Recipe]:
    return [
        Recipe("CIFAR-100-LT (rho 100)", "resnet32", 100, 3, 32, 128, 10_847, 200,
               "longtail --recipe reference (LDAM-DRW's cifar_train.py): 200 epochs, batch 128"),
        Recipe("ImageNet-LT", "resnet50", 1000, 3, 224, 512, 115_846, 90,
               "classifier-balancing feat_uniform.yaml: 90 epochs, batch 512 (their ResNeXt-50 ~ResNet-50)"),
        Recipe("iNaturalist 2018", "resnet50", 8142, 3, 224, 512, 437_513, 90,
               "classifier-balancing iNaturalist18 feat_unifrom.yaml: ResNet-50, 90 epochs, batch 512"),
        Recipe("FSCIL miniImageNet (fr, paper)", "vit_small", 60, 3, 84, 128, 30_000, 100,
               "base session 60 classes x 500 images, the paper recipe's ViT (dim 256, depth 12, 8 heads), "
               "100 base epochs assumed (--epochs; default 5)", {"dim": 256, "depth": 12, "heads": 8}),
        Recipe("FSCIL CUB-200 (fr, paper)", "vit_small", 100, 3, 224, 128, 3_000, 100,
               "base session 100 classes x ~30 images at 224 px, same ViT, 100 base epochs assumed",
               {"dim": 256, "depth": 12, "heads": 8}),
        smalldata("ciFAIR-10", "wrn16_8", 10, 3, 32, 30, 20, 250, 500, 50, 50),
        smalldata("EuroSAT", "resnet50", 10, 13, 64, 30, 20, 250, 500, 25, 50, {"small_input": False}),
        smalldata("CUB-200", "resnet50", 200, 3, 224, 20, 10, 100, 200, 10, 32),
        smalldata("ISIC 2018", "resnet50", 7, 3, 224, 50, 30, 100, 500, 25, 32),
        smalldata("CLaMM", "resnet50", 12, 3, 224, 30, 20, 100, 500, 25, 32),
        nevis(nevis_steps),
    ]


def human(seconds: float) -> str:
    if seconds < 1:
        return "<1 s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=8, help="N of the N-GPU column (default 8)")
    ap.add_argument("--util", type=float, default=0.35, help="fraction of peak reached (default 0.35)")
    ap.add_argument("--scaling", type=float, default=0.9, help="data-parallel efficiency on N GPUs (default 0.9)")
    ap.add_argument("--nevis-steps", type=int, default=40, help="SGD steps per Nevis trial (stream run --steps)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = ap.parse_args()
    for flag, value, ok in (("--gpus", args.gpus, args.gpus >= 1), ("--util", args.util, 0 < args.util <= 1),
                            ("--scaling", args.scaling, 0 < args.scaling <= 1),
                            ("--nevis-steps", args.nevis_steps, args.nevis_steps >= 1)):
        if not ok:
            ap.error(f"{flag}: {value} is out of range (--gpus, --nevis-steps >= 1; --util, --scaling in (0, 1])")
    rows = []
    for r in recipes(args.nevis_steps):
        net = build_model(r.model, num_classes=r.classes, in_channels=r.channels, image_size=r.side,
                          **(r.options or {}))
        step = count_train_step_flops(net, (r.channels, r.side, r.side), r.batch)
        per_image = step / r.batch
        per_epoch = per_image * r.images_per_epoch
        total = per_epoch * r.epochs
        t_bf16 = total / (H100_BF16 * args.util)
        t_fp32 = total / (H100_FP32 * args.util)
        rows.append({**asdict(r), "gflop_per_image": per_image / 1e9, "pflop_per_epoch": per_epoch / 1e15,
                     "pflop_total": total / 1e15, "h100_bf16_s": t_bf16, "h100_fp32_s": t_fp32,
                     "n_gpu_bf16_s": t_bf16 / (args.gpus * args.scaling),
                     "n_gpu_fp32_s": t_fp32 / (args.gpus * args.scaling)})
    if args.json:
        print(json.dumps({"h100_bf16_peak": H100_BF16, "h100_fp32_peak": H100_FP32, "util": args.util,
                          "gpus": args.gpus, "scaling": args.scaling, "rows": rows}, indent=1))
        return
    print(f"PROJECTIONS (not measured): H100 SXM dense peaks bf16 {H100_BF16 / 1e12:.0f} TFLOP/s, fp32 "
          f"{H100_FP32 / 1e12:.0f} TFLOP/s, {args.util:.0%} of peak reached; {args.gpus} GPUs at "
          f"{args.scaling:.0%} scaling. FLOPs: vistabench.learners.flops, one counted step / batch.")
    print("| recipe | model, px | GFLOP/image (fwd+bwd) | images/epoch | PFLOP/epoch | epochs | PFLOP total "
          f"| 1 H100 bf16 / fp32 | {args.gpus} H100 bf16 / fp32 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for w in rows:
        whole = w["name"].startswith("Nevis")
        epochs = "1 (the whole run)" if whole else f"{w['epochs']:,.0f}"
        print(f"| {w['name']} | {w['model']}, {w['side']} | {w['gflop_per_image']:.3g} | {w['images_per_epoch']:,} "
              f"| {w['pflop_per_epoch']:.3g} | {epochs} | {w['pflop_total']:.3g} "
              f"| {human(w['h100_bf16_s'])} / {human(w['h100_fp32_s'])} "
              f"| {human(w['n_gpu_bf16_s'])} / {human(w['n_gpu_fp32_s'])} |")
    print()
    for w in rows:
        print(f"- {w['name']}: {w['note']}")


if __name__ == "__main__":
    main()
