"""The layout of ``vistabench.metrics.detection``: one module per phase, every public name
re-exported by the package, match outcomes as :class:`MatchCode`, no private name across modules."""

import ast
import importlib
from pathlib import Path

import numpy as np

import vistabench.metrics.detection as det
from vistabench.data.coco import read_ground_truth, read_results
from vistabench.data.detection_synth import synth_detection_set
from vistabench.metrics.detection import MatchCode, accumulate, match_set

PKG = Path(det.__file__).parent
PHASES = ("data", "params", "sort", "masks", "oks", "select", "match", "accumulate", "summarize", "evaluate", "labels",
          "errors", "error_fixes", "per_class", "operating", "box_format")


def test_every_phase_is_a_small_module_whose_public_names_the_package_exports():
    assert sorted(p.stem for p in PKG.glob("*.py") if p.stem != "__init__") == sorted(PHASES)
    for name in PHASES:
        path = PKG / f"{name}.py"
        assert len(path.read_text().splitlines()) < 500, path
        mod = importlib.import_module(f"vistabench.metrics.detection.{name}")
        tree = ast.parse(path.read_text())
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        public = {n for n in defined if not n.startswith("_")}
        assert public <= set(det.__all__), (name, public - set(det.__all__))
        for n in public:
            assert getattr(det, n) is getattr(mod, n)


def test_no_private_name_crosses_a_module_and_no_twins():
    for path in PKG.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                assert not [a.name for a in node.names if a.name.startswith("_")], (path.name, node.module)
    # public/private twins (rank_within/_rank_within) are gone: no private function shares a public name
    names = set(det.__all__)
    for path in PKG.glob("*.py"):
        tree = ast.parse(path.read_text())
        for n in tree.body:
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name.startswith("_"):
                assert n.name.lstrip("_") not in names, (path.name, n.name)


def test_match_codes_are_the_enum_and_mean_what_it_says():
    s = synth_detection_set(num_images=30, num_categories=8, dets_per_image=20, seed=3)
    gt = read_ground_truth(s.ground_truth)
    dets = read_results(s.results, gt)
    ms = match_set(gt, dets)
    codes = set(np.unique(ms.match.code).tolist())
    assert codes <= {int(c) for c in (MatchCode.UNMATCHED, MatchCode.TRUE_POSITIVE, MatchCode.MATCHED_IGNORED)}
    assert MatchCode.TRUE_POSITIVE in codes
    # the TRUE_POSITIVE codes at IoU 0.5, area "all", are the hits accumulate counts: its recall agrees
    tp = ms.match.codes(0, 0) == MatchCode.TRUE_POSITIVE
    hits = np.bincount(dets.category[ms.det[tp]], minlength=gt.num_categories)
    num_gt = np.bincount(gt.category[~ms.match.gt_ignore[0]], minlength=gt.num_categories)
    acc = accumulate(ms, dets, np.ones(len(ms.det), bool))
    ok = num_gt > 0
    assert ok.sum() >= 4 and hits.sum() > 0
    np.testing.assert_allclose(acc.recall[0, ok, 0], hits[ok] / num_gt[ok], rtol=0, atol=1e-12)
    assert np.all(np.isnan(acc.recall[0, ~ok, 0]))
