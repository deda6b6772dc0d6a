"""The protocol contract: every declared protocol has every part, the same verbs and options, and a
file scored through `score` gives a record of the same shape as one made by `run`."""

from __future__ import annotations

import json
import types

import numpy as np
import pytest

from vistabench.cli import main
from vistabench.errors import InputError
from vistabench.store import ResultsStore
from vistabench.suite import PARTS, get_protocol, protocols

PROTOCOLS = protocols()


def test_the_five_protocols_are_declared_in_report_order():
    assert [p.name for p in PROTOCOLS] == ["longtail", "detection", "incremental", "smalldata", "stream"]


@pytest.mark.parametrize("proto", PROTOCOLS, ids=lambda p: p.name)
def test_every_part_resolves(proto):
    for part in PARTS:
        obj = proto.part(part)
        if part == "cli":
            assert isinstance(obj, types.ModuleType) and callable(obj.register)
        else:
            assert callable(obj), f"{proto.name}.{part} -> {proto.references()[part]} is not callable"


@pytest.mark.parametrize("proto", PROTOCOLS, ids=lambda p: p.name)
def test_config_run_and_score_follow_one_signature(proto):
    """Every protocol: a frozen typed RunConfig (every field with help), ``run(config, *, store=None,
    work_dir=None) -> list[Record]`` and ``score(predictions, reference, ...)``."""
    import dataclasses
    import inspect
    import typing

    from vistabench.config import RunConfig
    from vistabench.store import Record

    config = proto.part("config")
    assert isinstance(config, type) and issubclass(config, RunConfig), proto.references()["config"]
    assert dataclasses.is_dataclass(config) and config.__dataclass_params__.frozen
    assert config.protocol == proto.name
    for info in config.fields_info():
        assert info.help.strip(), f"{proto.name} config field {info.name!r} has no help text"
        assert info.type is not typing.Any, f"{proto.name} config field {info.name!r} is untyped"

    run = proto.part("run")
    params = list(inspect.signature(run).parameters.values())
    assert [(p.name, p.kind) for p in params] == [
        ("config", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        ("store", inspect.Parameter.KEYWORD_ONLY), ("work_dir", inspect.Parameter.KEYWORD_ONLY)]
    assert params[1].default is None and params[2].default is None
    hints = typing.get_type_hints(run)
    assert hints["config"] is config
    assert typing.get_origin(hints["return"]) is list and typing.get_args(hints["return"]) == (Record,)

    score = list(inspect.signature(proto.part("score")).parameters.values())
    assert [p.name for p in score[:2]] == ["predictions", "reference"]
    assert all(p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD) for p in score[2:])


