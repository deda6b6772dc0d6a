"""How the size of the pieces a results file is decoded in changes its reading time and page faults.

The reader (``vistabench.data.coco.read_result_columns``) decodes a box results file a chunk of
``chunk_bytes`` at a time: msgspec turns the chunk's numbers into a list of Python floats, which
numpy copies into columns. The floats live in CPython's small-object arenas (1 MiB each); once a
chunk's list is freed its arenas are empty, and CPython returns all but one empty arena to the
system, so the next chunk's floats fault fresh, zero-filled pages in again. A chunk whose floats fit
in about one arena reuses it instead. This script reads the same file with each chunk size, one
process per read (imports outside the timing), rounds interleaved, and prints the median time,
the reader's page faults (``ru_minflt``, the reading process only) and the ratio to the largest size.

Not run in CI; the machine's load moves every figure (the script prints it).

    python benchmarks/detection_eval.py --images 1000 --categories 1000 --keep /tmp/det1k   # writes the set
    python benchmarks/detection_read_chunks.py /tmp/det1k/results.json --repeat 9
    python benchmarks/detection_read_chunks.py /tmp/det1k/results.json --sizes 128K 512K 2M --two-processes
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from vistabench.allocation import large_arrays
from vistabench.data.coco import read_result_columns
path, chunk, two = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
r0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
with large_arrays():  # as `detection eval` reads
    c = read_result_columns(path, chunk_bytes=chunk, two_processes=two, check_masks=False)
seconds = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": seconds, "faults": r1.ru_minflt - r0.ru_minflt, "rows": int(len(c["score"]))}))
"""


def size(text: str) -> int:
    """``512K``, ``2M`` or a number of bytes."""
    t = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20}.get(t[-1:], 1)
    try:
        value = int(t[:-1] if scale > 1 else t) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size such as 512K or 2M, got {text!r}") from None
    if value < 64:
        raise argparse.ArgumentTypeError(f"expected at least 64 bytes, got {text!r}")
    return value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", type=Path, help="a box results JSON file (e.g. written by detection_eval.py --keep)")
    ap.add_argument("--sizes", nargs="+", type=size, default=[size(s) for s in ("128K", "256K", "512K", "1M", "2M")],
                    help="chunk sizes to compare (default: 128K 256K 512K 1M 2M)")
    ap.add_argument("--repeat", type=int, default=7, help="interleaved rounds (medians are printed)")
    ap.add_argument("--two-processes", action="store_true",
                    help="read as `detection eval` does on two cores (a forked child decodes the second half); "
                         "its faults are then the parent's only")
    args = ap.parse_args()
    if not args.results.is_file():
        ap.error(f"results: no such file: {args.results}")
    if args.repeat < 1:
        ap.error(f"--repeat: expected a positive integer, got {args.repeat}")
    print(f"{args.results} ({args.results.stat().st_size / 1e6:.0f} MB); load average before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    with open(args.results, "rb") as fh:  # from the page cache for every run
        while fh.read(16 << 20):
            pass
    runs: dict[int, list[dict]] = {s: [] for s in args.sizes}
    for _ in range(args.repeat):
        for s in args.sizes:
            p = subprocess.run([sys.executable, "-c", CHILD, str(args.results), str(s), "1" if args.two_processes else "0"],
                               capture_output=True, text=True, check=False)
            if p.returncode != 0:
                sys.exit(f"chunk {s}: the reader failed: {p.stderr.strip().splitlines()[-1]}")
            runs[s].append(json.loads(p.stdout.strip().splitlines()[-1]))
    base = max(args.sizes)
    base_time = statistics.median(r["seconds"] for r in runs[base])
    for s in args.sizes:
        t = statistics.median(r["seconds"] for r in runs[s])
        f = statistics.median(r["faults"] for r in runs[s])
        spread = [r["seconds"] for r in runs[s]]
        print(f"chunk {s >> 10:>6} KiB  {t * 1e3:7.1f} ms (runs {min(spread) * 1e3:.0f}..{max(spread) * 1e3:.0f})  "
              f"{f:8.0f} page faults  {base_time / t:5.2f}x the {base >> 10} KiB chunk's speed  "
              f"({runs[s][0]['rows']} detections)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
