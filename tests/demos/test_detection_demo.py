"""The detection demo: the three APs, the gaming row and calibration are recorded."""

from vistabench.demos.detection import demo
from vistabench.store import ResultsStore


def test_demo_quick(tmp_path):
    with ResultsStore(tmp_path / "r.sqlite") as store:
        text = demo(store, tmp_path, quick=True)
        recs = store.records(protocol="detection")
    by_method = {r.method: r for r in recs}
    assert "AP^Pool" in text and len(recs) == 5
    assert {"baseline", "calibrated-platt", "calibrated-platt-devil", "baseline (segm)"} <= set(by_method)
    assert {"old_AP", "fixed_AP", "pool_AP", "pool_pr50"} <= set(recs[0].metrics)
    # calibration is a per-category monotone map: AP^Fixed does not move, with either recipe
    for m in ("calibrated-platt", "calibrated-platt-devil"):
        assert by_method[m].metrics["fixed_AP"] == by_method["baseline"].metrics["fixed_AP"]
    assert by_method["baseline (segm)"].settings["iou_type"] == "segm"
