"""dhn on digits, before vs after, side by side: the scattering cache, its warm-up, Kymatio's thread
setting, the OpenMP wait policy, and two ways to run the same numbers faster on a CPU.

Runs ``vistabench smalldata run --dataset digits --method dhn`` once per mode, each in a fresh
process (the OpenMP wait policy is read when torch loads), with a fixed seed, and prints wall and
processor time (user + system of that process), the processor time of its busiest thread (the
serial path: on an idle machine the wall time cannot be shorter), the images Kymatio transformed,
the 1-minute load before and after (``uptime``'s figure), and whether the run's results are identical
to the first mode's (every field of ``--json`` but the timings, the record ids and times, the
peak memory and the runtime-only settings a mode changes; the count compared is printed):

- ``original``: every batch transformed anew, Kymatio on torch's thread count, OpenMP default
  (idle threads spin), as before the cache;
- ``cached``: at most one transform per distinct input, Kymatio on one thread, batches computed as
  they come, OpenMP default: ``main`` before issue 37;
- ``passive``: ``cached`` with idle OpenMP threads sleeping (``OMP_WAIT_POLICY=PASSIVE``, what
  ``vistabench`` sets when the environment does not choose);
- ``update2``: ``passive`` with each fit's training set transformed up front in large batches, the
  SGD update on torch's two threads (``main`` before the one-thread update);
- ``spread``: ``update2`` with the SGD update of this small network on one OpenMP thread
  (``vistabench.learners.openmp``; element-wise, the same bits), torch's threads free to run on
  either CPU (``VISTABENCH_ONE_CPU=0``) and Kymatio's batches in one thread: the default before
  2026-11-29 06:00;
- ``warmed``: ``spread`` where a fit's steps move every
  thread onto one CPU when the first fit measured that faster (``vistabench.learners.one_cpu``:
  the same two threads and split, the same bits, no cross-CPU wake per parallel region), and a
  Kymatio batch of 64 images or more computed as two halves at once in two threads;
- ``lanes``: the default ``vistabench smalldata run`` since 2026-11-29 09:00: ``warmed`` where,
  once a split's first final run has trained on one CPU and drawn nothing from torch's default
  generator, the other nine run two at once, one per CPU (``vistabench.learners.lanes``: each with
  torch's two threads, the same bits); ``warmed`` turns that off (``VISTABENCH_LANES=0``);
- ``parallel``: ``warmed`` with ``--max-parallel 2``: the 30 final runs in two worker processes,
  each on torch's two threads (the same numbers: a run's thread count is unchanged);
- ``pinned``: ``warmed`` in a process bound to one CPU with ``--threads 2`` (torch would otherwise
  take one thread from the affinity mask, which changes the last bits): the same two-thread
  arithmetic, without waking a sleeping thread on the other CPU ~130 times per step (Linux only).

Where the time goes (issue 37, profiled with perf and per-phase timers): ~85% of the default run is
the 3,252 training steps, and a step of this network (1 x 1 maps after the J = 3 scattering of 8 px
images) is ~130 OpenMP parallel regions (7 batch norms x 6 regions forward, ~51 backward, 20 in SGD
for the 5 weights over 32,768 elements, gone since the update of a network this small runs on one
OpenMP thread: ``update2`` / ``warmed``); on one thread the step takes 5-7 ms. Each region wakes
torch's second thread, asleep under ``OMP_WAIT_POLICY=PASSIVE``, on the other CPU; on a virtual
machine that costs 50-150 us, 2-3x the arithmetic, and varies with the host (the same idle machine
ran the default in 60 s and 80 s within the hour). Python's own work per step (the loop, the cache
lookup, the optimizer's loop over its parameters) is ~1.5 ms; garbage collection 0.6 s in the whole
run.
In ``parallel`` the serial path and the transform counts are the main process's (the tuning).
What remains per step (torch.profiler and oneDNN's verbose log, load 2-3, ~17 ms): backward ~9.5 ms,
most of it oneDNN's weight gradients of the 3 x 3 convolutions on 1 x 1 maps (0.3-0.9 ms each) and
of the 1 x 1 shortcut (2-3 ms on two threads, even on one CPU), forward 3-4 ms, the update ~1.3 ms;
those kernels sum per thread, so they keep torch's two threads. Measured 2026-11-29, load 1.3-2.9
(another job held up to one CPU), ``update2`` -> ``warmed`` in five runs, alternating order: 75.1 ->
73.1, 74.7 -> 68.7, 64.7 -> 57.6, 60.0 -> 61.9 s wall and, at load 0.6-0.9, 98.9 -> 87.8 s; results
identical in all: ~6%, within the machine's variation; ``warmed`` from the sources before and after,
interleaved, load 1.0-3.4: 112.4 / 121.1, 80.8 / 69.3, 73.8 / 79.0, 100.6 / 100.4 s: no steady
difference. The default takes 58-121 s here (``parallel`` 73.3 s, ``pinned`` 65.5 s in the 57.6 s
run, at load 2.4-2.8). Per fit, alternated: benchmarks/trainer_small_network.py --compare update (1.15x wall at load
0.7).

``spread`` -> ``warmed`` (the steps on one CPU, Kymatio's halves), six runs on 2026-11-29 05:37-07:13
UTC in alternating order, load 0.5-1.5 with the host taking 30-40% of the machine (``top``'s steal):
83.4 -> 65.6 and 102.5 -> 60.7 s with the steps on one CPU alone, 93.5 -> 62.2, 92.5 -> 58.9,
87.1 -> 62.9 and 93.3 -> 66.1 s with both; processor time 78.0-84.6 -> 63.7-72.0 s; results identical
in all (3,543 fields).

``warmed`` -> ``lanes`` (a split's final runs after the first, two at once), four runs on 2026-11-29
08:51-08:59 UTC in alternating order, load 0.9-2.2: 67.0 -> 45.9, 60.2 -> 49.2, 64.6 -> 46.4 and
66.0 -> 47.8 s; processor time unchanged (66.8-73.6 s -> 71.1-73.8 s); results identical in all four
(3,543 fields), the same 3,900 images transformed.

On a machine shared with other work the processor time is the steadier figure; with the default
OpenMP policy a 2-thread run waits for a descheduled partner thread, so ``original`` and ``cached``
take 20+ minutes at load 8 (``--timeout`` stops a mode; its row then says so).

    .venv/bin/python benchmarks/smalldata_dhn_cache.py [--trials 2] [--epochs 2] [--modes warmed lanes parallel pinned]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

# mode -> (cache enabled, Kymatio on one thread, warm-up, OMP_WAIT_POLICY or None for the default,
#          a small network's SGD update on one OpenMP thread)
MODES = {"original": (False, False, False, None, False), "cached": (True, True, False, None, False),
         "passive": (True, True, False, "PASSIVE", False), "update2": (True, True, True, "PASSIVE", False),
         "spread": (True, True, True, "PASSIVE", True), "warmed": (True, True, True, "PASSIVE", True),
         "lanes": (True, True, True, "PASSIVE", True), "parallel": (True, True, True, "PASSIVE", True),
         "pinned": (True, True, True, "PASSIVE", True)}
# mode -> extra command-line flags (runtime only: they never change a number)
EXTRA = {"parallel": ["--max-parallel", "2"], "pinned": ["--threads", "2"]}
# the modes as they were before a small network's steps could move to one CPU (vistabench.learners.one_cpu)
# and a large Kymatio batch was computed as two halves at once (SCATTERING_CACHE.halves)
SPREAD = {"original", "cached", "passive", "update2", "spread"}
# the modes whose final runs train one at a time in this process (vistabench.learners.lanes off)
ONE_AT_A_TIME = SPREAD | {"warmed"}
# fields that differ between two runs of the same command, or name the runtime setting a mode changes
# (``placement``: where a final run trained, alone or beside another one: lanes on or off)
VOLATILE = {"created", "run_id", "id", "train_seconds", "trial_seconds", "images_per_second", "peak_memory_bytes",
            "max_parallel", "threads", "placement"}


def _fields(record) -> dict:
    """Every leaf of the run's JSON by its path, less the :data:`VOLATILE` ones (compared across modes)."""
    found: dict = {}

    def walk(v, path):
        if isinstance(v, dict):
            for k in sorted(v):
                if k not in VOLATILE:
                    walk(v[k], f"{path}.{k}")
        elif isinstance(v, list):
            for i, e in enumerate(v):
                walk(e, f"{path}[{i}]")
        else:
            found[path] = v

    walk(record, "")
    return found


