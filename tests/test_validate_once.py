"""Validation runs once, at the boundary (issue 38): a traced run of `detection eval` (with
--per-class / --errors too), of `detection run`, of `incremental run` and of `stream pretrain`
counts the calls of every check and finds each ran exactly once.

What is counted (``sys.setprofile``, every call in the process):

* each field or argument checked by the shared vocabulary, keyed by its name: ``options._check_range``
  (what a config field's declaration and :func:`~vistabench.options.check_value` both end in), and the
  array checks of ``_validation`` (``check_array``) for the arrays a run checks once;
* the named rules: ``check_sessions`` (a sessions dict), the sessions' "has a test pool" check
  (``require_test_pool``; each call of the public ``session_test_pool`` checks it too), ``check_sigmas``,
  ``check_pretrain_args`` (PT-MT's output file and data folder).
"""

from __future__ import annotations

import sys
from collections import Counter

import pytest

from vistabench.cli import main

#: function name -> the local that names what it checks (None: the function is the check)
_KEYED = {"_check_range": "name", "check_array": "name"}
_RULES = {"check_sessions", "session_test_pool", "require_test_pool", "check_sigmas", "check_pretrain_args"}


def _traced(argv: list[str]) -> tuple[int, Counter]:
    """Run the command line ``argv`` in this process, counting the checks it calls."""
    counts: Counter = Counter()

    def profile(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if not code.co_filename.replace("\\", "/").rsplit("/src/", 1)[-1].startswith("vistabench/"):
            return
        if code.co_name in _KEYED:
            counts[f"{code.co_name}:{frame.f_locals.get(_KEYED[code.co_name])}"] += 1
        elif code.co_name in _RULES:
            counts[code.co_name] += 1

    sys.setprofile(profile)
    try:
        rc = main(argv)
    finally:
        sys.setprofile(None)
    return rc, counts


def _repeated(counts: Counter) -> dict[str, int]:
    return {k: n for k, n in sorted(counts.items()) if n > 1}


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth")
    assert main(["detection", "synth", "--out", str(d), "--images", "12", "--categories", "6",
                 "--dets-per-image", "10", "--seed", "3"]) == 0
    return d


@pytest.mark.parametrize("extra", [(), ("--max-dets-per-image", "50", "--dets-per-class", "100", "--ap", "old,fixed")])
def test_detection_eval_checks_each_option_once(capsys, synth, extra) -> None:
    rc, counts = _traced(["detection", "eval", "--gt", str(synth / "gt.json"), "--results",
                          str(synth / "results.json"), "--no-store", "--json", *extra])
    _, err = capsys.readouterr()
    assert rc == 0, err
    for name in ("iou_type", "max_dets_per_image", "dets_per_class", "variants", "kpt_oks_sigmas"):
        assert counts[f"_check_range:{name}"] == 1, (name, dict(counts))
    assert _repeated(counts) == {}


@pytest.mark.parametrize("extra", [("--per-class", "--errors"),
                                   ("--per-class", "--errors", "--ap", "fixed,pool", "--dets-per-class", "50",
                                    "--max-dets-per-image", "40")])
def test_detection_eval_diagnostics_reuse_the_checked_options(capsys, synth, extra) -> None:
    """--per-class and --errors take the options built once (were: each limit re-checked by
    per_class_results and decompose_errors, variants 4 times)."""
    rc, counts = _traced(["detection", "eval", "--gt", str(synth / "gt.json"), "--results",
                          str(synth / "results.json"), "--no-store", "--json", *extra])
    _, err = capsys.readouterr()
    assert rc == 0, err
    for name in ("iou_type", "max_dets_per_image", "dets_per_class", "variants"):
        assert counts[f"_check_range:{name}"] == 1, (name, dict(counts))
    assert _repeated(counts) == {}


@pytest.mark.parametrize("extra", [(), ("--max-dets-per-image", "20", "--dets-per-class", "30")])
def test_detection_run_checks_each_option_once(capsys, synth, extra) -> None:
    """`detection run`: the config's fields are checked when it is made, and the evaluation takes them
    as its options without a second check (was: iou_type and both limits twice)."""
    rc, counts = _traced(["detection", "run", "--gt", str(synth / "gt.json"), "--results",
                          str(synth / "results.json"), "--no-store", "--json", *extra])
    _, err = capsys.readouterr()
    assert rc == 0, err
    for name in ("iou_type", "max_dets_per_image", "dets_per_class"):
        assert counts[f"_check_range:{name}"] == 1, (name, dict(counts))
    assert _repeated(counts) == {}


def test_detection_eval_keypoints_checks_sigmas_once(capsys, tmp_path) -> None:
    import json

    gt = {"images": [{"id": 1, "width": 100, "height": 100}], "categories": [{"id": 1, "name": "person"}],
          "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [10, 10, 40, 40], "area": 1600,
                           "iscrowd": 0, "num_keypoints": 2, "keypoints": [20, 20, 2, 30, 30, 2]}]}
    dt = [{"image_id": 1, "category_id": 1, "score": 0.9, "keypoints": [21, 20, 1, 30, 31, 1]}]
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "dt.json").write_text(json.dumps(dt))
    rc, counts = _traced(["detection", "eval", "--gt", str(tmp_path / "gt.json"), "--results",
                          str(tmp_path / "dt.json"), "--iou-type", "keypoints", "--kpt-oks-sigmas", "0.05,0.06",
                          "--ap", "old", "--no-store", "--json"])
    _, err = capsys.readouterr()
    assert rc == 0, err
    assert counts["check_sigmas"] == 1 and counts["_check_range:kpt_oks_sigmas"] == 1, dict(counts)
    assert _repeated(counts) == {}


