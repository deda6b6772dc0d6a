#!/usr/bin/env python
"""Which components are checked against their authors' code, and how: the fidelity report.

Runs the executed checks of ``tests/fidelity/`` (the authors' modules, loaded from the cache that
``scripts/fetch_fidelity_refs.py`` fills, run beside vistabench's on the same inputs) and prints one
status per component:

* ``executed and equal``: every check of the component ran and passed under vistabench's default
  for the reference recipe;
* ``executed and different: OPTION``: the checks ran and passed with ``OPTION`` set; vistabench's
  default differs from the reference there (the test module's ``FIDELITY_OPTION`` names it);
* ``executed and failing: TEST``: a check ran and failed (exit status 1);
* ``read only (not executed: REASON)``: the component has checks but none ran (the reference is not
  in the cache: the skip reason says which);
* ``read only``: compared by reading only (the table :data:`READ_ONLY`, each with the page of
  docs/fidelity.md that lists its differences).

A component is one test module ``tests/fidelity/test_<component>.py``; its reference (repository and
pinned commit) is the manifest ``tests/fidelity/refs/<name>.json`` whose name starts the component's.
The statuses of executed components come from the run, never from a table.

Why a script and not a ``vistabench`` verb: the checks are test code (pytest fixtures, the
torchvision stand-ins, the cached reference files) that the package does not ship, so a verb would
have to import test code from a source checkout.

Examples::

    python scripts/fidelity_report.py                 # every component, as a table
    python scripts/fidelity_report.py --json          # the same as JSON
    python scripts/fidelity_report.py --only ldam_drw bbn
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests" / "fidelity"

#: Components compared by reading only: (component, reference, where docs/fidelity.md lists them).
READ_ONLY: tuple[tuple[str, str, str], ...] = (
    ("longtail ib", "pseulki/IB-Loss cifar_train.py, losses.py", "docs/fidelity.md#longtail"),
    ("longtail tade", "Vanint/SADE-AgnosticLT configs, model/loss.py", "docs/fidelity.md#longtail"),
    ("longtail gcl", "Keke921/GCLLoss cifar_train_backbone.py, cifar_train_classifier.py", "docs/fidelity.md#longtail"),
    ("longtail tde / lade", "KaihuaTang/Long-Tailed-Recognition.pytorch, hyperconnect/LADE", "docs/fidelity.md#longtail"),
    ("longtail bbn combiner and reversed sampler", "megvii-research/BBN lib/core/combiner.py", "docs/fidelity.md#longtail"),
    ("longtail crt stage 2 loop", "facebookresearch/classifier-balancing run_networks.py", "docs/fidelity.md#longtail"),
    ("incremental fr", "iSEE-Laboratory/Revisting_FSCIL models/my_vit/, models/myModules.py",
     "docs/fidelity.md#incremental"),
    ("stream ft-d k-NN and trial loop", "google-deepmind/dm_nevis finetuning_dknn_learner.py (JAX)",
     "docs/fidelity.md#stream"),
    ("stream task list", "google-deepmind/dm_nevis dm_nevis/streams/nevis_stream.py", "docs/fidelity.md#stream"),
    ("smalldata auxilearn generator mode per epoch", "lorenzobrigato/gem auxilearn_classifier.py (CUDA loop)",
     "docs/fidelity.md#smalldata"),
    ("smalldata dvp distillation stage", "lorenzobrigato/gem distill_pretraining.py", "docs/fidelity.md#smalldata"),
)


def manifests() -> dict[str, dict]:
    out = {}
    for path in sorted((TESTS / "refs").glob("*.json")):
        out[path.stem] = json.loads(path.read_text())
    return out


def reference_of(component: str, refs: dict[str, dict]) -> str:
    """``owner/name@commit`` of the manifest whose name is the longest prefix of ``component``."""
    names = [n for n in refs if component == n or component.startswith(n + "_")]
    if not names:
        return "(no manifest)"
    m = refs[max(names, key=len)]
    return f"{m['repo']}@{m['commit'][:12]}"


class _Collector:
    """pytest plugin: each test's outcome, skip reason and its module's ``FIDELITY_OPTION``."""

    def __init__(self) -> None:
        self.outcomes: dict[str, dict] = {}
        self.options: dict[str, str | None] = {}
        self.exit_status = 0

    def pytest_collection_modifyitems(self, items) -> None:
        for item in items:
            self.options[Path(str(item.path)).stem] = getattr(item.module, "FIDELITY_OPTION", None)

    def pytest_runtest_logreport(self, report) -> None:
        entry = self.outcomes.setdefault(report.nodeid, {"outcome": "passed", "reason": ""})
        if report.skipped:
            entry["outcome"] = "skipped"
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            entry["reason"] = reason.removeprefix("Skipped: ")
        elif report.failed:
            entry["outcome"] = "failed"


def run_checks(files: list[Path]) -> _Collector:
    import pytest

    collector = _Collector()
    # the project's pytest settings, node ids relative to the folder above the checks
    args = [str(f) for f in files] + ["-q", "-p", "no:cacheprovider", "-c", str(ROOT / "pyproject.toml"),
                                      f"--rootdir={TESTS.parent}"]
    with contextlib.redirect_stdout(sys.stderr):  # pytest's own report goes to stderr
        collector.exit_status = int(pytest.main(args, plugins=[collector]))
    return collector


def component_statuses(files: list[Path], collector: _Collector, refs: dict[str, dict]) -> list[dict]:
    rows = []
    for f in files:
        component = f.stem.removeprefix("test_")
        tests = {k: v for k, v in collector.outcomes.items() if Path(k.split("::")[0]).stem == f.stem}
        counts = {o: sum(v["outcome"] == o for v in tests.values()) for o in ("passed", "failed", "skipped")}
        option = collector.options.get(f.stem)
        failed = [k.split("::", 1)[-1] for k, v in tests.items() if v["outcome"] == "failed"]
        if not tests:
            status = f"executed and failing: no check ran (pytest exit status {collector.exit_status}; see stderr)"
        elif failed:
            status = f"executed and failing: {failed[0]}"
        elif counts["passed"] == 0:
            reason = next((v["reason"] for v in tests.values() if v["reason"]), "skipped")
            status = f"read only (not executed: {reason})"
        elif option:
            status = f"executed and different: {option}"
        else:
            status = "executed and equal"
        rows.append({"component": component, "reference": reference_of(component, refs), "status": status,
                     "tests": counts, "file": str(f.relative_to(ROOT)) if f.is_relative_to(ROOT) else str(f)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="components whose name starts with NAME (e.g. gem, ldam_drw); the read-only table "
                             "is left out")
    args = parser.parse_args(argv)
    files = sorted(TESTS.glob("test_*.py"))
    if args.only:
        files = [f for f in files if any(f.stem.removeprefix("test_").startswith(n) for n in args.only)]
        if not files:
            parser.error(f"--only: no component starts with {' or '.join(args.only)} "
                         f"(components: {', '.join(sorted(f.stem[5:] for f in TESTS.glob('test_*.py')))})")
    refs = manifests()
    rows = component_statuses(files, run_checks(files), refs)
    if not args.only:
        rows += [{"component": c, "reference": r, "status": "read only", "tests": None, "file": doc}
                 for c, r, doc in READ_ONLY]
    cache = os.environ.get("VISTABENCH_FIDELITY_CACHE") or str(Path.home() / ".cache" / "vistabench" / "fidelity")
    if args.json:
        print(json.dumps({"cache": cache, "components": rows}, indent=1))
    else:
        width = max(len(r["component"]) for r in rows)
        print(f"reference cache: {cache}")
        for r in rows:
            print(f"{r['component']:<{width}}  {r['status']}  [{r['reference']}]")
    return 1 if any(r["status"].startswith("executed and failing") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
