"""`vistabench demo`: every declared protocol end to end on the bundled data, then the HTML report.

Each protocol's ``demo`` part (a module of this package, declared in :mod:`vistabench.suite`) is
``demo(store, out_dir, *, quick) -> str``: it runs its part on bundled data (seconds to a minute or
two on 2 CPU cores), writes records to ``store`` and returns a short human summary (a table).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from ..errors import InputError
from ..store import ResultsStore

__all__ = ["run_demo", "SMOKE_NOTE"]

#: what a ``--quick`` run's tables and report say first
SMOKE_NOTE = ("SMOKE RUN (--quick): smaller data, fewer epochs and trials, to check that everything runs; "
              "the numbers are not the protocols' results")


def run_demo(out_dir: str | Path, *, only: Sequence[str] | None = None, quick: bool = False,
             log=print) -> dict:
    """Run the demo parts (all, or ``only``), write the store and report under ``out_dir``.

    Returns ``{"store", "parts": {name: {"seconds", "text"}}, "report", "quick"}``: ``text`` is the part's
    tables as its demo prints them. ``log`` gets progress lines only (a part starts, ends).
    """
    from ..report import build_report
    from ..suite import get_protocol, protocols

    chosen = [p for p in protocols() if p.has("demo")]
    if only:
        wanted = [get_protocol(n) for n in only]  # unknown names: close-match suggestions
        for proto in wanted:
            if not proto.has("demo"):
                raise InputError(f"only: protocol {proto.name!r} declares no demo")
        chosen = [p for p in chosen if p.name in {w.name for w in wanted}]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    store_path = out / "results.sqlite"
    for suffix in ("", "-wal", "-shm"):  # a demo starts from an empty store
        Path(str(store_path) + suffix).unlink(missing_ok=True)
    summary: dict = {"store": str(store_path), "parts": {}}
    with ResultsStore(store_path) as store:
        for proto in chosen:
            t0 = time.perf_counter()
            log(f"demo: running {proto.name} ...")
            text = proto.part("demo")(store, out / proto.name, quick=quick)
            if quick:
                text = f"{SMOKE_NOTE}\n{text}"
            dt = time.perf_counter() - t0
            log(f"demo: {proto.name} done in {dt:.1f} s")
            summary["parts"][proto.name] = {"seconds": round(dt, 1), "text": text}
        title = f"vistabench demo report — {SMOKE_NOTE}" if quick else "vistabench demo report"
        report = build_report(store, out / "report", title=title)
    summary["report"] = str(report)
    summary["quick"] = quick
    log(f"demo: wrote {report}")
    return summary
