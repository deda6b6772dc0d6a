"""A small network's fit under two runtime settings, side by side, per fit (the same numbers either way).

Trains dhn's digits network (``HybridNet``, J = 3 on 8 px images: 1 x 1 maps) on 500 digits images,
batch 10, 2 epochs (100 steps, as one final run of ``smalldata run --dataset digits --method dhn``),
alternating two settings with the same seed, and prints the median wall and processor time per fit of
each, their ratio, the 1-minute load, and whether logits, weights and losses are identical:

- ``--compare one-cpu`` (default): threads free (``VISTABENCH_ONE_CPU=0``, the default before
  2026-11-29 06:00) against the default, where the steps run with every thread on one CPU when the
  first fit measured that faster (``vistabench.learners.one_cpu``; the choice made is printed);
- ``--compare update``: the SGD update on torch's threads against one OpenMP thread
  (``vistabench.learners.openmp``), both with the threads free.

Idle OpenMP threads sleep, as the ``vistabench`` command sets (``OMP_WAIT_POLICY=PASSIVE``, before
torch loads). The scattering is cached before the first timed fit (a fit then times the steps alone).
The whole command's figure: benchmarks/smalldata_dhn_cache.py ``--modes spread warmed``.

    .venv/bin/python benchmarks/trainer_small_network.py [--compare one-cpu|update] [--repeats 6]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the vistabench command sets it


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compare", choices=("one-cpu", "update"), default="one-cpu",
                    help="which two settings to alternate (default one-cpu)")
    ap.add_argument("--repeats", type=int, default=6, help="fits per setting (default 6)")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error(f"--repeats: expected a positive integer, got {args.repeats}")

    import numpy as np
    import torch

    from vistabench.data.readers import load_dataset
    from vistabench.learners import one_cpu, openmp
    from vistabench.learners.smalldata.dhn import HybridNet
    from vistabench.learners.trainer import Trainer, TrainConfig

    if args.compare == "one-cpu" and not one_cpu.supported():
        raise SystemExit("--compare one-cpu: this machine cannot move threads (needs Linux, 2+ CPUs, "
                         "OMP_WAIT_POLICY=PASSIVE)")
    names = {"one-cpu": ("threads free", "default"), "update": ("update on torch threads", "update on one thread")}
    names = dict(zip((False, True), names[args.compare]))

    def setting(on: bool) -> None:
        if args.compare == "one-cpu":
            os.environ[one_cpu.ENV] = "1" if on else "0"
        else:
            os.environ[one_cpu.ENV] = "0"
            openmp.ENABLED = on

    d = load_dataset("digits").train
    x, y = d.images[:500], d.labels[:500]

    def fit() -> tuple[float, float, tuple]:
        torch.manual_seed(0)
        model = HybridNet(10, 1, J=3, widths=(64, 128))
        tr = Trainer(model, TrainConfig(epochs=2, batch_size=10, lr=0.004, weight_decay=0.007, seed=0,
                                        count_flops=False))
        t, c = time.perf_counter(), time.process_time()
        res = tr.fit(x, y)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        return wall, cpu, (tr.predict_logits(x), [p.detach().clone() for p in model.parameters()],
                           [h["loss"] for h in res.history])

    print(f"{torch.get_num_threads()} torch threads, {len(os.sched_getaffinity(0))} CPUs, OpenMP runtime found: "
          f"{openmp.runtime() is not None}; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    setting(True)
    fit()  # the scattering cache, oneDNN's kernels and (one-cpu) the placement's measurement, once
    if args.compare == "one-cpu":
        print(f"choice measured in the first fit: {'one CPU' if any(one_cpu.CHOICES.values()) else 'threads free'}")
    times: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    outs: dict[bool, tuple] = {}
    load0 = os.getloadavg()[0]
    for _ in range(args.repeats):
        for on in (False, True):
            setting(on)
            wall, cpu, out = fit()
            times[on].append((wall, cpu))
            outs.setdefault(on, out)
    a, b = outs[False], outs[True]
    same = np.array_equal(a[0], b[0]) and all(torch.equal(p, q) for p, q in zip(a[1], b[1])) and a[2] == b[2]
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in times.items()}
    for on in (False, True):
        runs = [w for w, _ in times[on]]
        print(f"{names[on]:<24}: {med[on][0]:.2f} s wall, {med[on][1]:.2f} s processor per 100-step fit "
              f"(median of {args.repeats}; runs {min(runs):.2f}-{max(runs):.2f} s)")
    print(f"{names[False]} / {names[True]}: wall {med[False][0] / med[True][0]:.2f}x, processor "
          f"{med[False][1] / med[True][1]:.2f}x; identical logits, weights and losses: {same}; "
          f"load {load0:.2f} / {os.getloadavg()[0]:.2f} (before / after)")


if __name__ == "__main__":
    main()