def _accuracies(record) -> list:
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


def _busiest_thread_cpu() -> float | None:
    """Processor seconds of this process's busiest thread (Linux ``/proc``; None elsewhere): the
    run's serial path, a floor for its wall time on an idle machine."""
    ticks = os.sysconf("SC_CLK_TCK")
    best = None
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime (fields 14, 15 of stat)
            best = cpu if best is None else max(best, cpu)
    except OSError:
        return None
    return best


def child(mode: str, argv: list[str]) -> None:
    """One run in this process (started by :func:`run`): prints one JSON line."""
    import contextlib
    import io

    from vistabench.cli import main as cli
    from vistabench.learners import openmp
    from vistabench.learners.smalldata.dhn import SCATTERING_CACHE

    SCATTERING_CACHE.enabled, SCATTERING_CACHE.one_thread, SCATTERING_CACHE.warm = MODES[mode][:3]
    openmp.ENABLED = MODES[mode][4]
    SCATTERING_CACHE.halves = mode not in SPREAD
    if mode == "pinned":  # before torch starts its threads: both of them on the first allowed CPU
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    out = io.StringIO()
    t = time.perf_counter()
    with contextlib.redirect_stdout(out):
        rc = cli(argv)
    wall = time.perf_counter() - t
    if rc != 0:
        raise SystemExit(f"{mode}: the run exited {rc}")
    print(json.dumps({"wall": wall, "computed": SCATTERING_CACHE.computed, "hits": SCATTERING_CACHE.hits,
                      "serial_cpu": _busiest_thread_cpu(),
                      "acc": _accuracies(json.loads(out.getvalue())), "fields": _fields(json.loads(out.getvalue()))}))


