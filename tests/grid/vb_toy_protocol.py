"""A toy protocol for the grid's tests: a typed config and a run that takes no data and no torch.

Importable by name in worker processes (tests put this folder on ``PYTHONPATH``).
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path

from vistabench.config import RunConfig, option
from vistabench.errors import InputError
from vistabench.store import Record


@dataclass(frozen=True, kw_only=True)
class ToyConfig(RunConfig):
    protocol = "toy"

    method: str = option("a", help="method", choices=("a", "b", "balanced_softmax"))
    seed: int = option(0, help="seed", low=0)
    n_max: int = option(5, help="largest class size", low=1)
    fail: bool = option(False, help="raise while running (a cell that fails at run time)")
    sleep: float = option(0.0, help="seconds the run takes", low=0)
    parts: int = option(1, help="records the run returns", low=1)
    run_id: str = option("", help="run id (empty: none)")
    device: str = option("cpu", help="device", runtime=True)
    threads: int = option(1, help="threads", low=1, runtime=True)

    def check(self) -> None:
        if self.method == "b" and self.n_max > 100:
            raise InputError("n_max: method b takes at most 100")


def run(config: ToyConfig, *, store=None, work_dir=None) -> list[Record]:
    if config.fail:
        raise ValueError(f"toy failure (method {config.method})\nsecond line")
    if work_dir is not None:  # the run has begun on its worker (a test waits for this before killing a node)
        (Path(work_dir) / "started.txt").write_text(str(os.getpid()))
    if config.sleep:
        time.sleep(config.sleep)
    if work_dir is not None:
        (Path(work_dir) / "ran.txt").write_text(str(os.getpid()))
    out = []
    for i in range(config.parts):
        rec = Record(protocol="toy", dataset="toy", method=config.method, seed=config.seed, split_hash=None,
                     settings={**config.key_dict(), "part": i},
                     metrics={"score": config.seed * 10 + config.n_max + i, "pid": os.getpid()})
        if store is not None:
            rec = dataclasses.replace(rec, id=store.add(rec))
        out.append(rec)
    return out


def table(records, *, dataset=None):
    from vistabench.report.tables import select

    return sorted((r.method, r.seed, r.metrics["score"]) for r in select(records, protocol="toy"))
