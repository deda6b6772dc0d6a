"""The protocols at the papers' own scale: what reading, decoding, evaluating and scoring cost.

Writes its synthetic sets once into DIR (later runs reuse them) and prints, with the machine's load:

- ``lists``: reading and checking (a ``stat`` per file) an ImageNet-LT-shaped list (1,000 classes,
  n_max 1,280, n_min 5, 115,846 training files as the real list; 50 test images per class) and an
  iNaturalist-2018-shaped JSON (8,142 classes, 437,513 training and 24,426 test images), through
  ``load_dataset("imagelist:DIR")``. Goals: <= 10 s and <= 30 s. Files are hard links of one tiny
  JPEG per class (a directory entry each, as cheap to ``stat`` as a file).
- ``pipeline``: images per second of the data pipeline on the ImageNet-LT list (decoded to 224 x 224)
  at workers 0 and 2: decoding only (the stream loader's DataLoader), and training the small
  ``cnn28`` for one epoch with ``--loader stream``.
- ``eval``: peak RSS of a streamed ``longtail run`` (32 px PNG/JPEG list, cnn28) against the size of
  its test set: it should not grow beyond the logits.
- ``score``: ``longtail score`` on 1,000 classes x 50,000 predictions with the full sweep (10 points x
  5 test sets): building the sweep, and scoring (resampled + exact) in the process and as a command.
  Goal: the score <= 5 s.
- ``fscil``: ``incremental run --method prototype`` per session on miniImageNet- (100 classes, 84 px,
  60 base, 8 sessions of 5-way 5-shot) and CUB-200-shaped (200 classes, 100 base, 10 sessions of
  10-way 5-shot) folders with the literature's ``session_<i>.txt`` index files (fewer images per class
  than the real sets: ``--fscil-train``/``--fscil-test``; times per session from the per-session
  prediction files' modification times).

    python benchmarks/bench_paper_scale.py /tmp/vb_scale                 # everything
    python benchmarks/bench_paper_scale.py /tmp/vb_scale --parts lists score
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

PARTS = ("lists", "pipeline", "eval", "score", "fscil")


def shaped_counts(classes: int, n_max: int, n_min: int, total: int) -> np.ndarray:
    """Class counts falling from n_max to n_min as n_min + (n_max - n_min)(1 - r/(C-1))^p, p chosen so
    that they sum to about ``total`` (the real list's shape: a few large classes, a long tail)."""
    x = np.arange(classes) / (classes - 1)
    lo, hi = 0.01, 200.0
    for _ in range(100):  # bisect the exponent: the sum falls as p grows
        p = (lo + hi) / 2
        s = np.floor(n_min + (n_max - n_min) * (1 - x) ** p).sum()
        lo, hi = (p, hi) if s > total else (lo, p)
    return np.floor(n_min + (n_max - n_min) * (1 - x) ** p).astype(np.int64)


def _jpeg(value: int, size: int = 16, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    px = np.clip(rng.normal(value, 25, (size, size, 3)), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(px).save(buf, format="jpeg")
    return buf.getvalue()


def _linked(root: Path, rels: list[str], source: Path) -> None:
    for rel in rels:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        os.link(source, p)


def write_imagenet_lt(root: Path) -> np.ndarray:
    counts = shaped_counts(1000, 1280, 5, 115_846)
    if (root / "DONE").is_file():
        return counts
    (root / "src").mkdir(parents=True, exist_ok=True)
    lines = {"train": [], "test": []}
    for c, n in enumerate(counts):
        src = root / "src" / f"{c}.jpg"
        src.write_bytes(_jpeg(int(c * 255 / 999), seed=c))
        for part, k in (("train", int(n)), ("val", 50)):
            rels = [f"{part}/n{c:08d}/n{c:08d}_{i}.JPEG" for i in range(k)]
            _linked(root, rels, src)
            lines["train" if part == "train" else "test"] += [f"{r} {c}" for r in rels]
    for part, rows in lines.items():
        (root / f"ImageNet_LT_{part}.txt").write_text("\n".join(rows) + "\n")
    (root / "DONE").write_text("")
    return counts


def write_inat(root: Path) -> None:
    if (root / "DONE").is_file():
        return
    counts = shaped_counts(8142, 1000, 2, 437_513)
    (root / "src").mkdir(parents=True, exist_ok=True)
    docs = {"train": {"images": [], "annotations": []}, "val": {"images": [], "annotations": []}}
    cats = [{"id": c, "name": f"species_{c}", "supercategory": "Plantae"} for c in range(8142)]
    k = 0
    for c, n in enumerate(counts):
        src = root / "src" / f"{c}.jpg"
        src.write_bytes(_jpeg(c % 256, size=8, seed=c))
        for part, m in (("train", int(n)), ("val", 3)):
            rels = [f"train_val2018/Plantae/{c}/{part}_{i:04d}.jpg" for i in range(m)]
            _linked(root, rels, src)
            for r in rels:
                docs[part]["images"].append({"id": k, "file_name": r, "width": 8, "height": 8})
                docs[part]["annotations"].append({"id": k, "image_id": k, "category_id": c})
                k += 1
    for part, doc in docs.items():
        doc["categories"] = cats
        (root / f"{part}2018.json").write_text(json.dumps(doc))
    (root / "DONE").write_text("")


def load_line() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"


def part_lists(d: Path) -> dict:
    from vistabench.data import load_dataset

    out = {}
    for name, writer, goal in (("imagenet_lt", write_imagenet_lt, 10.0), ("inat2018", write_inat, 30.0)):
        t = time.perf_counter()
        writer(d / name)
        made = time.perf_counter() - t
        t = time.perf_counter()
        s = load_dataset(f"imagelist:{d / name}")
        sec = time.perf_counter() - t
        out[name] = sec
        print(f"  {name}: {len(s.train):,} training + {len(s.test):,} test files, {s.train.num_classes:,} classes: "
              f"read and checked in {sec:.2f} s (goal <= {goal:g} s: {'met' if sec <= goal else 'NOT met'})"
              + (f"; written in {made:.0f} s" if made > 1 else ""))
    return out


def part_pipeline(d: Path, n: int = 1024) -> None:
    import torch

    from vistabench.data import load_dataset
    from vistabench.learners.models import build_model
    from vistabench.learners.sources import _Items, _stack
    from vistabench.learners.trainer import TrainConfig, Trainer

    write_imagenet_lt(d / "imagenet_lt")
    s = load_dataset(f"imagelist:{d / 'imagenet_lt'}")
    idx = np.random.default_rng(0).permutation(len(s.train))[:n]
    sub = s.train.subset(np.sort(idx))
    for workers in (0, 2):
        loader = torch.utils.data.DataLoader(_Items(sub.images), batch_size=128, num_workers=workers, collate_fn=_stack)
        t = time.perf_counter()
        seen = sum(len(b) for b in loader)
        dec = seen / (time.perf_counter() - t)
        tr = Trainer(build_model("cnn28", num_classes=sub.num_classes, in_channels=3, seed=0),
                     TrainConfig(epochs=1, batch_size=128, seed=0, loader="stream", workers=workers, count_flops=False,
                                 threads=1))
        t = time.perf_counter()
        tr.fit(sub.images, sub.labels)
        fit = n / (time.perf_counter() - t)
        print(f"  workers {workers}: decode {dec:,.0f} images/s; cnn28 training epoch {fit:,.0f} images/s "
              f"({n:,} images of 224 x 224, batch 128, 1 torch thread)")


_PEAK = """
import resource, subprocess, sys
r = subprocess.run([sys.executable, "-m", "vistabench", *sys.argv[1:]], capture_output=True, text=True)
if r.returncode:
    sys.exit(r.stderr)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _small_list(root: Path, n_train: int, n_test: int, classes: int = 4, size: int = 32) -> Path:
    blobs = [_jpeg(int(255 * c / classes), size=size, seed=c) for c in range(classes)]
    for part, n in (("train", n_train), ("test", n_test)):
        (root / part).mkdir(parents=True, exist_ok=True)
        rows = []
        for i in range(n):
            rel = f"{part}/{i}.jpg"
            (root / rel).write_bytes(blobs[i % classes])
            rows.append(f"{rel} {i % classes}")
        (root / f"{part}.txt").write_text("\n".join(rows) + "\n")
    return root


def part_eval(d: Path) -> None:
    peaks = {}
    for n_test in (100, 5000, 20000):
        data = d / "eval" / str(n_test)
        if not (data / "test.txt").is_file():
            _small_list(data, 200, n_test)
        cmd = ["longtail", "run", "--data", f"imagelist:{data}", "--loader", "stream", "--workers", "2", "--method", "ce",
               "--model", "cnn28", "--imbalance", "2", "--epochs", "1", "--batch-size", "16", "--points", "2",
               "--repeats", "1", "--threads", "1", "--no-store"]
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", _PEAK, *cmd], capture_output=True, text=True)
        if r.returncode:
            sys.exit(r.stderr[-2000:])
        peaks[n_test] = int(r.stdout.split()[-1]) / 1024
        print(f"  {n_test:>6,} test images: peak RSS {peaks[n_test]:,.0f} MB (largest process), "
              f"run {time.perf_counter() - t:.0f} s")
    print(f"  growth 100 -> 20,000 test images: {peaks[20000] - peaks[100]:+,.0f} MB "
          f"(their logits: {20000 * 4 * 4 / 1e6:.1f} MB)")


def part_score(d: Path) -> None:
    from vistabench.data import Predictions, load_predictions, write_predictions
    from vistabench.protocols.longtail.runner import score
    from vistabench.protocols.longtail.sweep import build_sweep, write_sweep

    counts = shaped_counts(1000, 1280, 5, 115_846)
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(1000), 50)
    logits = rng.normal(size=(50_000, 1000)).astype(np.float32)
    logits[np.arange(50_000), labels] += 2.0
    t = time.perf_counter()
    sweep = build_sweep(labels, counts, test_imbalance=256, points=10, repeats=5, seed=0)
    built = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp:
        pred, sw = Path(tmp) / "pred.npz", Path(tmp) / "sweep.json"
        write_predictions(pred, Predictions(labels=labels, kind="logits", values=logits))
        write_sweep(sw, sweep)
        pred_mb = pred.stat().st_size / 1e6
        t = time.perf_counter()
        loaded = load_predictions(pred)
        read = time.perf_counter() - t
        t = time.perf_counter()
        res = score(loaded, sw)
        inproc = time.perf_counter() - t
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "vistabench", "longtail", "score", "--predictions", str(pred),
                            "--sweep", str(sw), "--no-store", "--json"], capture_output=True, text=True)
        cmd = time.perf_counter() - t
        if r.returncode:
            sys.exit(r.stderr[-2000:])
    n_sets = sum(len(p["samples"]) for p in sweep["points"])
    print(f"  sweep of 10 points x 5 sets ({n_sets} test sets) on 1,000 classes x 50,000 predictions: built in "
          f"{built:.2f} s")
    print(f"  the sweep scored (sweep file read + resampled + exact) on the loaded predictions: {inproc:.2f} s; goal "
          f"<= 5 s: {'met' if inproc <= 5 else 'NOT met'}; AVG {res['avg']:.3f}")
    print(f"  reading the predictions file ({pred_mb:.0f} MB compressed npz of float32 logits): {read:.2f} s; "
          f"`longtail score` as a command (whole process: imports, both reads, scoring): {cmd:.2f} s")


def _fscil_set(root: Path, classes: int, base: int, way: int, shot: int, sessions: int, n_train: int, n_test: int,
               side: int) -> None:
    if (root / "DONE").is_file():
        return
    for c in range(classes):
        blob_dir = root / "src"
        blob_dir.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(c)
        for part, n in (("train", n_train), ("test", n_test)):
            (root / part / f"c{c:03d}").mkdir(parents=True, exist_ok=True)
            for i in range(n):
                px = np.clip(rng.normal(255 * c / classes, 30, (side, side, 3)), 0, 255).astype(np.uint8)
                Image.fromarray(px).save(root / part / f"c{c:03d}" / f"{i:04d}.jpg", format="jpeg")
    idx = root / "index_list"
    idx.mkdir(exist_ok=True)
    rows = [f"data/train/c{c:03d}/{i:04d}.jpg" for c in range(base) for i in range(n_train)]
    (idx / "session_1.txt").write_text("\n".join(rows) + "\n")
    for s in range(2, sessions + 1):
        first = base + (s - 2) * way
        rows = [f"data/train/c{c:03d}/{i:04d}.jpg" for c in range(first, first + way) for i in range(shot)]
        (idx / f"session_{s}.txt").write_text("\n".join(rows) + "\n")
    (root / "DONE").write_text("")


def part_fscil(d: Path, n_train: int, n_test: int) -> None:
    shapes = {"mini_imagenet": (100, 60, 5, 5, 9, 84), "cub200": (200, 100, 10, 5, 11, 84)}
    for name, (classes, base, way, shot, sessions, side) in shapes.items():
        root = d / "fscil" / name
        _fscil_set(root, classes, base, way, shot, sessions, n_train, n_test, side)
        out = root / "run"
        sessions_file = root / "sessions.json"
        vb = [sys.executable, "-m", "vistabench", "incremental"]
        r = subprocess.run([*vb, "sessions", "--data", f"folder:{root}", "--index-lists", str(root / "index_list"),
                            "--out", str(sessions_file)], capture_output=True, text=True)
        if r.returncode:
            sys.exit(r.stderr[-2000:])
        t0 = time.time()
        r = subprocess.run([*vb, "run", "--data", f"folder:{root}", "--sessions", str(sessions_file), "--method",
                            "prototype", "--model", "cnn28", "--epochs", "1", "--out", str(out),
                            "--no-store", "--json"], capture_output=True, text=True)
        total = time.time() - t0
        if r.returncode:
            sys.exit(r.stderr[-2000:])
        stamps = [t0] + [os.stat(out / f"session_{i}.npz").st_mtime for i in range(1, sessions + 1)]
        per = np.diff(stamps)
        print(f"  {name}: {classes} classes of {n_train}+{n_test} images ({side} px), {sessions} sessions "
              f"({base} base, {way}-way {shot}-shot), prototype on cnn28, 1 base epoch: {total:.1f} s in all "
              "(a fresh process); "
              f"session 1 (with reading the data) {per[0]:.1f} s, novel sessions {per[1:].mean():.2f} s each "
              f"(max {per[1:].max():.2f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="folder for the synthetic sets (written once, reused)")
    ap.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    ap.add_argument("--fscil-train", type=int, default=30, help="training images per class of the FSCIL sets")
    ap.add_argument("--fscil-test", type=int, default=15, help="test images per class of the FSCIL sets")
    args = ap.parse_args()
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    print(f"bench_paper_scale: {load_line()}")
    for part in args.parts:
        print(f"[{part}]")
        t = time.perf_counter()
        if part == "lists":
            part_lists(d)
        elif part == "pipeline":
            part_pipeline(d)
        elif part == "eval":
            part_eval(d)
        elif part == "score":
            part_score(d)
        else:
            part_fscil(d, args.fscil_train, args.fscil_test)
        print(f"  ({time.perf_counter() - t:.0f} s; {load_line()})")
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")


if __name__ == "__main__":
    main()
