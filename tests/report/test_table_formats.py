"""Every protocol's table in every format shows N and a spread, and its LaTeX compiles.

Two stores: "demo-like" (the quick demo's records plus a second seed of each, whose predictions and
numbers differ: several methods, N = 2 and a spread everywhere) and "one method, one seed" (one
result per protocol). The LaTeX of each protocol's table (and of the long-tail survey layout, exact
mode and the small-data cost table) is compiled in a minimal document with the packages its first
line names (``booktabs``, ``graphicx``), by pdflatex when it is on the PATH (scripts/test.sh installs it
on CI) and by xelatex when present, and fits the text width of a plain article (no overfull line).
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from vistabench.cli import main
from vistabench.report.html import table_html
from vistabench.store import Record, ResultsStore
from vistabench.suite import get_protocol

PROTOCOLS = ("longtail", "detection", "incremental", "smalldata", "stream")
#: every table a protocol prints: (protocol, extra flags)
TABLES = [(p, ()) for p in PROTOCOLS] + [("longtail", ("--layout", "survey")), ("longtail", ("--mode", "exact")),
                                         ("smalldata", ("--cost",))]


def _scaled(v, k: float):
    """Every fraction in (0, 1) of a record's metrics times ``k``: the numbers of "another seed"."""
    if isinstance(v, dict):
        return {key: _scaled(x, k) for key, x in v.items()}
    if isinstance(v, list):
        return [_scaled(x, k) for x in v]
    if isinstance(v, float) and 0 < v < 1:
        return v * k
    return v


def _second_seed(r: Record) -> Record:
    settings = {**r.settings, "predictions_sha256": f"second-seed-of-record-{r.id}"}
    return replace(r, id=None, seed=(r.seed or 0) + 100, settings=settings, metrics=_scaled(r.metrics, 0.97),
                   run_id=f"{r.run_id}-seed2" if r.kind == "event" else None)


def _one_method_one_seed(records: list[Record]) -> list[Record]:
    out = []
    for p in PROTOCOLS:
        recs = [r for r in records if r.protocol == p]
        first = recs[0] if p != "smalldata" else next(r for r in recs if r.kind == "final")
        keep = [r for r in recs if r.method == first.method and r.seed == first.seed]
        if p == "stream":
            keep = [r for r in keep if r.run_id == first.run_id]
        if p == "smalldata":
            keep = [r for r in keep if r.kind != "final" or r.id == first.id]
        out += keep
    return out


@pytest.fixture(scope="module")
def stores(quick_demo, tmp_path_factory):
    with ResultsStore(quick_demo.store, read_only=True) as s:
        records = s.records()
    folder = tmp_path_factory.mktemp("table-stores")
    out = {}
    for name, recs in (("demo-like", records + [_second_seed(r) for r in records]),
                       ("one", _one_method_one_seed(records))):
        with ResultsStore(folder / f"{name}.sqlite") as s:
            s.add_many([replace(r, id=None) for r in recs])
        out[name] = folder / f"{name}.sqlite"
    return out


def _run(capsys, *argv: str) -> str:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


def test_every_format_of_every_protocol_shows_n_and_a_spread(stores, capsys):
    store = str(stores["demo-like"])
    for proto, extra in TABLES:
        where = f"{proto} {' '.join(extra)}"
        md = _run(capsys, proto, "table", "--store", store, *extra)
        assert "±" in md and ("| N |" in md or "(n=" in md), where
        tex = _run(capsys, proto, "table", "--store", store, "--format", "latex", *extra)
        assert "$\\pm$" in tex and (" & N & " in tex or "(n=" in tex), where
        rows = list(csv.DictReader(io.StringIO(_run(capsys, proto, "table", "--store", store, "--format", "csv", *extra))))
        assert rows and any(k.endswith("_sd") for k in rows[0]), where
        assert any(int(r.get("n") or 0) >= 2 or any(k.endswith("_n") and int(v or 0) >= 2 for k, v in r.items())
                   for r in rows if r.get("n") != "ref."), where
        js = json.loads(_run(capsys, proto, "table", "--store", store, "--json", *extra))
        assert "SD" in js["caption"], where
        row = next(r for r in js["rows"] if r.get("n") != "ref.")
        assert any(k.endswith("_sd") and v is not None for k, v in row.items()), where
        assert row.get("n", 0) >= 2 or any(k.endswith("_n") and v >= 2 for k, v in row.items()), where
    with ResultsStore(store, read_only=True) as s:  # the report's HTML tables, from the same tables
        for proto in PROTOCOLS:
            page = table_html(get_protocol(proto).part("table")(s))
            assert "±" in page and (">N<" in page or "(n=" in page), proto


