"""detectron2's own ``tests/data/test_coco_evaluation.py`` (pinned in ``refs/detectron2.json``), run
unchanged against the drop-ins: ``detectron2.evaluation.fast_eval_api.COCOeval_opt`` is
``vistabench.compat.coco.COCOeval`` and ``detectron2.evaluation.COCOEvaluator`` is
``vistabench.compat.detectron2.COCOEvaluator``; ``pycocotools.cocoeval.COCOeval`` stays the real one
(the reference the file compares against).

detectron2 itself does not install here; its other imports get stand-ins: ``detectron2.structures``
``Boxes`` / ``Instances`` (attribute holders, as the evaluator reads them) and ``detectron2.data``
catalogs with ``coco_2017_val_100`` registered the way detectron2 registers a COCO json (its dicts
carry ``image_id``; its metadata ``json_file`` and ``thing_dataset_id_to_contiguous_id`` over COCO's 80
category ids 1..90). The COCO val images are not needed: ``test_unknown_category`` checks that class
index 80 of an 80-class dataset is an ``AssertionError``.

``test_fast_eval`` loads one results list twice per experiment (``coco_api.loadRes(dt)``, no copy):
for ``omit_dt_bbox`` pycocotools' first load stores numpy boxes in it, and with numpy >= 1.25 its
second load raises ValueError at ``anns[0]['bbox'] == []``; the file (no check of a one-sided
exception at this commit) then reads an evaluator without ``precision``. That breaks pycocotools
against itself; so with such a numpy the file is run (a) with pycocotools' ``COCO``, where ours must
fail exactly as pycocotools' own ``COCOeval`` does, and (b) with ``pycocotools.coco`` replaced by
``vistabench.compat.coco`` (whose ``loadRes`` reads the numpy box, as pycocotools does with numpy <
1.25), where it passes. With numpy < 1.25 (a) passes as it is.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import sys
import types
import unittest
import warnings

import numpy as np
import pytest

FILE = "tests/data/test_coco_evaluation.py"
NEWER_NUMPY = np.lib.NumpyVersion(np.__version__) >= "1.25.0"
#: COCO's 80 category ids (1..90 without the 10 unused ones), as in instances_val2017.json
COCO_IDS = [i for i in range(1, 91) if i not in {12, 26, 29, 30, 45, 66, 68, 69, 71, 83}]


class _Catalog(dict):
    """detectron2's ``DatasetCatalog`` / ``MetadataCatalog``: ``get(name)`` of a registered name."""

    def __init__(self, entries: dict, call: bool) -> None:
        super().__init__(entries)
        self._call = call

    def get(self, name):
        value = self[name]
        return value() if self._call else value


class Boxes:
    def __init__(self, tensor) -> None:
        self.tensor = tensor


class Instances:
    def __init__(self, image_size) -> None:
        self.image_size = image_size


def _module(name: str, **attrs) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__spec__ = importlib.machinery.ModuleSpec(name, None)
    m.__dict__.update(attrs)
    return m


def _standins(tmp_path, opt) -> dict[str, types.ModuleType]:
    from vistabench.compat.detectron2 import COCOEvaluator

    images = [{"id": 139, "height": 426, "width": 640}, {"id": 285, "height": 640, "width": 586}]
    gt = {"images": images, "categories": [{"id": c, "name": f"c{c}"} for c in COCO_IDS],
          "annotations": [{"id": 1, "image_id": 139, "category_id": 1, "bbox": [10.0, 10.0, 40.0, 60.0],
                           "area": 2400.0, "iscrowd": 0}]}
    path = tmp_path / "instances_val2017_100.json"
    path.write_text(json.dumps(gt))
    meta = types.SimpleNamespace(json_file=str(path), thing_dataset_id_to_contiguous_id={c: k for k, c in
                                                                                         enumerate(COCO_IDS)})
    dicts = [{"file_name": f"{im['id']:012d}.jpg", "image_id": im["id"], "height": im["height"],
              "width": im["width"]} for im in images]
    data = _module("detectron2.data", DatasetCatalog=_Catalog({"coco_2017_val_100": lambda: dicts}, call=True),
                   MetadataCatalog=_Catalog({"coco_2017_val_100": meta}, call=False))
    evaluation = _module("detectron2.evaluation", COCOEvaluator=COCOEvaluator)
    return {"detectron2": _module("detectron2", data=data, evaluation=evaluation), "detectron2.data": data,
            "detectron2.evaluation": evaluation,
            "detectron2.evaluation.fast_eval_api": _module("detectron2.evaluation.fast_eval_api", COCOeval_opt=opt),
            "detectron2.structures": _module("detectron2.structures", Boxes=Boxes, Instances=Instances)}


