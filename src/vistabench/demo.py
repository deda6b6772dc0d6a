"""`vistabench demo`: every protocol end to end on the bundled data, then the HTML report.

Each protocol module ``vistabench.protocols.<name>`` may define
``demo(store: ResultsStore, out_dir: Path, *, quick: bool) -> str`` which runs its part on bundled
data (seconds to a minute or two on 2 CPU cores), writes records to ``store`` and returns a short
human summary (a table). The demo runs them in order and builds the report.
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import Sequence

from .errors import InputError
from .report import build_report
from .store import ResultsStore

PROTOCOLS = ["longtail", "detection", "incremental", "smalldata", "stream"]


def available() -> list[str]:
    out = []
    for name in PROTOCOLS:
        try:
            mod = importlib.import_module(f"vistabench.protocols.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"vistabench.protocols.{name}":
                continue
            raise
        if hasattr(mod, "demo"):
            out.append(name)
    return out


def run_demo(out_dir: str | Path, *, only: Sequence[str] | None = None, quick: bool = False,
             log=print) -> dict:
    """Run the demo parts (all, or ``only``), write the store and report under ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = available()
    if only:
        unknown = [n for n in only if n not in names]
        if unknown:
            raise InputError(f"--only: unknown or unavailable protocol(s) {unknown}; available: {names}")
        names = [n for n in names if n in only]
    store_path = out / "results.sqlite"
    for suffix in ("", "-wal", "-shm"):  # a demo starts from an empty store
        Path(str(store_path) + suffix).unlink(missing_ok=True)
    summary: dict = {"store": str(store_path), "parts": {}}
    with ResultsStore(store_path) as store:
        for name in names:
            t0 = time.perf_counter()
            log(f"\n=== {name} ===")
            mod = importlib.import_module(f"vistabench.protocols.{name}")
            text = mod.demo(store, out / name, quick=quick)
            dt = time.perf_counter() - t0
            log(text)
            log(f"({name}: {dt:.1f} s)")
            summary["parts"][name] = {"seconds": round(dt, 1)}
        report = build_report(store, out / "report", title="vistabench demo report")
    summary["report"] = str(report)
    log(f"\nReport: {report}")
    return summary