def test_one_method_one_seed_has_n_1_and_no_marks(stores, capsys):
    store = str(stores["one"])
    for proto, extra in TABLES:
        js = json.loads(_run(capsys, proto, "table", "--store", store, "--json", *extra))
        measured = [r for r in js["rows"] if r.get("n") != "ref."]
        assert len(measured) == 1 and measured[0].get("n", 1) == 1, (proto, extra)
        md = _run(capsys, proto, "table", "--store", store, *extra)
        assert "**" not in md and "<u>" not in md, (proto, extra)


def test_ties_as_printed_are_marked_alike():
    from vistabench.report.tables import Column, Table

    rows = [{"method": m, "n": 3, "worst": v} for m, v in (("a", 0.00001), ("b", 0.0), ("c", -0.5))]
    t = Table([Column("worst", "Worst↑")], rows)
    assert t.marks() == {(0, "worst"): "bold", (1, "worst"): "bold", (2, "worst"): "underline"}
    assert t.ranks(depth=1) == {(0, "worst"): 1, (1, "worst"): 1}
    rows[2]["worst"] = 0.0  # every row ties: nothing is best
    assert t.marks() == {} and t.ranks(depth=1) == {}
    rows[2]["n"] = 1  # a row resting on one result: the column is not marked at all
    rows[2]["worst"] = -0.5
    assert t.marks() == {}


ENGINES = [e for e in ("pdflatex", "xelatex") if shutil.which(e)]


def _compile(engine: str, tex: str, folder: Path, *, body: str | None = None) -> str:
    """Typeset ``tex`` in a plain article whose preamble loads what its first line names; the log."""
    first = tex.splitlines()[0]
    assert first.startswith("% needs in the preamble: \\usepackage{booktabs}"), first
    preamble = "".join(f"\\usepackage{{{p}}}\n" for p in re.findall(r"\\usepackage\{(\w+)\}", first))
    doc = folder / "doc.tex"
    doc.write_text("\\documentclass{article}\n" + preamble + "\\begin{document}\n" + (tex if body is None else body)
                   + "\n\\end{document}\n", encoding="utf-8")
    done = subprocess.run([engine, "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=folder,
                          capture_output=True, text=True, timeout=180)
    log = (folder / "doc.log").read_text(errors="replace")
    errors = [line for line in log.splitlines() if line.startswith("!") or "Missing character" in line]
    assert done.returncode == 0 and not errors, f"{engine}: {errors[:5] or done.stdout[-2000:]}"
    return log


@pytest.mark.skipif(not ENGINES, reason="no pdflatex on the PATH (scripts/test.sh installs it on CI)")
@pytest.mark.parametrize("which", ["demo-like", "one"])
def test_latex_of_every_protocol_compiles(stores, capsys, tmp_path, which):
    for k, (proto, extra) in enumerate(TABLES):
        tex = _run(capsys, proto, "table", "--store", str(stores[which]), "--format", "latex", *extra)
        assert tex.isascii(), (proto, extra)
        for engine in ENGINES:
            folder = tmp_path / f"{k}-{engine}"
            folder.mkdir()
            log = _compile(engine, tex, folder)
            assert "Overfull \\hbox" not in log, (proto, extra, engine)  # wide tables are scaled to the text


@pytest.mark.skipif(not ENGINES, reason="no pdflatex on the PATH (scripts/test.sh installs it on CI)")
def test_latex_scales_a_wide_table_down_and_keeps_a_narrow_one(tmp_path):
    """The tabular is scaled to the text width only when it is wider: measured by TeX itself."""
    from vistabench.report.tables import Column, Table

    def widths(t: Table, name: str) -> tuple[float, float, float]:
        tex = t.render("latex")
        lines = tex.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("\\resizebox"))
        end = next(i for i, line in enumerate(lines) if line.startswith("\\end{tabular}}"))
        fitted = "\n".join(lines[start:end + 1])
        natural = "\n".join(lines[start + 1:end] + ["\\end{tabular}"])
        body = (f"\\setbox0=\\hbox{{{natural}}}\\setbox2=\\hbox{{{fitted}}}"
                "\\typeout{WIDTHS \\the\\wd0|\\the\\wd2|\\the\\linewidth}")
        folder = tmp_path / name
        folder.mkdir()
        log = _compile(ENGINES[0], tex, folder, body=body)
        return tuple(float(x) for x in re.search(r"WIDTHS ([\d.]+)pt\|([\d.]+)pt\|([\d.]+)pt", log).groups())

    narrow = Table([Column("a", "A")], [{"method": "x", "n": 1, "a": 0.5}])
    natural, fitted, text = widths(narrow, "narrow")
    assert natural < text and abs(fitted - natural) < 0.01  # kept (TeX's scaling arithmetic: < 0.01 pt)
    wide = Table([Column(f"c{i}", f"a long column title {i}") for i in range(12)],
                 [{"method": "a method with a long name", "n": 1, **{f"c{i}": 0.5 for i in range(12)}}])
    natural, fitted, text = widths(wide, "wide")
    assert natural > text and abs(fitted - text) < 0.01
