"""vistabench vs lvis-api (and faster-coco-eval) on the same synthetic LVIS-like set, plus json.load.

Each evaluator runs in its own subprocess, end to end from the JSON files (reading and imports
included), and reports wall time and its peak RSS (``VmHWM`` from /proc/self/status, which starts
at the exec; ``resource.getrusage`` elsewhere). ``json.load`` of the results file alone is timed the
same way. Prints a table and the two target ratios the README quotes:

* lvis-api time / vistabench AP^Old time (target >= 50x) with |AP difference|;
* vistabench all three APs time / json.load time (target <= 0.35x) and its peak RSS (<= 1.5 GB).

Each target line ends with the 1-minute load average seen before, during (each round) and after the
runs: a ratio means little without it.

Not run in CI. The machine's load changes every ratio: run it on a quiet machine and report
``uptime``'s load average with the numbers (the script prints it).

    python benchmarks/detection_eval.py --repeat 3                       # 2,000 x 1,000 x 360, medians of 3
    python benchmarks/detection_eval.py --images 19809 --categories 1203 --dets-per-image 300 --repeat 3 \\
        --skip lvis-api faster-coco-eval vistabench:old vistabench-cli:old   # LVIS-val scale, all three APs
    python benchmarks/detection_eval.py --images 300 --categories 100 --masks   # segm vs lvis-api segm
    python benchmarks/detection_eval.py --coco --images 5000 --categories 80 --dets-per-image 120 --repeat 3
                                        # COCO-val size vs pycocotools and faster-coco-eval
    python benchmarks/detection_eval.py --images 1000 --categories 1000 --repeat 3 --lookup
                                        # the issue-23 set; `vistabench-cli:old` is `detection eval --ap old`
    python benchmarks/detection_eval.py --images 19809 --categories 1203 --dets-per-image 300 --repeat 2 \\
        --allocation --skip lvis-api faster-coco-eval json.load vistabench:old vistabench:old,fixed,pool vistabench-cli:old
                                        # `detection eval` against itself with the process's allocation defaults
"""

from __future__ import annotations

import argparse
import json
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
which, gt, dt, iou_type = sys.argv[1:5]
t0 = time.perf_counter()
out = {}
if which == "json.load":
    with open(dt, "rb") as f:
        n = len(json.load(f))
    out = {"detections": n}
elif which == "lvis-api":
    import numpy as np
    np.float = float  # lvis-api 0.5.3 predates numpy 1.24
    import logging; logging.disable(logging.INFO)
    from lvis import LVIS, LVISEval, LVISResults
    ti = time.perf_counter()
    g = LVIS(gt)
    r = LVISResults(g, dt, max_dets=300)
    tr = time.perf_counter()
    e = LVISEval(g, r, iou_type)
    e.run()
    out = {"AP": float(e.results["AP"]), "APr": float(e.results["APr"]),
           "phases": {"imports": ti - t0, "read": tr - ti, "evaluate": time.perf_counter() - tr}}
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
    e = COCOeval_faster(g, g.loadRes(res), iou_type, lvis_style=True, print_function=lambda *a, **k: None)
    e.params.maxDets = [300]
    e.evaluate(); e.accumulate(); e.summarize()
    out = {"AP": float(e.stats_as_dict["AP_all"])}
elif which.split(":")[0] in ("vistabench-cli", "vistabench-cli-defaults"):  # `vistabench detection eval --ap ... --json`
    import contextlib, io
    from vistabench.cli import console_main
    ti = time.perf_counter()  # the CLI reads and evaluates inside main(): one phase after the imports
    buf = io.StringIO()
    # what the `vistabench` program runs (its console script): main(), then ready to exit
    sys.argv = ["vistabench", "detection", "eval", "--gt", gt, "--results", dt, "--iou-type", iou_type,
                "--ap", which.split(":")[1], "--json"]
    with contextlib.redirect_stdout(buf):
        rc = console_main()
    if rc:
        sys.exit(rc)
    res = json.loads(buf.getvalue())
    out = {"AP": res[which.split(":")[1].split(",")[0]]["AP"],
           "phases": {"imports": ti - t0, "read+evaluate": time.perf_counter() - ti}}
