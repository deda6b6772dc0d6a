"""`score --track`: every protocol's `score` verb tracks as `run` does — the verb's options and the
record's settings as parameters, only the scores as metrics — and stops before scoring when the
tracker cannot start."""

import json

import pytest

from vistabench.cli import build_parser, main
from vistabench.cli.verbs import TrackOptions, walk
from vistabench.store import ResultsStore

pytest.importorskip("tensorboardX", reason="tensorboardX not installed (pip install 'vistabench[track]')")
accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator",
                                  reason="tensorboard not installed (pip install 'vistabench[track]')")


def _read(folder):
    ea = accumulator.EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    ea.Reload()
    return ea


def _text(ea, tag):
    (event,) = ea.Tensors(f"{tag}/text_summary")
    return event.tensor_proto.string_val[0].decode()


def test_every_score_verb_takes_track():
    verbs = {path: verb for path, verb in walk(build_parser()) if path[-1] == "score"}
    assert {p[0] for p in verbs} == {"longtail", "detection", "incremental", "smalldata", "stream"}
    for path, verb in verbs.items():
        assert issubclass(verb.options, TrackOptions), path
        assert {"--track", "--track-dir"} <= set(verb.flags), path


@pytest.fixture
def acc_json(tmp_path):
    path = tmp_path / "acc.json"
    path.write_text(json.dumps({"matrix": [[0.8], [0.75, 0.3], [0.7, 0.25, 0.4]]}))
    return path


def test_incremental_score_is_tracked(acc_json, tmp_path, capsys):
    rc = main(["incremental", "score", "--matrix", str(acc_json), "--base-classes", "60", "--way", "5",
               "--store", str(tmp_path / "s.sqlite"), "--track", "tensorboard", "--track-dir", str(tmp_path / "tb")])
    out, err = capsys.readouterr()
    assert rc == 0, err
    (folder,) = (tmp_path / "tb").iterdir()
    assert folder.name.startswith("incremental-score-") and f"tracked: tensorboard log '{folder}'" in err
    with ResultsStore(tmp_path / "s.sqlite") as s:
        (record,) = s.records()
    ea = _read(folder)
    (pd,) = ea.Scalars("pd")
    assert pd.value == pytest.approx(record.metrics["pd"])
    assert not [t for t in ea.Tags()["scalars"] if t.startswith(("settings", "scoring"))]  # settings: never metrics
    config = _text(ea, "config")  # the verb's options
    assert f'    matrix: "{acc_json}"' in config and "    base_classes: 60" in config and "track" not in config
    settings = _text(ea, "settings")  # the record's settings as parameters
    assert '    settings.source: "score"' in settings
    assert json.loads((folder / "records.json").read_text())[0]["id"] == record.id
    tags = ea.Tensors("tags/text_summary")[-1].tensor_proto.string_val[0].decode()  # the last: with the ids
    assert f"    vistabench.record_ids: {record.id}" in tags and "    vistabench.command: incremental score" in tags
    assert _text(ea, "status") == "finished"


def test_detection_score_is_tracked(tmp_path, capsys):
    assert main(["detection", "synth", "--out", str(tmp_path / "syn"), "--images", "20", "--categories", "5"]) == 0
    capsys.readouterr()
    rc = main(["detection", "score", "--gt", str(tmp_path / "syn" / "gt.json"), "--results",
               str(tmp_path / "syn" / "results.json"), "--no-store", "--track", "tensorboard", "--track-dir",
               str(tmp_path / "tb"), "--json"])
    out, err = capsys.readouterr()
    assert rc == 0 and err == "", err  # --json: no "tracked:" line
    result = json.loads(out)
    (folder,) = (tmp_path / "tb").iterdir()
    ea = _read(folder)
    (ap,) = ea.Scalars("old_AP")
    assert ap.value == pytest.approx(result["old"]["AP"], rel=1e-6)
    assert "    iou_type: \"bbox\"" in _text(ea, "config")


def test_score_track_errors(acc_json, tmp_path, capsys, silent_server, monkeypatch):
    argv = ["incremental", "score", "--matrix", str(acc_json), "--base-classes", "60", "--way", "5",
            "--store", str(tmp_path / "s.sqlite")]
    rc = main([*argv, "--track", "mlflow", "--track-dir", "tb"])
    assert rc == 2 and capsys.readouterr().err == (
        "vistabench: error: --track-dir: TensorBoard's log folder, set to 'tb', but the scores are not tracked with "
        "tensorboard; add --track tensorboard or drop --track-dir\n")
    pytest.importorskip("mlflow", reason="mlflow not installed (pip install 'vistabench[track]')")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", silent_server)
    rc = main([*argv, "--track", "mlflow"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(f"vistabench: error: --track: mlflow: no tracking server answers at {silent_server}")
    assert not (tmp_path / "s.sqlite").exists()  # stopped before scoring: nothing stored


def test_stream_score_of_several_records_is_tracked(tmp_path, capsys):
    """One record per task: record i at step i; a setting that differs between them is not a parameter."""
    assert main(["stream", "show", "embedded", "--json"]) == 0
    tasks = json.loads(capsys.readouterr().out)["tasks"]
    events = [{"task": t["uid"], "error": 0.1 + 0.01 * i, "flops": 1e9} for i, t in enumerate(tasks)]
    (tmp_path / "events.json").write_text(json.dumps(events))
    rc = main(["stream", "score", "--events", str(tmp_path / "events.json"), "--stream", "embedded", "--store",
               str(tmp_path / "s.sqlite"), "--track", "tensorboard", "--track-dir", str(tmp_path / "tb")])
    assert rc == 0, capsys.readouterr().err
    (folder,) = (tmp_path / "tb").iterdir()
    ea = _read(folder)
    assert [(e.step, round(e.value, 4)) for e in ea.Scalars("error")] == [(i, round(e["error"], 4))
                                                                           for i, e in enumerate(events)]
    settings = _text(ea, "settings")
    assert '    settings.stream: "embedded"' in settings
    assert len(json.loads((folder / "records.json").read_text())) == len(events)
