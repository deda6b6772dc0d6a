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
    # our calibration is a per-category monotone map with ties kept in order: AP^Fixed does not move
    assert by_method["calibrated-platt"].metrics["fixed_AP"] == by_method["baseline"].metrics["fixed_AP"]
    # the authors' MAINTAIN_RANK groups equal calibrated scores across categories (e.g. Platt's 0.0 of a
    # steep class with the zero-scored classes) and spreads them by 1e-16 steps: a category's order can
    # change there, so AP^Fixed moves a little (docs/fidelity.md)
    devil = by_method["calibrated-platt-devil"].metrics["fixed_AP"]
    assert abs(devil - by_method["baseline"].metrics["fixed_AP"]) < 0.02
    assert by_method["baseline (segm)"].settings["iou_type"] == "segm"
