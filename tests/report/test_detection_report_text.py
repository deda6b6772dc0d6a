"""The detection section's words: worst categories only with enough ground truth (threshold stated), no
frequency-group rows or columns where there are no groups (COCO), the calibration caption only when
something was calibrated, the gaming sentence without undefined numbers."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from vistabench.report import detection as D  # noqa: E402
from vistabench.report.detection_analysis import MIN_GT_WORST, error_table, worst_classes_table  # noqa: E402
from vistabench.store import Record  # noqa: E402


def _pc_row(name, ap, num_gt):
    return {"name": name, "AP": ap, "AP50": ap, "AP75": ap, "recall": ap, "num_gt": num_gt, "num_detections": 5}


def test_worst_categories_need_enough_ground_truth():
    rows = [_pc_row("one-box", 0.0, 1), _pc_row("three", 0.0, 3), _pc_row("ok-low", 0.1, MIN_GT_WORST),
            _pc_row("ok-high", 0.5, 50), _pc_row("none", None, 0)]
    t = worst_classes_table({"variant": "old", "rows": rows})
    assert [r["category"] for r in t.rows] == ["ok-low", "ok-high"]
    assert f"at least {MIN_GT_WORST} ground-truth objects" in t.caption
    assert worst_classes_table({"variant": "old", "rows": rows}, min_gt=1).rows[0]["category"] == "one-box"


def _errs(ap):
    return {"AP": ap, **{k: 1.0 for k in ("Cls", "Loc", "Both", "Dupe", "Bkg", "Miss", "FalsePos", "FalseNeg")}}


def test_error_table_has_no_rows_for_groups_without_ground_truth():
    errors = {"tide": _errs(40.0), "fixed": {**_errs(41.0), "groups": {"r": _errs(None), "c": _errs(30.0),
                                                                        "f": _errs(float("nan"))}}}
    t = error_table(errors)
    assert [r["variant"] for r in t.rows] == ["TIDE (AP50)", "AP^Fixed", "AP^Fixed c"]
    assert t.columns[0].title == "AP (%)"


def _rec(method, *, rare=True, **settings):
    m = {"old_AP": 0.3, "fixed_AP": 0.31, "pool_AP": 0.29, "old_APr": 0.1 if rare else None,
         "fixed_APr": 0.1 if rare else None, "pool_APr": None, "pool_APc": None, "pool_APf": None,
         "pool_pr50": [0.5] * 101, "fixed_pr50": [0.5] * 101}
    return Record("detection", "COCO 2017 Dataset", method, 1, None,
                  {"results": f"{method}.json", "gt": "gt.json", "iou_type": "bbox", **settings}, m)


def test_coco_columns_and_the_calibration_caption():
    html = "".join(D.detection_section([_rec("mine", rare=False)]).parts)
    head = html.split("<thead>")[1].split("</thead>")[0]
    assert "AP^Old_r" not in head and "AP^Pool_f" not in head and "AP^Old" in head
    assert "need LVIS frequency groups" in html  # the words saying why they are not shown
    table = D.detection_table([_rec("mine", rare=False)])  # the command line's table too
    assert [c.key for c in table.columns] == ["n", "scores", "old_AP", "fixed_AP", "pool_AP"]
    assert "Not shown, without a value in any row: AP^Old_r, AP^Fixed_r" in table.caption
    assert "AP^Old_r" not in table.render("markdown").split("\n", 2)[2]  # not a column of the markdown
    assert "Calibration moves the pooled curve" not in html
    html = "".join(D.detection_section([_rec("mine"), _rec("cal", calibration="platt")]).parts)
    assert "Calibration moves the pooled curve" in html and "AP^Old_r" in html.split("<thead>")[1].split("</thead>")[0]


def test_gaming_sentence_leaves_out_undefined_numbers():
    base, gamed = _rec("baseline", rare=False), _rec("rerank-top5/class", rare=False)
    sets = D.scored_sets([base, gamed])
    text = D._gaming_text(sets)
    assert "–" not in text and "AP^Old_r" not in text and "AP^Old from 30.00% to 30.00%" in text
    assert "AP^Fixed with the re-ranking is 31.00%" in text


def test_gaming_sentence_pairs_a_reranked_file_with_its_source_by_provenance():
    def rec(method, ap, sha, **settings):
        r = _rec(method, rare=False, predictions_sha256=sha, **settings)
        r.metrics.update(old_AP=ap, fixed_AP=ap + 0.01)
        return r

    mine = rec("mine", 0.30, "aaa")
    other = rec("mine", 0.20, "bbb", results="other.json")  # another file of the detector, not re-ranked
    gamed = rec("mine", 0.35, "ccc", results="rr.json", policy="top-10/class",
                derived_from={"path": "mine.json", "sha256": "aaa"})
    text = D._gaming_text(D.scored_sets([mine, other, gamed]))
    assert "(mine, re-ranked (top-10/class)) changes AP^Old from 30.00% to 35.00%" in text
    # a re-ranked file whose source was not scored, and one that was calibrated too, say nothing
    orphan = rec("mine", 0.35, "ddd", results="rr2.json", policy="top-10/class",
                 derived_from={"path": "gone.json", "sha256": "zzz"})
    assert D._gaming_text(D.scored_sets([mine, orphan])) is None
    both = rec("mine", 0.35, "eee", results="rrc.json", policy="top-10/class", calibration="platt",
               derived_from={"path": "mine.json", "sha256": "aaa"})
    assert D._gaming_text(D.scored_sets([mine, both])) is None
