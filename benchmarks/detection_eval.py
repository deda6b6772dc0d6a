"""vistabench vs lvis-api (and faster-coco-eval) on the same synthetic LVIS-like set.

Each evaluator runs in its own subprocess, end to end from the JSON files (reading included), and
reports wall time and its peak RSS (``VmHWM`` from /proc/self/status, which starts at the exec;
``resource.getrusage`` elsewhere). Prints a table
and the ratios the README quotes. Not run in CI.

    python benchmarks/detection_eval.py                      # 2,000 images x 1,000 classes x 360 dets
    python benchmarks/detection_eval.py --images 500 --categories 300
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
which, gt, dt = sys.argv[1:4]
t0 = time.perf_counter()
if which == "lvis-api":
    import numpy as np
    np.float = float  # lvis-api 0.5.3 predates numpy 1.24
    import logging; logging.disable(logging.INFO)
    from lvis import LVIS, LVISEval, LVISResults
    g = LVIS(gt)
    e = LVISEval(g, LVISResults(g, dt, max_dets=300), "bbox")
    e.run()
    out = {"AP": float(e.results["AP"]), "APr": float(e.results["APr"])}
elif which == "faster-coco-eval":
    from collections import defaultdict
    from faster_coco_eval import COCO, COCOeval_faster
    res = json.load(open(dt))
    by_img = defaultdict(list)
    for a in res:
        by_img[a["image_id"]].append(a)
    res = [a for anns in by_img.values() for a in (sorted(anns, key=lambda a: a["score"], reverse=True)[:300]
                                                   if len(anns) > 300 else anns)]
    g = COCO(gt)
    e = COCOeval_faster(g, g.loadRes(res), "bbox", lvis_style=True, print_function=lambda *a, **k: None)
    e.params.maxDets = [300]
    e.evaluate(); e.accumulate(); e.summarize()
    out = {"AP": float(e.stats_as_dict["AP_all"])}
else:
    from vistabench.data.coco import read_ground_truth, read_results
    from vistabench.metrics.detection import evaluate_detections
    variants = which.split(":")[1].split(",")
    g = read_ground_truth(gt)
    d = read_results(dt, g)
    ev = evaluate_detections(g, d, variants=variants)
    out = {f"{v}_AP": ev.results[v]["AP"] for v in variants}
    if "old" in variants:
        out["AP"] = ev.results["old"]["AP"]; out["APr"] = ev.results["old"]["APr"]
seconds = time.perf_counter() - t0
# peak RSS of this program: VmHWM (reset at exec; ru_maxrss would include the forked parent's pages)
try:
    rss = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:"))
except OSError:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "peak_rss": rss, **out}))
"""


def run(which: str, gt: Path, dt: Path, timeout: float) -> dict:
    p = subprocess.run([sys.executable, "-c", CHILD, which, str(gt), str(dt)], capture_output=True, text=True,
                       timeout=timeout)
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--categories", type=int, default=1000)
    ap.add_argument("--dets-per-image", type=int, default=360)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip", nargs="*", default=[], help="evaluators to skip (lvis-api, faster-coco-eval)")
    ap.add_argument("--timeout", type=float, default=3600)
    args = ap.parse_args()
    from vistabench.data.detection_synth import synth_detection_set

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        s = synth_detection_set(num_images=args.images, num_categories=args.categories,
                                dets_per_image=args.dets_per_image, seed=args.seed)
        gt, dt = Path(tmp) / "gt.json", Path(tmp) / "results.json"
        gt.write_text(json.dumps(s.ground_truth))
        dt.write_text(json.dumps(s.results))
        n = len(s.results)
        del s
        print(f"synthetic set: {args.images} images x {args.categories} classes, {n} detections "
              f"({dt.stat().st_size / 1e6:.0f} MB results file), built in {time.perf_counter() - t0:.1f} s")
        runs = {}
        for which in ("vistabench:old", "vistabench:old,fixed,pool", "faster-coco-eval", "lvis-api"):
            if which in args.skip:
                continue
            runs[which] = r = run(which, gt, dt, args.timeout)
            if "error" in r:
                print(f"{which:<28} failed: {r['error']}")
            else:
                print(f"{which:<28} {r['seconds']:8.2f} s  {r['peak_rss'] / 2**30:6.2f} GiB  AP {r.get('AP', float('nan')):.6f}")
    vb, allv, ref = runs.get("vistabench:old", {}), runs.get("vistabench:old,fixed,pool", {}), runs.get("lvis-api", {})
    print()
    if "seconds" in vb and "seconds" in ref:
        print(f"AP^Old vs lvis-api: {ref['seconds'] / vb['seconds']:.1f}x faster, "
              f"{vb['peak_rss'] / ref['peak_rss']:.3f}x the peak memory; |AP difference| = {abs(vb['AP'] - ref['AP']):.2e}")
    if "seconds" in vb and "seconds" in allv:
        print(f"all three APs vs AP^Old alone: {allv['seconds'] / vb['seconds']:.2f}x the time")
    fc = runs.get("faster-coco-eval", {})
    if "seconds" in fc and "seconds" in vb:
        print(f"faster-coco-eval (lvis_style, after the 300 cut): {fc['seconds']:.2f} s, "
              f"{fc['peak_rss'] / 2**30:.2f} GiB; vistabench AP^Old is {fc['seconds'] / vb['seconds']:.1f}x faster; "
              f"|AP difference| = {abs(fc['AP'] - vb['AP']):.2e}")


if __name__ == "__main__":
    main()
