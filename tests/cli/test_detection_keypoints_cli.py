"""`vistabench detection eval --iou-type keypoints`: pycocotools' keypoint stats (--json and the
table), --kpt-oks-sigmas, and one-line errors (exit 2)."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import numpy as np
import pytest

from vistabench.cli import main

_here = pathlib.Path(__file__).parent
_spec = importlib.util.spec_from_file_location("_keypoint_reference", _here.parent / "metrics" / "_keypoint_reference.py")
KR = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(KR)


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def kp_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("kp")
    gt, res = KR.keypoint_set(seed=2, num_keypoints=5, num_images=14)
    (d / "gt.json").write_text(json.dumps(gt))
    (d / "res.json").write_text(json.dumps(res))
    return d, gt, res


SIG = "0.03,0.05,0.07,0.09,0.11"


def test_eval_keypoints_json_equals_pycocotools(capsys, kp_files, tmp_path):
    d, gt, res = kp_files
    rc, out, err = run(capsys, "detection", "eval", "--gt", str(d / "gt.json"), "--results", str(d / "res.json"),
                       "--iou-type", "keypoints", "--kpt-oks-sigmas", SIG, "--ap", "old", "--json")
    assert rc == 0, err
    got = json.loads(out)
    assert list(got["old"]) == ["AP", "AP50", "AP75", "APm", "APl", "AR@20", "AR50@20", "AR75@20", "ARm@20", "ARl@20"]
    ref = KR.pycocotools_keypoints(gt, res, tmp_path, sigmas=[float(x) for x in SIG.split(",")])
    vals = np.array([np.nan if v is None else v for v in got["old"].values()], float)
    assert np.allclose(vals, np.where(ref.stats == -1, np.nan, ref.stats), atol=1e-9, rtol=0, equal_nan=True)
    assert got["settings"]["iou_type"] == "keypoints" and got["settings"]["kpt_oks_sigmas"] == [0.03, 0.05, 0.07, 0.09, 0.11]
    rc, out, err = run(capsys, "detection", "eval", "--gt", str(d / "gt.json"), "--results", str(d / "res.json"),
                       "--iou-type", "keypoints", "--kpt-oks-sigmas", SIG)
    assert rc == 0, err
    assert "AP^Old" in out and "AR50@20" in out and "AP^Pool" in out


@pytest.mark.parametrize("extra, msg", [
    (["--iou-type", "keypoints"], "--kpt-oks-sigmas: 17 sigmas, but the keypoints have 5 points"),
    (["--iou-type", "keypoints", "--kpt-oks-sigmas", "0.1,x"], "--kpt-oks-sigmas: expected a number, got 'x'"),
    (["--iou-type", "keypoints", "--kpt-oks-sigmas", "0.1,0.1"], "--kpt-oks-sigmas: 2 sigmas, but the keypoints have 5"),
    (["--kpt-oks-sigmas", SIG], "--kpt-oks-sigmas: only used with --iou-type keypoints"),
])
def test_keypoint_mistakes_are_one_line(capsys, kp_files, extra, msg):
    d, _, _ = kp_files
    rc, out, err = run(capsys, "detection", "eval", "--gt", str(d / "gt.json"), "--results", str(d / "res.json"),
                       *extra)
    assert rc == 2
    assert msg in err and len(err.strip().splitlines()) == 1, err


def test_results_without_keypoints_are_one_line(capsys, kp_files, tmp_path):
    d, _, res = kp_files
    bad = [dict(r) for r in res]
    del bad[3]["keypoints"]
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(bad))
    rc, out, err = run(capsys, "detection", "eval", "--gt", str(d / "gt.json"), "--results", str(p),
                       "--iou-type", "keypoints", "--kpt-oks-sigmas", SIG)
    assert rc == 2 and "detection 3 has no keypoints list" in err and len(err.strip().splitlines()) == 1, err
