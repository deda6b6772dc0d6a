"""The pycocotools drop-in path against faster-coco-eval: the same script, whole process each.

Each round runs, each in its own process, the script a pycocotools user runs —
``COCO(gt)`` → ``coco.loadRes(results)`` → ``COCOeval(...)`` → ``evaluate(); accumulate(); summarize()``
— with ``vistabench.compat.coco`` and with faster-coco-eval (``faster_coco_eval.COCO`` /
``COCOeval_faster``), and optionally pycocotools; rounds alternate the tools (A B A B ...), so a
change in the machine's speed hits both. Prints every round, min / median / max per tool, the
per-round ratios (min / median / max) and the |stats difference| between the tools.

Not run in CI; the machine's load changes every ratio (the script prints the load average).

    python benchmarks/detection_compat.py --repeat 5              # COCO-val size: 5,000 images x 80 classes
    python benchmarks/detection_compat.py --iou-type segm --images 500 --masks
    python benchmarks/detection_compat.py --pycocotools --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import contextlib, io, json, sys, time
which, gt, dt, iou_type = sys.argv[1:5]
t0 = time.perf_counter()
if which == "vistabench":
    from vistabench.compat.coco import COCO, COCOeval
elif which == "pycocotools":
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
else:
    from faster_coco_eval import COCO, COCOeval_faster as COCOeval
with contextlib.redirect_stdout(io.StringIO()):
    g = COCO(gt)
    d = g.loadRes(dt)
    e = COCOeval(g, d, iou_type)
    e.evaluate(); e.accumulate(); e.summarize()
print(json.dumps({"seconds": time.perf_counter() - t0, "stats": [float(x) for x in e.stats]}))
"""


def run(which: str, gt: Path, dt: Path, iou_type: str, timeout: float) -> dict:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD, which, str(gt), str(dt), iou_type], capture_output=True,
                       text=True, timeout=timeout)
    wall = time.perf_counter() - t0  # the whole process: start-up, imports, reading, evaluation
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]}
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["wall"] = wall
    return out


def spread(xs: list[float], fmt: str = "{:.2f}") -> str:
    return f"min {fmt.format(min(xs))}  median {fmt.format(statistics.median(xs))}  max {fmt.format(max(xs))}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=5000, help="images (COCO val: 5,000)")
    ap.add_argument("--categories", type=int, default=80)
    ap.add_argument("--dets-per-image", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--iou-type", default="bbox", choices=["bbox", "segm"])
    ap.add_argument("--masks", action="store_true", help="write masks (needed for --iou-type segm)")
    ap.add_argument("--repeat", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--pycocotools", action="store_true", help="also run pycocotools (slow)")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--keep", metavar="DIR", help="write the set here and reuse it when it is already there")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error(f"--repeat: expected a positive integer, got {args.repeat}")
    if args.iou_type == "segm" and not args.masks:
        ap.error("--iou-type segm needs --masks")
    sys.path.insert(0, str(Path(__file__).parent))
    from detection_eval import write_columns

    from vistabench.data.detection_synth import synth_detection_set

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        gt, dt = folder / "gt.json", folder / "results.json"
        if not (args.keep and gt.exists() and dt.exists()):
            s = synth_detection_set(num_images=args.images, num_categories=args.categories,
                                    dets_per_image=args.dets_per_image, seed=args.seed, format="coco",
                                    masks=args.masks, results_as_columns=not args.masks)
            gt.write_text(json.dumps(s.ground_truth))
            if args.masks:
                dt.write_text(json.dumps(s.results))
            else:
                write_columns(dt, s.results)
            del s
        n_gt = len(json.loads(gt.read_text())["annotations"])
        print(f"set: {args.images} images x {args.categories} classes, {n_gt} ground truths, results "
              f"{dt.stat().st_size / 1e6:.0f} MB ({args.iou_type})")
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
        tools = ["vistabench", "faster-coco-eval"] + (["pycocotools"] if args.pycocotools else [])
        runs: dict[str, list[dict]] = {t: [] for t in tools}
        for r in range(args.repeat):
            for t in tools if r % 2 == 0 else tools[::-1]:  # A B, B A, ...: neither always goes first
                out = run(t, gt, dt, args.iou_type, args.timeout)
                runs[t].append(out)
                msg = out["error"] if "error" in out else f"{out['wall']:7.2f} s  AP {out['stats'][0]:.6f}"
                print(f"round {r + 1}  {t:<17} {msg}")
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    ok = {t: [x for x in v if "error" not in x] for t, v in runs.items()}
    print("\nwhole process, seconds:")
    for t, v in ok.items():
        if v:
            print(f"  {t:<17} {spread([x['wall'] for x in v])}")
    ours = runs["vistabench"]
    for t in tools[1:]:
        pairs = [(b["wall"] / a["wall"], a, b) for a, b in zip(ours, runs[t]) if "error" not in a and "error" not in b]
        if not pairs:
            continue
        diff = max(max(abs(x - y) for x, y in zip(a["stats"], b["stats"])) for _, a, b in pairs)
        print(f"[target >= 5x] compat.coco vs {t}, per-round ratio: {spread([p[0] for p in pairs], '{:.1f}x')}; "
              f"max |stats difference| {diff:.1e}")


if __name__ == "__main__":
    main()
