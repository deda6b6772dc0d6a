"""Per-image look-up cost of the lvis-api / pycocotools drop-ins, beside the official tools.

The call pattern is detectron2's proposal evaluation and mmdetection's ``fast_eval_recall``: for
every image, ``get_ann_ids(img_ids=[i])`` then ``load_anns(ids)`` (pycocotools: ``getAnnIds`` /
``loadAnns``). Rounds are interleaved (official, drop-in, official, ...) so machine load hits both;
the table gives the median per-call time and the round-by-round spread.

    python benchmarks/compat_lookups.py                      # 2,000 images x 300 categories, 5 rounds
    python benchmarks/compat_lookups.py --images 5000 --rounds 7
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import tempfile
import time
from pathlib import Path


def _lvis_api():
    import numpy as np

    if not hasattr(np, "float"):
        np.float = float  # lvis 0.5.3 on numpy >= 1.24
    import lvis

    return lvis


def _loop(api, ids, camel: bool) -> float:
    t = time.perf_counter()
    if camel:
        for i in ids:
            api.loadAnns(api.getAnnIds(imgIds=[i]))
    else:
        for i in ids:
            api.load_anns(api.get_ann_ids(img_ids=[i]))
    return (time.perf_counter() - t) / len(ids)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--categories", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    from vistabench.compat import coco as ccoco, lvis as clvis
    from vistabench.data.detection_synth import synth_detection_set

    s = synth_detection_set(num_images=args.images, num_categories=args.categories, dets_per_image=1, seed=0)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "gt.json"
        p.write_text(json.dumps(s.ground_truth))
        lvis = _lvis_api()
        from pycocotools.coco import COCO

        with contextlib.redirect_stdout(io.StringIO()):
            apis = {"lvis-api": (lvis.LVIS(str(p)), False), "compat.lvis": (clvis.LVIS(str(p)), False),
                    "pycocotools": (COCO(str(p)), True), "compat.coco": (ccoco.COCO(str(p)), True)}
        ids = [im["id"] for im in s.ground_truth["images"]]
        for api, camel in apis.values():  # first call builds the drop-ins' index (once)
            _loop(api, ids[:1], camel)
        times: dict[str, list[float]] = {k: [] for k in apis}
        for _ in range(args.rounds):
            for name, (api, camel) in apis.items():
                times[name].append(_loop(api, ids, camel))
    n_ann = len(s.ground_truth["annotations"])
    print(f"{args.images} images, {n_ann} annotations, {args.rounds} interleaved rounds; per image "
          f"get_ann_ids(img_ids=[i]) + load_anns")
    print(f"{'api':<14} {'median us/call':>15} {'rounds (us)':>40}")
    for name, ts in times.items():
        rounds = " ".join(f"{1e6 * t:.1f}" for t in ts)
        print(f"{name:<14} {1e6 * statistics.median(ts):>15.2f} {rounds:>40}")
    for ours, ref in (("compat.lvis", "lvis-api"), ("compat.coco", "pycocotools")):
        print(f"{ours} / {ref}: {statistics.median(times[ours]) / statistics.median(times[ref]):.2f}x the time")


if __name__ == "__main__":
    main()