def _run(load_reference, monkeypatch, tmp_path, test: str, *, opt, drop_in_coco: bool = False) -> unittest.TestResult:
    """detectron2's test ``TestCOCOeval.<test>`` from the cached file, unchanged, with ``COCOeval_opt``
    = ``opt`` (and ``pycocotools.coco`` = ``vistabench.compat.coco`` when ``drop_in_coco``)."""
    pytest.importorskip("torch")  # the file imports it
    root = load_reference.root("detectron2")
    file = root / FILE
    if not file.is_file():
        pytest.skip(f"reference detectron2:{FILE} not in the fidelity cache {root.parent} "
                    f"(run: python scripts/fetch_fidelity_refs.py --only detectron2)")
    for name, mod in _standins(tmp_path, opt).items():
        monkeypatch.setitem(sys.modules, name, mod)
    if drop_in_coco:
        import vistabench.compat.coco as ours

        monkeypatch.setitem(sys.modules, "pycocotools.coco", ours)
    spec = importlib.util.spec_from_file_location("_detectron2_test_coco_evaluation", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = unittest.TestResult()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reference's own (numpy's elementwise comparison) and ours
        unittest.defaultTestLoader.loadTestsFromName(f"TestCOCOeval.{test}", module).run(result)
    assert result.testsRun == 1
    return result


def _failures(result: unittest.TestResult) -> list[str]:
    """The last line of each failure's or error's traceback (``KeyError: 'precision'``)."""
    return [tb.strip().splitlines()[-1] for _, tb in result.errors + result.failures]


def _ours():
    from vistabench.compat.coco import COCOeval

    return COCOeval


def test_unknown_category_passes_unchanged(load_reference, monkeypatch, tmp_path):
    result = _run(load_reference, monkeypatch, tmp_path, "test_unknown_category", opt=_ours())
    assert result.wasSuccessful(), _failures(result)


def test_fast_eval_unchanged_against_pycocotools(load_reference, monkeypatch, tmp_path):
    """numpy < 1.25: passes. A newer numpy breaks the file's reference side (module docstring): ours
    fails exactly as pycocotools' own ``COCOeval`` in ``COCOeval_opt``'s place (same error, same
    line); what precedes the break is checked by the drop-in ``COCO`` run below."""
    pe = pytest.importorskip("pycocotools.cocoeval")
    ours = _run(load_reference, monkeypatch, tmp_path, "test_fast_eval", opt=_ours())
    if not NEWER_NUMPY:
        assert ours.wasSuccessful(), _failures(ours)
        return
    ref = _run(load_reference, monkeypatch, tmp_path, "test_fast_eval", opt=pe.COCOeval)
    assert _failures(ref) == ["KeyError: 'precision'"], _failures(ref)
    assert _failures(ours) == _failures(ref)
    assert all("coco_eval_opt.eval[k]" in tb for _, tb in ours.errors + ref.errors)  # the stale evaluator


def test_fast_eval_passes_unchanged_with_the_drop_in_coco(load_reference, monkeypatch, tmp_path):
    """``pycocotools.coco`` replaced by ``vistabench.compat.coco``: pycocotools' ``COCOeval`` against
    ours on the drop-in's ``COCO`` and ``loadRes``; passes with any numpy."""
    pytest.importorskip("pycocotools.cocoeval")
    result = _run(load_reference, monkeypatch, tmp_path, "test_fast_eval", opt=_ours(), drop_in_coco=True)
    assert result.wasSuccessful(), _failures(result)
