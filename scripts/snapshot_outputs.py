"""Everything a refactor must leave unchanged, written to one folder so two trees can be compared.

For the vistabench on the import path it writes, into OUT:

- ``print-config/<protocol>[-<method>].json``: ``vistabench <protocol> run --print-config --json``
  on bundled data for every registered method of every training protocol, and
  ``print-config/example-<name>.json`` for each run-config example;
- ``grid/<example>.json``: ``vistabench grid status --json`` of every grid example (each cell and its
  key);
- ``demo/records.json``: every record the demo (``--quick`` with ``--quick``) stores, without the
  volatile fields (times, ids, versions, timings);
- ``demo/tables/<protocol>.md``: the demo store's tables.

Then ``--compare BEFORE AFTER`` lists every file that differs (exit 1 when one does)::

    PYTHONPATH=/path/to/old/src python scripts/snapshot_outputs.py --out /tmp/before
    PYTHONPATH=src python scripts/snapshot_outputs.py --out /tmp/after
    python scripts/snapshot_outputs.py --compare /tmp/before /tmp/after
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import json
import re
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: the options that make each protocol's --print-config run on bundled data
PROTOCOL_ARGS = {
    "longtail": ["--data", "digits", "--imbalance", "10"],
    "incremental": ["--data", "digits", "--base-classes", "4", "--way", "2", "--shot", "5"],
    "smalldata": ["--dataset", "digits"],
    "stream": [],
}
#: volatile record fields (they change from run to run)
_VOLATILE_FIELDS = ("created", "id", "version", "run_id")


def _volatile(key: str) -> bool:
    return ("seconds" in key or key.endswith("_time") or key in ("images_per_second", "peak_memory_bytes",
                                                                  "record_id", "peak_rss_bytes", "started",
                                                                  "finished", "host", "path", "store"))


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in sorted(value.items()) if not _volatile(k)}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _cli(args: list[str]) -> tuple[int, str]:
    from vistabench.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(args)
        except SystemExit as e:  # argparse
            rc = e.code if isinstance(e.code, int) else 1
    return rc or 0, out.getvalue() if not rc else out.getvalue() + err.getvalue()


#: the flag naming each protocol's method, as ``run --help`` lists its names
METHOD_FLAG = {"longtail": "--method METHOD", "incremental": "--method METHOD", "smalldata": "--method NAME",
               "stream": "--learner LEARNER"}


def _methods(protocol: str) -> list[str]:
    """The method names ``<protocol> run --help`` lists under its method flag."""
    rc, text = _cli([protocol, "run", "--help"])
    m = re.search(re.escape(METHOD_FLAG[protocol]) + r"\s+(.*?)(\(docs|\[required|\(default|\(or |\n  -)", text, re.S)
    names = [n.split("(")[0].strip() for n in re.split(r"[,|]", m.group(1).replace("\n", " "))] if m else []
    return [n for n in names if re.fullmatch(r"[a-z0-9_-]+", n) and n != "pt"]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def snapshot(out: Path, *, quick: bool, demo: bool = True) -> None:
    for protocol, extra in PROTOCOL_ARGS.items():
        methods = _methods(protocol) or [None]
        for method in methods:
            chosen = [METHOD_FLAG[protocol].split()[0], method] if method else []
            args = [protocol, "run", *extra, *chosen, "--print-config", "--json"]
            if protocol == "stream" and method == "bhpo":
                args += ["--search-space", "default"]
            rc, text = _cli(args)
            _write(out / "print-config" / f"{protocol}{'-' + method if method else ''}.json", f"rc {rc}\n{text}")
    for example in sorted((ROOT / "examples").glob("*.yaml")):
        head = example.read_text().split("protocol:", 1)
        protocol = head[1].split()[0] if len(head) > 1 else None
        rc, text = _cli(["grid", "status", str(example), "--store", str(out / "grid.sqlite"), "--json"])
        if rc == 0:
            _write(out / "grid" / f"{example.stem}.json", text)
        elif protocol:
            rc2, text2 = _cli([protocol, "run", "--config", str(example), "--print-config", "--json"])
            _write(out / "print-config" / f"example-{example.stem}.json", f"rc {rc2}\n{text2}")
    if not demo:
        return
    demo = out / "demo-run"
    rc, text = _cli(["demo", "--out", str(demo), "--json", *(["--quick"] if quick else [])])
    if rc:
        raise SystemExit(f"demo failed (rc {rc}):\n{text[-2000:]}")
    con = sqlite3.connect(demo / "results.sqlite")
    con.row_factory = sqlite3.Row
    rows = []
    for row in con.execute("SELECT * FROM records ORDER BY protocol, dataset, method, seed, kind, id"):
        d = {k: row[k] for k in row.keys() if k not in _VOLATILE_FIELDS}
        for k in ("settings", "metrics"):
            if isinstance(d.get(k), str):
                d[k] = _strip(json.loads(d[k]))
        rows.append(d)
    rows.sort(key=lambda d: json.dumps(d, sort_keys=True))
    # the output folder itself (a checkpoint's path) is not a difference
    _write(out / "demo" / "records.json", json.dumps(rows, indent=1, sort_keys=True).replace(str(out), "<OUT>"))
    for protocol in PROTOCOL_ARGS | {"detection": []}:
        rc, text = _cli(["table", protocol, "--store", str(demo / "results.sqlite")])
        _write(out / "demo" / "tables" / f"{protocol}.md", f"rc {rc}\n{text}")


def compare(before: Path, after: Path) -> int:
    names = sorted({p.relative_to(before) for p in before.rglob("*") if p.is_file() and "demo-run" not in p.parts
                    and p.suffix != ".sqlite"}
                   | {p.relative_to(after) for p in after.rglob("*") if p.is_file() and "demo-run" not in p.parts
                      and p.suffix != ".sqlite"})
    changed = 0
    for name in names:
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            print(f"{name}: only in {'after' if b.exists() else 'before'}")
            changed += 1
            continue
        if a.read_text() != b.read_text():
            changed += 1
            print(f"{name}: differs")
            sys.stdout.writelines(list(difflib.unified_diff(a.read_text().splitlines(True), b.read_text().splitlines(True),
                                                            "before", "after", n=1))[:40])
    print(f"{len(names)} files compared, {changed} differ")
    return 1 if changed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="folder to write the snapshot into")
    ap.add_argument("--quick", action="store_true", help="the demo's smoke run (faster)")
    ap.add_argument("--no-demo", action="store_true", help="only the printed configs and the grid keys")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    a = ap.parse_args()
    if a.compare:
        return compare(*a.compare)
    if not a.out:
        ap.error("--out or --compare is required")
    snapshot(a.out, quick=a.quick, demo=not a.no_demo)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
