"""A small network's fit with its threads free vs on one CPU (vistabench.learners.one_cpu), side by side.

Trains dhn's digits network (``HybridNet``, J = 3 on 8 px images: 1 x 1 maps) on 500 digits images,
batch 10, 2 epochs (100 steps, as one final run of ``smalldata run --dataset digits --method dhn``),
alternating ``VISTABENCH_ONE_CPU=0`` (threads free, the default before) and the default (the steps on
one CPU when the first fit measured that faster; the choice made is printed), with the same seed;
prints the median wall and processor time per fit of each, their ratio, the 1-minute load, and
whether logits, weights and losses are identical. Idle OpenMP threads sleep, as the ``vistabench``
command sets (``OMP_WAIT_POLICY=PASSIVE``, before torch loads). The scattering is cached before the
first timed fit. The whole command's figure: benchmarks/smalldata_dhn_cache.py ``--modes spread warmed``.

    .venv/bin/python benchmarks/trainer_one_cpu.py [--repeats 6]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the vistabench command sets it


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=6, help="fits per setting (default 6)")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error(f"--repeats: expected a positive integer, got {args.repeats}")

    import numpy as np
    import torch

    from vistabench.data.readers import load_dataset
    from vistabench.learners import one_cpu
    from vistabench.learners.smalldata.dhn import HybridNet
    from vistabench.learners.trainer import Trainer, TrainConfig

    if not one_cpu.supported():
        raise SystemExit("this machine cannot move threads (needs Linux, 2+ CPUs, OMP_WAIT_POLICY=PASSIVE)")
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

    print(f"{torch.get_num_threads()} torch threads, {len(os.sched_getaffinity(0))} CPUs; load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    fit()  # the scattering cache, oneDNN's kernels and the placement's measurement, once
    print(f"choice measured in the first fit: {'one CPU' if any(one_cpu.CHOICES.values()) else 'threads free'}")
    times: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    outs: dict[bool, tuple] = {}
    load0 = os.getloadavg()[0]
    for _ in range(args.repeats):
        for on in (False, True):
            os.environ[one_cpu.ENV] = "1" if on else "0"
            wall, cpu, out = fit()
            times[on].append((wall, cpu))
            outs[on] = out
    same = (np.array_equal(outs[True][0], outs[False][0])
            and all(torch.equal(a, b) for a, b in zip(outs[True][1], outs[False][1]))
            and outs[True][2] == outs[False][2])
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in times.items()}
    print(f"threads free : {med[False][0]:.3f} s wall, {med[False][1]:.3f} s processor per fit "
          f"(runs {min(w for w, _ in times[False]):.2f}-{max(w for w, _ in times[False]):.2f} s)")
    print(f"default      : {med[True][0]:.3f} s wall, {med[True][1]:.3f} s processor per fit "
          f"(runs {min(w for w, _ in times[True]):.2f}-{max(w for w, _ in times[True]):.2f} s)")
    print(f"ratio        : {med[False][0] / med[True][0]:.2f}x wall, {med[False][1] / med[True][1]:.2f}x processor; "
          f"identical logits, weights and losses: {same}; load average {load0:.2f} -> {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