def test_incremental_run_checks_sessions_once(capsys, tmp_path) -> None:
    rc, counts = _traced(["incremental", "run", "--data", "digits", "--base-classes", "8", "--way", "1",
                          "--shot", "3", "--base-shot", "30", "--method", "prototype", "--epochs", "1",
                          "--out", str(tmp_path / "run"), "--no-store", "--json"])
    _, err = capsys.readouterr()
    assert rc == 0, err
    assert counts["check_sessions"] == 1, dict(counts)
    # the test pool is there: checked once for the run, not once per session and again when scoring
    assert counts["require_test_pool"] + counts["session_test_pool"] == 1, dict(counts)
    # each array of the sessions dict is checked once (the recipe's own fields: issue 38's recipe part)
    assert {k: n for k, n in _repeated(counts).items() if "sessions" in k} == {}
    # the scores' accuracy matrix and session sizes: once, not once more per point of the gAcc curve
    assert counts["check_array:matrix"] == 1 and counts["check_array:session_sizes"] == 1, dict(counts)


#: recipe fields no session sets itself: checked when the config is made, and never again (were: 4 times,
#: by the config, to_recipe(), TrainConfig.from_recipe and the default Recipe of every TrainConfig)
_RECIPE_KEPT = ("momentum", "nesterov", "weight_decay", "precision", "device", "devices", "compile", "loader",
                "workers", "schedule", "lr_milestones", "lr_factors", "model", "pretrained", "warmup_epochs")


@pytest.mark.parametrize("method,extra", [("prototype", ()), ("finetune", ("--lr", "0.05", "--batch-size", "16"))])
def test_incremental_run_checks_the_recipe_once(capsys, tmp_path, method, extra) -> None:
    rc, counts = _traced(["incremental", "run", "--data", "digits", "--base-classes", "8", "--way", "1",
                          "--shot", "3", "--base-shot", "30", "--method", method, "--epochs", "1", *extra,
                          "--out", str(tmp_path / "run"), "--no-store", "--json"])
    _, err = capsys.readouterr()
    assert rc == 0, err
    for name in _RECIPE_KEPT:
        assert counts[f"_check_range:{name}"] == 1, (name, dict(counts))
    assert counts["_check_range:width"] == 1, dict(counts)  # the backbone's options: resolved once
    if method == "prototype":  # one training (the base session): the stage's epochs / lr / batch once more
        assert {k: n for k, n in _repeated(counts).items() if k.startswith("_check_range:")
                and "augmentation" not in k and k not in ("_check_range:seed", "_check_range:kind")} == {}


def test_incremental_run_from_a_sessions_file_checks_it_once(capsys, tmp_path) -> None:
    args = ["incremental", "run", "--data", "digits", "--method", "prototype", "--epochs", "1", "--no-store",
            "--json"]
    assert main(["incremental", "split", "--data", "digits", "--base-classes", "8", "--way", "1", "--shot", "3",
                 "--base-shot", "30", "--out", str(tmp_path / "s.json")]) == 0
    capsys.readouterr()
    rc, counts = _traced([*args, "--sessions", str(tmp_path / "s.json")])
    _, err = capsys.readouterr()
    assert rc == 0, err
    assert counts["check_sessions"] == 1, dict(counts)
    assert counts["require_test_pool"] + counts["session_test_pool"] == 1, dict(counts)


def test_stream_pretrain_checks_its_arguments_once(capsys, tmp_path) -> None:
    """`stream pretrain`'s arguments are checked when its options are made; the pre-training trusts them
    (it used to check them again: ``check_pretrain_args`` ran twice)."""
    import json

    out = tmp_path / "pt.pt"
    rc, counts = _traced(["stream", "pretrain", "--stream", "embedded", "--out", str(out), "--steps", "2",
                          "--max-per-task", "40", "--width", "2", "--json"])
    printed, err = capsys.readouterr()
    assert rc == 0, err
    assert out.is_file() and json.loads(printed)["steps"] == 2  # a real pre-training ran
    assert counts["check_pretrain_args"] == 1, dict(counts)
    for name in ("out", "max_per_task"):  # PT-MT's own arguments: once, where the options are made (`steps`
        assert counts[f"_check_range:{name}"] == 1, (name, dict(counts))  # is also the trial's, in the config)
