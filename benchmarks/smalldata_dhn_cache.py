"""dhn on digits: the scattering cache and Kymatio's thread setting, before vs after, side by side.

Runs ``vistabench smalldata run --dataset digits --method dhn`` in this process once per mode,
with a fixed seed, and prints wall and processor time, the images Kymatio transformed, and the
run's accuracies (which must be identical in every mode):

- ``original``: every batch transformed anew, Kymatio on torch's thread count (as before);
- ``one-thread``: every batch transformed anew, Kymatio on one thread;
- ``cached``: at most one transform per distinct input, Kymatio on one thread (the default).

The machine's load (``os.getloadavg``) is printed before and after each mode: on a shared machine
the processor time is the steadier figure.

    .venv/bin/python benchmarks/smalldata_dhn_cache.py [--trials 2] [--epochs 2] [--modes cached original]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
import time

from vistabench.cli import main as cli
from vistabench.learners.smalldata.dhn import SCATTERING_CACHE

MODES = {"original": (False, False), "one-thread": (False, True), "cached": (True, True)}


def _accuracies(record: dict) -> list:
    """Every accuracy-like number of the run's JSON, in a fixed order (compared across modes)."""
    found: list = []

    def walk(v, path):
        if isinstance(v, dict):
            for k in sorted(v):
                walk(v[k], f"{path}.{k}")
        elif isinstance(v, list):
            for i, e in enumerate(v):
                walk(e, f"{path}[{i}]")
        elif isinstance(v, float) and "acc" in path:
            found.append((path, v))

    walk(record, "")
    return found


def run(mode: str, args: argparse.Namespace) -> dict:
    SCATTERING_CACHE.clear()
    SCATTERING_CACHE.enabled, SCATTERING_CACHE.one_thread = MODES[mode]
    with tempfile.TemporaryDirectory() as work:
        argv = ["smalldata", "run", "--dataset", "digits", "--method", "dhn", "--trials", str(args.trials),
                "--epochs", str(args.epochs), "--seed", "0", "--no-store", "--json", "--work-dir", work]
        if args.repeats is not None:
            argv += ["--repeats", str(args.repeats)]
        load0 = os.getloadavg()[0]
        out = io.StringIO()
        t, c = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(out):
            rc = cli(argv)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
    if rc != 0:
        raise SystemExit(f"{mode}: the run exited {rc}")
    return {"wall": wall, "cpu": cpu, "computed": SCATTERING_CACHE.computed, "hits": SCATTERING_CACHE.hits,
            "load": (load0, os.getloadavg()[0]), "acc": _accuracies(json.loads(out.getvalue()))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=None, help="final runs per split (default: the preset's 10)")
    ap.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    args = ap.parse_args()
    print(f"dhn on digits, {args.trials} trials x {args.epochs} epochs, {os.cpu_count()} CPUs\n")
    print(f"{'mode':10} | {'wall s':>8} | {'cpu s':>8} | {'transformed':>11} | {'hits':>7} | load 1-min before/after")
    res = {}
    for mode in args.modes:
        r = res[mode] = run(mode, args)
        print(f"{mode:10} | {r['wall']:8.1f} | {r['cpu']:8.1f} | {r['computed']:11d} | {r['hits']:7d} | "
              f"{r['load'][0]:.2f} / {r['load'][1]:.2f}", flush=True)
    if len(res) > 1:
        first, *rest = res
        base = res[first]
        for m in rest:
            print(f"\n{first} / {m}: wall {base['wall'] / res[m]['wall']:.1f}x, "
                  f"cpu {base['cpu'] / res[m]['cpu']:.1f}x; accuracies identical: {res[m]['acc'] == base['acc']}")
    some = next(iter(res.values()))["acc"]
    print(f"\n{len(some)} accuracies compared, e.g. " + ", ".join(f"{p}={v:.4f}" for p, v in some[:3]))


if __name__ == "__main__":
    main()