elif which == "pycocotools":
    import contextlib, io
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
    with contextlib.redirect_stdout(io.StringIO()):
        g = COCO(gt)
        e = COCOeval(g, g.loadRes(dt), iou_type)
        e.evaluate(); e.accumulate(); e.summarize()
    out = {"AP": float(e.stats[0])}
elif which == "faster-coco-eval:coco":
    from faster_coco_eval import COCO, COCOeval_faster
    g = COCO(gt)
    e = COCOeval_faster(g, g.loadRes(dt), iou_type, print_function=lambda *a, **k: None)
    e.evaluate(); e.accumulate(); e.summarize()
    out = {"AP": float(e.stats[0])}
elif which.startswith("lookup:"):  # detectron2's proposal path: get_ann_ids + load_anns once per image
    if which == "lookup:lvis-api":
        import numpy as np
        np.float = float
        import logging; logging.disable(logging.INFO)
        from lvis import LVIS
    else:
        from vistabench.compat.lvis import LVIS
    g = LVIS(gt)
    ids = g.get_img_ids()
    t1 = time.perf_counter()
    n = sum(len(g.load_anns(g.get_ann_ids(img_ids=[i]))) for i in ids)
    out = {"lookups": len(ids), "annotations": n, "per_image_us": (time.perf_counter() - t1) / len(ids) * 1e6}
else:
    from vistabench.data.coco import read_ground_truth, read_results
    from vistabench.metrics.detection import evaluate_detections
    variants = which.split(":")[1].split(",")
    ti = time.perf_counter()
    g = read_ground_truth(gt, with_segmentation=iou_type == "segm")
    t1 = time.perf_counter()
    d = read_results(dt, g, iou_type=iou_type)
    t2 = time.perf_counter()
    ev = evaluate_detections(g, d, variants=variants, iou_type=iou_type)
    out = {f"{v}_AP": ev.results[v]["AP"] for v in variants}
    out["read_seconds"] = t2 - t1
    out["eval_seconds"] = time.perf_counter() - t2
    out["phases"] = {"imports": ti - t0, "read": t2 - ti, "evaluate": out["eval_seconds"]}
    if "old" in variants:
        out["AP"] = ev.results["old"]["AP"]; out["APr"] = ev.results["old"]["APr"]
seconds = time.perf_counter() - t0
try:
    rss = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:"))
except OSError:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # e.g. vistabench's second reader process
if kids:
    out["worker_peak_rss"] = kids
