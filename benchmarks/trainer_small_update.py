"""The SGD update of a small network on one OpenMP thread vs torch's threads, side by side, per fit.

Trains dhn's digits network (``HybridNet``, J = 3 on 8 px images: 1 x 1 maps) on 500 digits images,
batch 10, 2 epochs (100 steps, as one final run of ``smalldata run --dataset digits --method dhn``),
alternating the update on one OpenMP thread (``vistabench.learners.openmp``, the default) and on
torch's threads, with the same seed; prints the median wall and processor time per fit of each,
their ratio, the 1-minute load, and whether logits, weights and losses are identical. The scattering
is cached before the first timed fit (a fit then times the steps alone). The whole command's figure:
benchmarks/smalldata_dhn_cache.py ``--modes update2 warmed``.

    .venv/bin/python benchmarks/trainer_small_update.py [--repeats 12]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the vistabench command sets it


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=12, help="fits per setting (default 12)")
    args = ap.parse_args()

    import numpy as np
    import torch

    from vistabench.data.readers import load_dataset
    from vistabench.learners import openmp
    from vistabench.learners.smalldata.dhn import HybridNet
    from vistabench.learners.trainer import Trainer, TrainConfig

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

    print(f"{torch.get_num_threads()} torch threads, OpenMP runtime found: {openmp.runtime() is not None}; "
          f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    fit()  # the scattering cache and oneDNN's kernels, once
    times: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    outs: dict[bool, tuple] = {}
    load0 = os.getloadavg()[0]
    for _ in range(args.repeats):
        for one in (False, True):
            openmp.ENABLED = one
            wall, cpu, out = fit()
            times[one].append((wall, cpu))
            outs.setdefault(one, out)
    openmp.ENABLED = True
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in times.items()}
    for one in (False, True):
        print(f"update on {'one thread ' if one else 'torch threads'}: {med[one][0]:.2f} s wall, "
              f"{med[one][1]:.2f} s processor per 100-step fit (median of {args.repeats})")
    a, b = outs[False], outs[True]
    same = (np.array_equal(a[0], b[0]) and all(torch.equal(p, q) for p, q in zip(a[1], b[1])) and a[2] == b[2])
    print(f"torch threads / one thread: wall {med[False][0] / med[True][0]:.2f}x, "
          f"processor {med[False][1] / med[True][1]:.2f}x; identical: {same}; "
          f"load {load0:.2f} / {os.getloadavg()[0]:.2f} (before / after)")


if __name__ == "__main__":
    main()
