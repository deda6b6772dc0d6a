"""Training cost of every small-data method (the paper's Table 4 protocol, scaled down).

Each registered method trains its backbone for --epochs on --images random images of --size px
at a constant batch size of 8 (the paper's choice for Table 4) with the method's hyper-parameters
at the reference defaults, and reports training images/s and peak memory (CUDA: torch's peak
allocation; CPU: the process's peak RSS, a lifetime maximum, so only an upper bound — run one
method per process with --methods for clean CPU memory figures). DVP's images/s covers the
classifier stage only (the paper also leaves its contrastive pre-training out).

    .venv/bin/python benchmarks/smalldata_method_cost.py [--model resnet18] [--size 32] [--device cuda]
"""

from __future__ import annotations

import argparse

import numpy as np

from vistabench.learners.smalldata import build_method, methods
from vistabench.learners.recipe import Recipe
from vistabench.learners.trainer import TrainConfig, Trainer

DEFAULTS = {"xent_weight": 0.1, "dct_level": 5, "grad_l2": 0.1, "scattering_J": 2, "ole_weight": 0.25,
            "distill_weight": 1e-4, "aux_scale": 0.25, "auxgrad_every": 15, "num_aux_classes": 5,
            "aux_set_size": 0.015, "kappa": 16.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="cnn28")
    ap.add_argument("--size", type=int, default=28)
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--images", type=int, default=400)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--methods", nargs="+", default=None)
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (args.images, args.size, args.size, args.channels), dtype=np.uint8)
    y = np.arange(args.images) % args.classes
    print(f"{args.model}, {args.size} px, {args.images} images x {args.epochs} epochs, batch 8, {args.device}\n")
    print(f"{'method':12} | {'images/s':>9} | {'peak memory (GB)':>16} | measured as")
    for name in args.methods or methods.names():
        model, loss = build_method(name, Recipe(model=args.model), DEFAULTS, num_classes=args.classes, in_channels=args.channels,
                                   image_size=args.size, seed=0)
        tr = Trainer(model, TrainConfig(epochs=args.epochs, lr=0.01, batch_size=8, device=args.device,
                                        count_flops=False, threads=args.threads), loss_fn=loss)
        res = tr.fit(x, y)
        print(f"{name:12} | {res.images_per_second:9.1f} | {res.peak_memory_bytes / 1e9:16.2f} | {res.peak_memory_kind}")


if __name__ == "__main__":
    main()