@pytest.mark.parametrize("proto", PROTOCOLS, ids=lambda p: p.name)
@pytest.mark.parametrize("verb", ["split", "score", "run", "table"])
def test_same_verbs_everywhere(proto, verb, capsys):
    with pytest.raises(SystemExit) as exc:
        main([proto.name, verb, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "--json" in out or verb == "split" and "--out" in out
    if verb in ("score", "run"):
        assert "--store" in out and "--no-store" in out and "--json" in out
    if verb == "table":
        assert "--store" in out and "--format" in out


def test_unknown_protocol_gets_a_suggestion():
    with pytest.raises(InputError, match="did you mean 'detection'"):
        get_protocol("detectoin")


def _shape(rec) -> tuple[set, set]:
    d = rec if isinstance(rec, dict) else rec.to_dict()
    return set(d), set(d["metrics"])


def test_longtail_score_and_run_records_have_the_same_shape(tmp_path, capsys):
    from vistabench.protocols.longtail.runner import run
    from vistabench.protocols.longtail.config import LongtailConfig

    (rec,) = run(LongtailConfig.from_dict({"data": "digits", "method": "ce", "imbalance": 10, "epochs": 1,
                                           "points": 3, "repeats": 2}), work_dir=tmp_path / "r")
    rec = rec.to_dict()
    store = tmp_path / "s.sqlite"
    assert main(["longtail", "score", "--predictions", str(tmp_path / "r" / "predictions.npz"),
                 "--sweep", str(tmp_path / "r" / "sweep.json"), "--store", str(store), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    with ResultsStore(store) as s:
        (scored,) = s.records(protocol="longtail")
    assert scored.id == out["record_id"] and scored.method == "predictions"
    assert _shape(scored) == _shape(rec)
    # the same predictions and sweep give the same numbers either way
    assert scored.metrics["auc"] == pytest.approx(rec["metrics"]["auc"])
    for key in ("auc", "avg", "std", "min", "max"):
        assert scored.metrics["exact"][key] == pytest.approx(rec["metrics"]["exact"][key])


def test_detection_score_and_run_records_have_the_same_shape(tmp_path):
    from vistabench.data.detection_synth import synth_detection_set
    from vistabench.data.splits import write_split
    from vistabench.protocols.detection.runner import build_image_split, run, score, to_record
    from vistabench.protocols.detection.config import DetectionConfig

    s = synth_detection_set(num_images=30, num_categories=12, dets_per_image=30, seed=3)
    split = build_image_split(s.ground_truth, calibration_fraction=0.5, seed=0)
    assert sorted(split["calibration"] + split["test"]) == sorted(im["id"] for im in s.ground_truth["images"])
    (tmp_path / "gt.json").write_text(json.dumps(s.ground_truth))
    (tmp_path / "dt.json").write_text(json.dumps(s.results))
    write_split(tmp_path / "split.json", split)
    files = {"gt": str(tmp_path / "gt.json"), "results": str(tmp_path / "dt.json")}
    config = DetectionConfig.from_dict({**files, "method": "m", "dataset": "d", "split": str(tmp_path / "split.json"),
                                        "calibrate": "platt"})
    with ResultsStore(tmp_path / "s.sqlite") as store:
        (ran,) = run(config, store=store)
        assert store.records(protocol="detection")[0].id == ran.id is not None
    scored = to_record(score(s.results, s.ground_truth, split=split), dataset="d", method="m",
                       split_hash=split["sha256"])
    assert _shape(scored) == _shape(ran)
    assert ran.settings["calibration"] == "platt" and ran.split_hash == split["sha256"]
    # calibration is a per-category monotone transform: AP^Fixed is unchanged on the same test images
    assert scored.metrics["fixed_AP"] == pytest.approx(ran.metrics["fixed_AP"], abs=1e-12)
    with pytest.raises(InputError, match="split: calibrate needs a split"):
        DetectionConfig.from_dict({**files, "calibrate": "platt"})


def test_incremental_score_and_run_records_have_the_same_shape(tmp_path):
    import vistabench.protocols.incremental.runner as P
    from vistabench.protocols.incremental.config import IncrementalConfig

    cfg = IncrementalConfig.from_dict({"data": "digits", "base_classes": 6, "way": 2, "shot": 3, "method": "prototype",
                                       "epochs": 1, "batch_size": 64})
    with ResultsStore(tmp_path / "s.sqlite") as store:
        (rec,) = P.run(cfg, store=store, work_dir=tmp_path / "r")
        (ran,) = store.records(protocol="incremental")
    assert rec.id == ran.id
    sessions = P.load_sessions(tmp_path / "r" / "sessions.json")
    paths = sorted((tmp_path / "r").glob("session_*.npz"))
    scored = P.to_record(P.score(paths, sessions), dataset="digits", method="prototype", seed=None,
                         sessions=sessions, settings={"source": "score"})
    assert _shape(scored) == _shape(ran)
    assert scored.metrics["gacc"] == pytest.approx(ran.metrics["gacc"])


def test_smalldata_score_and_run_records_have_the_same_shape(tmp_path):
    from vistabench.data import save_predictions
    from vistabench.protocols.smalldata.runner import SmalldataConfig, prepare_from_config, run, score, to_record

    config = SmalldataConfig.from_dict({"dataset": "digits", "per_class": 20, "split": [0], "model": "cnn28",
                                        "epochs": 1, "trials": 1, "repeats": 1, "scheduler": "none",
                                        "sampler": "random", "threads": 1, "method": "ce_untuned"})
    with ResultsStore(tmp_path / "s.sqlite") as store:
        (returned,) = run(config, store=store, work_dir=tmp_path)
        (ran,) = store.records(protocol="smalldata")
    assert returned.id == ran.id is not None
    ctx = prepare_from_config(config, tmp_path)
    _, ty, _ = ctx.test_set(ctx.splits[0])
    pred = np.where(np.arange(len(ty)) % 2 == 0, ty, (ty + 1) % 10)  # half right, by construction
    save_predictions(tmp_path / "p.npz", labels=ty, pred=pred)
    result = score(tmp_path / "p.npz", ctx, split=0)
    assert result["accuracy"] == pytest.approx(np.mean(pred == ty))
    scored = to_record(result, dataset="digits", method="p", seed=None, split_hash=result["settings"]["split_hash"],
                       settings={})
    assert _shape(scored) == _shape(ran) and scored.kind == ran.kind == "final" and scored.tag is None
    with pytest.raises(InputError, match="labels differ"):
        save_predictions(tmp_path / "q.npz", labels=ty[::-1], pred=pred)
        score(tmp_path / "q.npz", ctx, split=0)


def test_stream_score_and_run_records_have_the_same_shape(tmp_path):
    from vistabench.learners.stream import make_learner
    from vistabench.protocols.stream.runner import run_stream, score, stream_split, to_records
    from vistabench.streams import load_stream

    stream = load_stream("embedded")
    learner = make_learner("indep", trials=1, steps=2, seed=0, arch="cnn28", arch_options={"width": 4})
    with ResultsStore(tmp_path / "s.sqlite") as store:
        res = run_stream(stream, learner, store=store, run_id="r", work_dir=tmp_path / "w", max_tasks=2)
        ran = store.records(protocol="stream", kind="event", run_id="r")
    events = [{"task": e["task"], "error": e["error"], "flops": e["flops"]} for e in res.events]
    result = score(events, stream)
    assert result["summary"]["cflop"] == sum(e["flops"] for e in res.events)
    scored = to_records(result, stream=stream, method="indep", seed=0, run_id="s")
    assert [_shape(r) for r in scored] == [_shape(r) for r in ran]
    split = stream_split(stream)
    assert [t["uid"] for t in split["tasks"]] == [t.uid for t in stream.tasks]
    with pytest.raises(InputError, match="stream's order"):
        score(events[::-1], stream)
