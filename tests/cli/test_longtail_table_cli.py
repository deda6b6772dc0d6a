"""`vistabench longtail table --layout survey`: the survey's columns from stored records."""

import json

import numpy as np

from vistabench.cli import main
from vistabench.data import Predictions
from vistabench.protocols.longtail.runner import score, to_record
from vistabench.protocols.longtail.sweep import build_sweep
from vistabench.store import ResultsStore


def test_survey_layout_json_and_markdown(tmp_path, capsys):
    labels = np.repeat(np.arange(4), 30)
    sweep = build_sweep(labels, [300, 100, 30, 3], test_imbalance=100, points=4, repeats=2)
    pred = Predictions(labels=labels, kind="pred", values=np.where(labels < 2, labels, 0))
    with ResultsStore(tmp_path / "s.sqlite") as store:
        store.add(to_record(score(pred, sweep), dataset="toy", method="ce", seed=0, split_hash=None,
                            settings={"imbalance": 100.0, "test_imbalance": 100.0}))
    rc = main(["longtail", "table", "--layout", "survey", "--store", str(tmp_path / "s.sqlite"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["columns"][:3] == ["n", "eq_auc", "eq_avg"] and len(out["columns"]) == 15
    (row,) = out["rows"]
    assert row["eq_balanced"] == 0.5 and row["ne_auc"] is None  # classes 0, 1 right, 2, 3 wrong
    assert row["n"] == 1 and row["eq_balanced_n"] == 1 and row["ne_auc_n"] == 0 and row["eq_balanced_sd"] is None
    rc = main(["longtail", "table", "--layout", "survey", "--store", str(tmp_path / "s.sqlite")])
    text = capsys.readouterr().out
    assert rc == 0 and "DR↓ (ρ_trn=ρ_tst)" in text and "| ce (toy, ρ=100) | 1 | " in text
    assert "sweep SD↓ (ρ_trn=ρ_tst)" in text and "STD (the survey's name" in text  # not a seed spread