def run(mode: str, args: argparse.Namespace, work: str) -> dict:
    argv = ["smalldata", "run", "--dataset", "digits", "--method", "dhn", "--trials", str(args.trials),
            "--epochs", str(args.epochs), "--seed", "0", "--no-store", "--json", "--work-dir",
            os.path.join(work, mode), *EXTRA.get(mode, [])]
    if args.repeats is not None:
        argv += ["--repeats", str(args.repeats)]
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "VISTABENCH_ONE_CPU", "VISTABENCH_LANES")}
    if mode in SPREAD:
        env["VISTABENCH_ONE_CPU"] = "0"
    if mode in ONE_AT_A_TIME:
        env["VISTABENCH_LANES"] = "0"
    if MODES[mode][3] is not None:
        env["OMP_WAIT_POLICY"] = MODES[mode][3]
    load0 = os.getloadavg()[0]
    before = os.times()
    t = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, __file__, "--child", mode, "--", *argv], env=env, text=True,
                              capture_output=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        proc = None
    wall = time.perf_counter() - t
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    res = {"wall": wall, "cpu": cpu, "load": (load0, os.getloadavg()[0]), "timed_out": proc is None}
    if proc is not None:
        if proc.returncode != 0:
            raise SystemExit(f"{mode}: exited {proc.returncode}\n{proc.stderr[-2000:]}")
        res.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    return res


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[4:])
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=None, help="final runs per split (default: the preset's 10)")
    ap.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    ap.add_argument("--timeout", type=float, default=1800, help="seconds one mode may run (default 1800)")
    args = ap.parse_args()
    twice = sorted({m for m in args.modes if args.modes.count(m) > 1})
    if twice:  # a mode's work folder (its tuning study) is per call: a second run would resume the first
        ap.error(f"--modes: {', '.join(twice)} given twice; each mode runs once per call (run the script again "
                 "to repeat one)")
    if "pinned" in args.modes and not hasattr(os, "sched_setaffinity"):
        raise SystemExit("--modes: 'pinned' needs os.sched_setaffinity (Linux)")
    print(f"dhn on digits, {args.trials} trials x {args.epochs} epochs, {os.cpu_count()} CPUs; "
          f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())} (as uptime prints it)\n")
    print(f"{'mode':9} | {'wall s':>8} | {'cpu s':>8} | {'serial s':>8} | {'transformed':>11} | {'hits':>7} | "
          "load 1-min before/after")
    res = {}
    with tempfile.TemporaryDirectory() as work:
        for mode in args.modes:
            r = res[mode] = run(mode, args, work)
            serial = "" if r.get("serial_cpu") is None else f"{r['serial_cpu']:.1f}"
            counts = "timed out".rjust(21) if r["timed_out"] else f"{r['computed']:11d} | {r['hits']:7d}"
            print(f"{mode:9} | {r['wall']:8.1f} | {r['cpu']:8.1f} | {serial:>8} | {counts} | "
                  f"{r['load'][0]:.2f} / {r['load'][1]:.2f}", flush=True)
    done = {m: r for m, r in res.items() if not r["timed_out"]}
    if len(res) > 1:
        first, *rest = res
        base = res[first]
        for m in rest:
            both = m in done and first in done
            same = (res[m]["fields"] == base["fields"]) if both else "(not compared: timed out)"
            print(f"\n{first} / {m}: wall {base['wall'] / res[m]['wall']:.1f}x, "
                  f"cpu {base['cpu'] / res[m]['cpu']:.1f}x; results identical: {same}")
            if both and not same:
                diff = sorted(k for k in base["fields"].keys() | res[m]["fields"].keys()
                              if base["fields"].get(k) != res[m]["fields"].get(k))
                print(f"  {len(diff)} fields differ, e.g. " + ", ".join(diff[:5]))
    if done:
        some = next(iter(done.values()))
        print(f"\n{len(some['fields'])} fields compared ({len(some['acc'])} of them accuracies), e.g. "
              + ", ".join(f"{p}={v:.4f}" for p, v in some["acc"][:3]))


if __name__ == "__main__":
    main()