out["kernel_seconds"] = sum(resource.getrusage(w).ru_stime for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
print(json.dumps({"seconds": seconds, "peak_rss": rss, **out}))
"""


def run(which: str, gt: Path, dt: Path, iou_type: str, timeout: float) -> dict:
    env = dict(os.environ)
    if which.startswith("vistabench-cli-defaults:"):  # the command with the process's allocation defaults
        env["VISTABENCH_LARGE_ARRAYS"] = "0"
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, which, str(gt), str(dt), iou_type], capture_output=True,
                           text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def median_run(trials: list[dict]) -> dict:
    """One evaluator's runs as one: median seconds, largest peak RSS, the first run's other fields
    (the APs are the same in every run); an error if any run failed."""
    failed = [t for t in trials if "error" in t]
    if failed:
        return failed[0]
    out = dict(trials[0])
    out["seconds"] = statistics.median(t["seconds"] for t in trials)
    out["peak_rss"] = max(t["peak_rss"] for t in trials)
    return out


def write_columns(path: Path, cols: dict, chunk: int = 200_000) -> None:
    """A results JSON list from columns, written in chunks (no list of dicts in memory)."""
    n = len(cols["score"])
    with open(path, "w", encoding="utf-8") as f:
        f.write("[")
        for s in range(0, n, chunk):
            e = min(n, s + chunk)
            rows = zip(cols["image_id"][s:e].tolist(), cols["category_id"][s:e].tolist(),
                       cols["bbox"][s:e].tolist(), cols["score"][s:e].tolist())
            f.write(("," if s else "") + ",".join(
                f'{{"image_id":{i},"category_id":{c},"bbox":[{b[0]},{b[1]},{b[2]},{b[3]}],"score":{sc}}}'
                for i, c, b, sc in rows))
        f.write("]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=2000, help="number of images (LVIS val: 19809)")
    ap.add_argument("--categories", type=int, default=1000, help="number of categories (LVIS: 1203)")
    ap.add_argument("--dets-per-image", type=int, default=360)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--masks", action="store_true", help="evaluate segm (RLE masks) instead of boxes")
    ap.add_argument("--coco", action="store_true",
                    help="COCO ground truth (pycocotools semantics) against pycocotools and faster-coco-eval; "
                         "COCO-val size: --images 5000 --categories 80 --dets-per-image 120")
    ap.add_argument("--lookup", action="store_true",
                    help="also time get_ann_ids(img_ids=[i]) + load_anns once per image (detectron2's proposal "
                         "path): lvis-api against vistabench.compat.lvis")
    ap.add_argument("--skip", nargs="*", default=[],
                    help="runs to skip: lvis-api, faster-coco-eval, json.load, vistabench:old, vistabench:old,fixed,pool, "
                         "vistabench-cli:old, vistabench-cli:old,fixed,pool")
    ap.add_argument("--allocation", action="store_true",
                    help="also run each `detection eval` with the process's allocation defaults "
                         "(VISTABENCH_LARGE_ARRAYS=0: glibc returns freed blocks, numpy takes huge pages) "
                         "and print the ratio and both kernel times")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--repeat", type=int, default=1,
                    help="run every evaluator this many times, in interleaved rounds, and report each one's "
                         "median time (the ratios are of medians; lvis-api's own time varies by +-20%% on a "
                         "2-core VM)")
    ap.add_argument("--keep", metavar="DIR", help="write the set here and keep it (default: a temporary folder)")
    ap.add_argument("--reuse", action="store_true",
                    help="with --keep: evaluate the set already in DIR (written by an earlier --keep run with the "
                         "same options) instead of generating it again")
    args = ap.parse_args()
    from vistabench.data.detection_synth import synth_detection_set

    iou_type = "segm" if args.masks else "bbox"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        gt, dt = folder / "gt.json", folder / "results.json"
        if args.reuse and args.keep and gt.exists() and dt.exists():
            n = json.loads((folder / "set.json").read_text())["detections"]
            print(f"reusing the set in {folder}")
        else:
            s = synth_detection_set(num_images=args.images, num_categories=args.categories,
                                    dets_per_image=args.dets_per_image, seed=args.seed, masks=args.masks,
                                    format="coco" if args.coco else "lvis",
                                    results_as_columns=not args.masks)
            n = len(s.results) if args.masks else len(s.results["score"])
            gt.write_text(json.dumps(s.ground_truth))
            (folder / "set.json").write_text(json.dumps({"images": args.images, "categories": args.categories,
                                                         "detections": n, "seed": args.seed}))
            if args.masks:
                dt.write_text(json.dumps(s.results))
            else:
                write_columns(dt, s.results)
            del s
        print(f"synthetic set: {args.images} images x {args.categories} classes, {n} detections "
              f"({dt.stat().st_size / 1e6:.0f} MB results file, {iou_type}), built in {time.perf_counter() - t0:.1f} s")
        loads = [os.getloadavg()[0]]  # 1-minute load averages: before, each round, after
        print(f"load average before the runs: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
              f"on {os.cpu_count()} cores")
        for f in (gt, dt):  # every evaluator then reads from the page cache (else the first one pays the disk)
            with open(f, "rb") as fh:
                while fh.read(16 << 20):
                    pass
        if args.repeat < 1:
            ap.error(f"--repeat: expected a positive integer, got {args.repeat}")
        # vistabench's modules compiled once, as an installed package is (the environment may forbid
        # writing bytecode at import time, and lvis-api / pycocotools are installed compiled)
        import vistabench

        compileall.compile_dir(str(Path(vistabench.__file__).parent), quiet=1)
        if args.coco:
            every = ("vistabench-cli:old", "vistabench:old", "json.load", "faster-coco-eval:coco", "pycocotools")
        else:
            every = ("vistabench-cli:old", "vistabench-cli:old,fixed,pool", "vistabench:old", "vistabench:old,fixed,pool",
                     "json.load",
                     "faster-coco-eval", "lvis-api") + (("lookup:vistabench", "lookup:lvis-api") if args.lookup else ())
        todo = [w for w in every if w not in args.skip and not (w.startswith("faster-coco-eval") and args.masks)]
        if args.allocation:
            todo = [x for w in todo for x in ((w, w.replace("vistabench-cli:", "vistabench-cli-defaults:"))
                                              if w.startswith("vistabench-cli:") else (w,))]
        trials: dict[str, list[dict]] = {w: [] for w in todo}
        for rnd in range(args.repeat):
            loads.append(os.getloadavg()[0])
            print(f"round {rnd + 1}/{args.repeat}: load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            for which in todo:
                r = run(which, gt, dt, iou_type, args.timeout)
                trials[which].append(r)
                if "error" in r:
                    print(f"{which:<36} failed: {r['error']}")
                    continue
                extra = (f"  (read {r['read_seconds']:.2f} s, evaluate {r['eval_seconds']:.2f} s)"
                         if "read_seconds" in r else "")
                ap_ = f"  AP {r['AP']:.6f}" if "AP" in r else ""
                if "per_image_us" in r:
                    ap_ = f"  {r['per_image_us']:.1f} us per image ({r['lookups']} images, {r['annotations']} annotations)"
                if "worker_peak_rss" in r:
                    extra += f"  (reader worker peak {r['worker_peak_rss'] / 2**30:.2f} GiB)"
                tag = f" [{rnd + 1}/{args.repeat}]" if args.repeat > 1 else ""
                if "phases" in r:
                    extra += "  (" + ", ".join(f"{k} {v:.2f} s" for k, v in r["phases"].items()) + ")"
                if "kernel_seconds" in r:
                    extra += f"  (kernel {r['kernel_seconds']:.2f} s)"
                print(f"{which:<36} {r['seconds']:8.2f} s  {r['peak_rss'] / 2**30:6.2f} GiB{ap_}{extra}{tag}")
        runs = {w: median_run(t) for w, t in trials.items()}
        if args.repeat > 1:
            print(f"medians of {args.repeat} runs:")
            for which, r in runs.items():
                if "seconds" in r:
                    spread = [t["seconds"] for t in trials[which] if "seconds" in t]
                    print(f"{which:<36} {r['seconds']:8.2f} s  {r['peak_rss'] / 2**30:6.2f} GiB  "
                          f"(runs {min(spread):.2f} .. {max(spread):.2f} s)")
        loads.append(os.getloadavg()[0])
        print(f"load average after the runs: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    load = (f"[load average {min(loads):.1f}-{max(loads):.1f} over the runs (1 min; before "
            f"{loads[0]:.1f}, after {loads[-1]:.1f}), {os.cpu_count()} cores]")
    def compare(slow: str, fast: str, target: str) -> None:
        a, b = runs.get(slow, {}), runs.get(fast, {})
        if "seconds" not in a or "seconds" not in b:
            return
        rounds = [x["seconds"] / y["seconds"] for x, y in zip(trials[slow], trials[fast]) if "seconds" in x and "seconds" in y]
        dap = f"; |AP difference| = {abs(a['AP'] - b['AP']):.2e}" if "AP" in a and "AP" in b else ""
        spread = (f"; per-round ratio min {min(rounds):.1f}x, median {statistics.median(rounds):.1f}x, "
                  f"max {max(rounds):.1f}x" if rounds else "")
        print(f"[{target}] {fast} vs {slow}: {a['seconds'] / b['seconds']:.1f}x faster (medians; rounds "
              f"{', '.join(f'{x:.1f}x' for x in rounds)}{spread}), {b['peak_rss'] / a['peak_rss']:.3f}x the peak "
              f"memory{dap} {load}")

    def compare_phases(slow: str, fast: str) -> None:
        """Each phase's median time and ratio (imports; reading GT + results; evaluation)."""
        a = [t["phases"] for t in trials.get(slow, []) if "phases" in t]
        b = [t["phases"] for t in trials.get(fast, []) if "phases" in t]
        if not a or not b:
            return
        med = {k: statistics.median(p[k] for p in a) for k in a[0]}
        mfd = {k: statistics.median(p[k] for p in b) for k in b[0]}
        if "read+evaluate" in mfd:
            med["read+evaluate"] = med["read"] + med["evaluate"]
        parts = [f"{k} {med[k]:.2f} s vs {mfd[k]:.2f} s ({med[k] / mfd[k]:.1f}x)" for k in mfd if k in med and mfd[k] > 0]
        print(f"phases, {slow} vs {fast} (medians): " + "; ".join(parts))

    print()
    compare("lvis-api", "vistabench-cli:old", "target >= 50x")
    compare_phases("lvis-api", "vistabench-cli:old")
    compare_phases("lvis-api", "vistabench:old")
    compare("faster-coco-eval:coco", "vistabench-cli:old", "target >= 5x")
    compare("pycocotools", "vistabench-cli:old", "COCO")
    lk, lr = runs.get("lookup:vistabench", {}), runs.get("lookup:lvis-api", {})
    if "per_image_us" in lk and "per_image_us" in lr:
        print(f"per-image look-up (get_ann_ids + load_anns): vistabench.compat.lvis {lk['per_image_us']:.1f} us, "
              f"lvis-api {lr['per_image_us']:.1f} us per image")
    vb, ref = runs.get("vistabench:old", {}), runs.get("lvis-api", {})
    # the json.load target: the command a user runs (`detection eval`, all three APs) where it ran
    allv = runs.get("vistabench-cli:old,fixed,pool") or runs.get("vistabench:old,fixed,pool", {})
    jl = runs.get("json.load", {})
    print()
    if "seconds" in vb and "seconds" in ref:
        ratio = ref["seconds"] / vb["seconds"]
        if args.repeat > 1:
            per_round = [a["seconds"] / b["seconds"] for a, b in zip(trials["lvis-api"], trials["vistabench:old"])
                         if "seconds" in a and "seconds" in b]
            print(f"AP^Old vs lvis-api, round by round: {', '.join(f'{x:.1f}x' for x in per_round)}")
        print(f"[target >= 50x] AP^Old vs lvis-api: {ratio:.1f}x faster, {vb['peak_rss'] / ref['peak_rss']:.3f}x the "
              f"peak memory; |AP difference| = {abs(vb['AP'] - ref['AP']):.2e} {load}")
    if "seconds" in allv and "seconds" in jl:
        cli = "vistabench-cli:old,fixed,pool"
        rounds = [a["seconds"] / b["seconds"] for a, b in zip(trials.get(cli) or trials["vistabench:old,fixed,pool"],
                                                                trials["json.load"]) if "seconds" in a and "seconds" in b]
        print(f"[target <= 0.35x, <= 1.5 GB] all three APs ({'detection eval' if cli in runs else 'API'}; rounds "
              f"{', '.join(f'{x:.2f}x' for x in rounds)}): {allv['seconds'] / jl['seconds']:.2f}x the time json.load "
              f"takes to parse the results file ({allv['seconds']:.1f} s vs {jl['seconds']:.1f} s); peak RSS "
              f"{allv['peak_rss'] / 1e9:.2f} GB (json.load alone: {jl['peak_rss'] / 1e9:.2f} GB) {load}")
    for w in [w for w in runs if w.startswith("vistabench-cli-defaults:")]:
        ours, plain = w.replace("vistabench-cli-defaults:", "vistabench-cli:"), w
        a, b = runs.get(ours, {}), runs.get(plain, {})
        if "seconds" not in a or "seconds" not in b:
            continue
        rounds = [y["seconds"] / x["seconds"] for x, y in zip(trials[ours], trials[plain]) if "seconds" in x and "seconds" in y]
        kern = [statistics.median(t["kernel_seconds"] for t in trials[k] if "kernel_seconds" in t) for k in (ours, plain)]
        print(f"[allocation] detection eval --ap {ours.split(':')[1]}: {b['seconds'] / a['seconds']:.2f}x faster than "
              f"with the process's defaults ({a['seconds']:.2f} s vs {b['seconds']:.2f} s, medians; rounds "
              f"{', '.join(f'{x:.2f}x' for x in rounds)}); kernel time {kern[0]:.2f} s vs {kern[1]:.2f} s; "
              f"peak {a['peak_rss'] / 2**30:.2f} vs {b['peak_rss'] / 2**30:.2f} GiB {load}")
    fc = runs.get("faster-coco-eval", {})
    if "seconds" in fc and "seconds" in vb:
        print(f"faster-coco-eval (lvis_style, after the 300 cut): {fc['seconds']:.2f} s, "
              f"{fc['peak_rss'] / 2**30:.2f} GiB; vistabench AP^Old is {fc['seconds'] / vb['seconds']:.1f}x faster; "
              f"|AP difference| = {abs(fc['AP'] - vb['AP']):.2e}")


if __name__ == "__main__":
    main()
