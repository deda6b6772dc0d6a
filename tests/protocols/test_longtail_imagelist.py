"""`longtail run --data imagelist:DIR --loader stream --workers 2` trains and scores images on disk; the
stream loader's numbers equal the memory loader's; ten times more images barely move peak memory."""

import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
from PIL import Image

from vistabench.cli import main


def write_image_list(root: Path, n_train: int, *, n_test: int = 40, size: int = 8, classes: int = 4) -> Path:
    """A train.txt/test.txt layout of small PNG and JPEG files whose brightness follows the class
    (eight encoded variants per class and format, written as bytes: fast for thousands of files)."""
    rng = np.random.default_rng(0)
    variants = {}
    for c in range(classes):
        for fmt in ("png", "jpeg"):
            for v in range(8):
                a = np.clip(rng.normal(255 * c / classes, 25, (size, size, 3)), 0, 255).astype(np.uint8)
                buf = io.BytesIO()
                Image.fromarray(a).save(buf, format=fmt)
                variants[c, fmt, v] = buf.getvalue()
    for part, n in (("train", n_train), ("test", n_test)):
        (root / part).mkdir(parents=True, exist_ok=True)
        lines = []
        for i in range(n):
            c, fmt = i % classes, ("png", "jpeg")[i // classes % 2]
            rel = f"{part}/{i}.{'png' if fmt == 'png' else 'jpg'}"
            (root / rel).write_bytes(variants[c, fmt, i // (2 * classes) % 8])
            lines.append(f"{rel} {c}")
        (root / f"{part}.txt").write_text("\n".join(lines) + "\n")
    return root


ARGS = ["--method", "ce", "--imbalance", "4", "--epochs", "2", "--batch-size", "16", "--points", "3",
        "--repeats", "2", "--json"]


def test_stream_loader_trains_and_scores_like_memory(tmp_path, capsys):
    data = write_image_list(tmp_path / "d", 80)
    recs = {}
    for loader in ("stream", "memory"):
        rc = main(["longtail", "run", "--data", f"imagelist:{data}", "--loader", loader, "--workers", "2", *ARGS,
                   "--store", str(tmp_path / "r.sqlite")])
        out, err = capsys.readouterr()
        assert rc == 0, err
        recs[loader] = json.loads(out)
    s, m = recs["stream"], recs["memory"]
    assert s["dataset"] == f"imagelist:{data}" and s["settings"]["model"] == "cnn28"
    assert 0 <= s["metrics"]["avg"] <= 1 and s["metrics"]["exact"]["test_agnostic"]["uniform"] > 0.25
    for k in ("auc", "avg", "std", "balanced"):  # the loader changes speed, never the numbers
        assert s["metrics"][k] == m["metrics"][k]
    assert s["split_hash"] == m["split_hash"]


def test_bad_loader_is_one_line(tmp_path, capsys):
    data = write_image_list(tmp_path / "d", 8, n_test=4)
    rc = main(["longtail", "run", "--data", f"imagelist:{data}", "--loader", "disk", *ARGS])
    err = capsys.readouterr().err
    assert rc == 2 and "loader" in err and len(err.strip().splitlines()) == 1


_PEAK = textwrap.dedent("""
    import resource, subprocess, sys
    r = subprocess.run([sys.executable, "-m", "vistabench", *sys.argv[1:]], capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr)
    print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)  # KiB on Linux: the largest process
""")


def test_ten_times_more_images_raise_peak_memory_by_less_than_120_mb(tmp_path):
    """Peak RSS (the largest of the run's processes, workers included) of a fresh process tree. The
    8,200 images of 32 x 32 px of the larger run are 25 MB decoded, 100 MB as float32, 200 MB as the
    float64 of a one-pass normalisation: a run that held the decoded set would fail this. Both test
    pools are larger than one prediction batch (512), whose activations are a fixed cost."""
    if sys.platform != "linux":  # ru_maxrss is in bytes on macOS and absent on Windows
        return
    peaks = {}
    for n in (300, 3000):  # train + test: 820 and 8,200 images
        data = write_image_list(tmp_path / str(n), n, n_test=520 * n // 300, size=32)
        cmd = ["longtail", "run", "--data", f"imagelist:{data}", "--loader", "stream", "--workers", "2",
               "--method", "ce", "--model", "cnn28", "--imbalance", "2", "--epochs", "1", "--batch-size", "32", "--points", "2",
               "--repeats", "1", "--threads", "1", "--store", str(tmp_path / f"{n}.sqlite")]
        r = subprocess.run([sys.executable, "-c", _PEAK, *cmd], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        peaks[n] = int(r.stdout.split()[-1]) * 1024
    assert peaks[3000] - peaks[300] < 120e6, peaks


def test_peak_memory_does_not_grow_with_the_test_set(tmp_path):
    """Prediction streams too: 100 and 5,000 test images (32 px, decoded per batch by the workers)
    peak within 60 MB of each other. Predicting in batches of 512 instead of the training batch's 16
    held 86 MB more of decoded images and activations for the larger test set (measured)."""
    if sys.platform != "linux":
        return
    peaks = {}
    for n_test in (100, 5000):
        data = write_image_list(tmp_path / str(n_test), 200, n_test=n_test, size=32)
        cmd = ["longtail", "run", "--data", f"imagelist:{data}", "--loader", "stream", "--workers", "2",
               "--method", "ce", "--model", "cnn28", "--imbalance", "2", "--epochs", "1", "--batch-size", "16",
               "--points", "2", "--repeats", "1", "--threads", "1", "--store", str(tmp_path / f"{n_test}.sqlite")]
        r = subprocess.run([sys.executable, "-c", _PEAK, *cmd], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        peaks[n_test] = int(r.stdout.split()[-1]) * 1024
    assert abs(peaks[5000] - peaks[100]) < 60e6, peaks
