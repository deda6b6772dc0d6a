"""The detection demo: the three APs, the gaming row and calibration are recorded."""

from vistabench.demos.detection import demo
from vistabench.store import ResultsStore


def test_demo_quick(tmp_path):
    with ResultsStore(tmp_path / "r.sqlite") as store:
        text = demo(store, tmp_path, quick=True)
        recs = store.records(protocol="detection")
    assert "AP^Pool" in text and len(recs) == 3
    assert {"old_AP", "fixed_AP", "pool_AP", "pool_pr50"} <= set(recs[0].metrics)
