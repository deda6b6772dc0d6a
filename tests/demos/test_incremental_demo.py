"""The incremental demo shows its point: the frozen prototype learner keeps the base classes."""

import pytest

import vistabench.protocols.incremental.runner as P
from vistabench.demos.incremental import demo
from vistabench.store import ResultsStore


def test_demo_quick(tmp_path) -> None:
    with ResultsStore(tmp_path / "r.sqlite") as store:
        text = demo(store, tmp_path / "inc", quick=True)
        recs = {r.method: r for r in store.records(protocol="incremental")}
    assert set(recs) == {"prototype", "finetune"}
    assert "Lazy (ref.)" in text and "Greedy-NF (ref.)" in text
    # the point of the demo: the frozen prototype learner keeps the base classes, fine-tuning forgets
    assert recs["finetune"].metrics["pd"] > recs["prototype"].metrics["pd"]
    assert recs["prototype"].metrics["gacc"] > recs["finetune"].metrics["gacc"]
    sessions = P.load_sessions(tmp_path / "inc" / "sessions.json")
    files = sorted((tmp_path / "inc" / "prototype").glob("session_*.npz"))
    assert len(files) == 6
    assert P.score_prediction_files(files, sessions).gacc == pytest.approx(recs["prototype"].metrics["gacc"])
