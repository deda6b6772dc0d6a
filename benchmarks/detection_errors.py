"""TIDE's error decomposition: `vistabench detection errors` beside tidecv 1.0.1 on the same files.

Each side reads the ground truth and the results JSON and computes the six main and two special ΔAP
(tidecv: ``datasets.COCO`` / ``COCOResult``, ``TIDE.evaluate``, ``get_main_errors`` /
``get_special_errors``; vistabench: ``read_detection_set`` + ``decompose_errors(variants=("tide",))``),
in this process, in interleaved rounds (tidecv, vistabench, tidecv, ...) so that machine load hits
both. Prints the medians, the round-by-round ratio and checks that the figures agree (1e-9). Also
times the AP^Fixed + AP^Pool decomposition alone (vistabench only; tidecv has none).

    python benchmarks/detection_errors.py                       # COCO-like, 500 images x 80 classes x 100
    python benchmarks/detection_errors.py --images 1000 --categories 80 --dets-per-image 100 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import tempfile
import time
from pathlib import Path


def _tidecv(gt_path: str, dt_path: str) -> dict:
    from tidecv import TIDE, datasets

    with contextlib.redirect_stdout(io.StringIO()):
        gt = datasets.COCO(gt_path)
        dt = datasets.COCOResult(dt_path)
        tide = TIDE()
        run = tide.evaluate(gt, dt, mode=TIDE.BOX, name="x")
        out = {"AP": run.ap, **tide.get_main_errors()["x"], **tide.get_special_errors()["x"]}
    return out


def _ours(gt_path: str, dt_path: str, variants=("tide",)) -> dict:
    from vistabench.metrics.detection import decompose_errors
    from vistabench.protocols.detection.runner import read_detection_set

    gt, dets = read_detection_set(gt_path, dt_path)
    return decompose_errors(gt, dets, variants=variants).results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=500)
    ap.add_argument("--categories", type=int, default=80)
    ap.add_argument("--dets-per-image", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    from vistabench.data.detection_synth import synth_detection_set

    s = synth_detection_set(num_images=args.images, num_categories=args.categories,
                            dets_per_image=args.dets_per_image, seed=0, format="coco", score_decimals=None)
    gt = s.ground_truth
    for a in gt["annotations"]:  # tidecv's loader converts every annotation's segmentation to RLE
        x, y, w, h = a["bbox"]
        a.setdefault("segmentation", [[x, y, x + w, y, x + w, y + h, x, y + h]])
        a.setdefault("iscrowd", 0)
    for im in gt["images"]:
        im.setdefault("file_name", f"{im['id']}.jpg")
    tmp = Path(tempfile.mkdtemp())
    gt_path, dt_path = str(tmp / "gt.json"), str(tmp / "results.json")
    Path(gt_path).write_text(json.dumps(gt))
    Path(dt_path).write_text(json.dumps(s.results))
    print(f"{args.images} images x {args.categories} classes x {args.dets_per_image} detections "
          f"({len(s.results)} detections, {len(gt['annotations'])} ground truths); load average "
          f"{os.getloadavg()[0]:.1f}")
    _ours(gt_path, dt_path)  # imports and first-call costs out of the rounds
    times: dict[str, list[float]] = {"tidecv": [], "vistabench": [], "vistabench fixed+pool": []}
    ref = ours = None
    for _ in range(args.rounds):
        t = time.perf_counter()
        ref = _tidecv(gt_path, dt_path)
        times["tidecv"].append(time.perf_counter() - t)
        t = time.perf_counter()
        ours = _ours(gt_path, dt_path)["tide"]
        times["vistabench"].append(time.perf_counter() - t)
        t = time.perf_counter()
        _ours(gt_path, dt_path, variants=("fixed", "pool"))
        times["vistabench fixed+pool"].append(time.perf_counter() - t)
    worst = max(abs(ours[k] - ref[k]) for k in ref)
    print(f"figures agree: max |difference| {worst:.2e} AP points ({'ok' if worst <= 1e-9 else 'DIFFERENT'})")
    for name, ts in times.items():
        print(f"{name:<24} median {statistics.median(ts):7.2f} s  (range {min(ts):.2f}-{max(ts):.2f})")
    ratios = [a / b for a, b in zip(times["tidecv"], times["vistabench"])]
    print(f"tidecv / vistabench: {statistics.median(times['tidecv']) / statistics.median(times['vistabench']):.1f}x "
          f"(rounds: {', '.join(f'{r:.1f}x' for r in ratios)}); load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
