"""Workflows a user chains, each step through the command line as typed (vistabench.cli.main), on
one store in a temporary folder: what one step writes, the next one reads.

- long-tail: profile -> sweep -> score a predictions file -> table (markdown, latex, survey) -> report
- detection: eval -> eval again with ``--ap old`` -> table and report show both runs' measured APs
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from vistabench.cli import main
from vistabench.data import save_predictions


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def longtail_files(tmp_path, capsys):
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), 60)
    logits = rng.normal(size=(600, 10))
    logits[np.arange(600), labels] += 2.0
    save_predictions(tmp_path / "pred.npz", labels=labels, logits=logits)
    rc, out, _ = run(capsys, "longtail", "profile", "--classes", 10, "--n-max", 5000, "--imbalance", 100, "--json")
    assert rc == 0
    (tmp_path / "counts.json").write_text(out)
    rc, _, err = run(capsys, "longtail", "sweep", "--labels", tmp_path / "pred.npz", "--train-counts",
                     tmp_path / "counts.json", "--test-imbalance", 100, "--out", tmp_path / "sweep.json")
    assert rc == 0, err
    return tmp_path


def test_score_then_table_then_report(longtail_files, capsys):
    d = longtail_files
    store = d / "store.sqlite"
    rc, out, err = run(capsys, "longtail", "score", "--predictions", d / "pred.npz", "--sweep", d / "sweep.json",
                       "--method", "mymodel", "--json", "--store", store)
    assert rc == 0, err
    scored = json.loads(out)

    rc, out, err = run(capsys, "longtail", "table", "--format", "markdown", "--store", store)
    assert rc == 0, err
    # the row names the training imbalance of the sweep's counts (5000 / 50) and shows the scored AUC
    (row,) = [line for line in out.splitlines() if line.startswith("| mymodel")]
    assert "(custom, ρ=100)" in row and f"{100 * scored['auc']:.2f}" in row

    rc, out, err = run(capsys, "longtail", "table", "--format", "latex", "--store", store)
    assert rc == 0 and "mymodel (custom, ρ=100)" in out, err
    rc, out, err = run(capsys, "longtail", "table", "--layout", "survey", "--store", store)
    assert rc == 0, err
    # ρ_tst of the sweep (100) equals ρ_trn: the scores land in the "=" half of the survey layout
    cells = [c.strip() for c in next(line for line in out.splitlines() if "mymodel" in line).strip("|").split("|")]
    assert cells[1].strip("*") == f"{100 * scored['auc']:.2f}" and cells[8] == "–"

    rc, out, err = run(capsys, "table", "--protocol", "longtail", "--store", store)
    assert rc == 0 and "mymodel" in out, err
    rc, out, err = run(capsys, "report", "--out", d / "report", "--store", store)
    assert rc == 0, err
    page = (d / "report" / "index.html").read_text(encoding="utf-8")
    assert "mymodel (custom, ρ=100)" in page and "data:image/png;base64," in page


def test_a_record_scored_before_imbalance_was_stored_still_tabulates(longtail_files, capsys):
    """Stores written before ``score`` kept ρ_trn: the table derives it from the record's training counts."""
    import sqlite3

    d = longtail_files
    store = d / "store.sqlite"
    assert run(capsys, "longtail", "score", "--predictions", d / "pred.npz", "--sweep", d / "sweep.json",
               "--store", store)[0] == 0
    con = sqlite3.connect(store)
    (settings,) = con.execute("SELECT settings FROM records").fetchone()
    old = json.loads(settings)
    assert old.pop("imbalance") == 100.0
    con.execute("UPDATE records SET settings = ?", (json.dumps(old),))
    con.commit()
    con.close()
    rc, out, err = run(capsys, "longtail", "table", "--store", store)
    assert rc == 0 and "| pred (custom, ρ=100) |" in out, err
