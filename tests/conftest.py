import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

_spec = importlib.util.spec_from_file_location("_figures", Path(__file__).with_name("_figures.py"))
_figures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_figures)


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    """Run the suite single-threaded: faster on a shared 2-core machine, and determinism tests
    compare runs made with the same thread count."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    """Commands like `stream run --threads N` set torch's process-wide thread count; keep it per test."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    yield
    torch = sys.modules.get("torch")
    if torch is not None and before is not None and torch.get_num_threads() != before:
        torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _work_in_tmp(tmp_path, monkeypatch):
    """Commands write their default outputs (./vistabench.sqlite, run folders) to the working
    directory: run every test in its own temporary one, never in the checkout. Worker processes
    (Ray) still import test helpers by module name, so the checkout stays on their path."""
    import os
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session")
def figure_check():
    """:func:`_figures.figure_problems`: what a reader would be misled by in a matplotlib figure."""
    return _figures.figure_problems


@pytest.fixture(scope="session")
def quick_demo(tmp_path_factory):
    """The quick demo (every protocol) run once for the whole suite (the demo's own test and the report's
    tests read the same run): ``summary`` (what :func:`~vistabench.demos.run_demo` returned), ``page``
    (the report), ``store``, and ``figures``: (caption, problems) of every figure the report drew,
    checked as it becomes the PNG (its text enlarged for a narrow page,
    :func:`vistabench.report.html.readable_text`)."""
    import vistabench.report.html as report_html
    from vistabench.demos import run_demo

    out = tmp_path_factory.mktemp("demo")
    figures: list[tuple[str, list[str]]] = []
    draw = report_html.figure_html

    def checked(fig, caption=""):
        report_html.readable_text(fig)  # as drawn: with the text enlarged for a narrow page
        figures.append((caption, _figures.figure_problems(fig)))
        return draw(fig, caption)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report_html, "figure_html", checked)
        summary = run_demo(out, quick=True, log=lambda *a, **k: None)
    return SimpleNamespace(summary=summary, page=out / "report" / "index.html", store=out / "results.sqlite",
                           figures=figures)


def pytest_terminal_summary(terminalreporter):
    """The documented command lines the docs runner did not run, with the page's reason
    (tests/test_docs_commands.py, ``skip-line`` markers)."""
    lines = [v for rep in terminalreporter.stats.get("passed", [])
             for k, v in getattr(rep, "user_properties", []) if k == "docs-runner: not run"]
    if lines:
        terminalreporter.section("docs runner: documented lines not run")
        for line in lines:
            terminalreporter.line(line)


#: The records table of a results store as vistabench wrote it before schema 2: written out here, so the
#: migration tests do not depend on the code they test.
SCHEMA1_RECORDS_TABLE = """
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    protocol TEXT NOT NULL,
    dataset TEXT NOT NULL,
    method TEXT NOT NULL,
    seed INTEGER,
    split_hash TEXT,
    settings TEXT NOT NULL,
    metrics TEXT NOT NULL,
    version TEXT NOT NULL,
    created REAL NOT NULL,
    tag TEXT
);
CREATE INDEX IF NOT EXISTS records_protocol ON records(protocol, dataset, method);
"""
#: ... and its grid bookkeeping table (stores of the versions that marked their files)
SCHEMA1_GRID_TABLE = """
CREATE TABLE IF NOT EXISTS grid_cells (
    key TEXT PRIMARY KEY, protocol TEXT NOT NULL, options TEXT NOT NULL, status TEXT NOT NULL, error TEXT,
    host TEXT, pid INTEGER, updated REAL NOT NULL
);
"""
#: A marked schema-1 store (``user_version`` 1)
SCHEMA1_SQL = SCHEMA1_RECORDS_TABLE + SCHEMA1_GRID_TABLE + """
PRAGMA application_id = 1447195508;
PRAGMA user_version = 1;
PRAGMA journal_mode = WAL;
"""


def write_schema1_store(path, rows, grid_cells=()):
    """A schema-1 store at ``path``: ``rows`` are dicts with schema 1's fields (``id``, ``protocol``,
    ``dataset``, ``method``, ``seed``, ``split_hash``, ``settings`` and ``metrics`` as dicts,
    ``version``, ``created``, ``tag``) as vistabench 0.x inserted them; ``grid_cells``: rows of its
    grid bookkeeping table."""
    import json
    import sqlite3

    c = sqlite3.connect(path)
    c.executescript(SCHEMA1_SQL)
    with c:
        for r in rows:
            c.execute("INSERT INTO records (id, protocol, dataset, method, seed, split_hash, settings, metrics, version,"
                      " created, tag) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      (r["id"], r["protocol"], r["dataset"], r["method"], r["seed"], r["split_hash"],
                       json.dumps(r["settings"], sort_keys=True), json.dumps(r["metrics"], sort_keys=True),
                       r["version"], r["created"], r["tag"]))
        for g in grid_cells:
            c.execute("INSERT INTO grid_cells VALUES (?, ?, ?, ?, ?, ?, ?, ?)", g)
    c.close()


@pytest.fixture
def schema1_records_table():
    """The SQL of a schema-1 store's records table alone, unmarked (a store of the versions before marks)."""
    return SCHEMA1_RECORDS_TABLE


@pytest.fixture
def schema1_store():
    """``write(path, rows, grid_cells=())``: write a store of schema 1 (see :func:`write_schema1_store`)."""
    return write_schema1_store
