"""`--track tensorboard`: event files read back with TensorBoard's own reader (EventAccumulator);
`vistabench export tensorboard` of a store made in the test."""

import json
from pathlib import Path

import pytest

from vistabench.cli import main

from .conftest import FAST

pytest.importorskip("tensorboardX", reason="tensorboardX not installed (pip install 'vistabench[track]')")
accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator",
                                  reason="tensorboard not installed (pip install 'vistabench[track]')")


def _read(folder: Path):
    ea = accumulator.EventAccumulator(str(folder), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    ea.Reload()
    return ea


def _text(ea, tag: str) -> str:
    (event,) = ea.Tensors(f"{tag}/text_summary")
    return event.tensor_proto.string_val[0].decode()


def test_longtail_run_event_files_read_back(tmp_path, capsys):
    rc = main(["longtail", "run", *FAST, "--track", "tensorboard", "--track-dir", str(tmp_path / "tb"),
               "--no-store", "--json"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    record = json.loads(captured.out)
    (folder,) = (tmp_path / "tb").iterdir()
    assert folder.name.startswith("longtail-ce-seed0-")
    ea = _read(folder)
    tags = ea.Tags()
    # training curve: one scalar per epoch
    loss = ea.Scalars("train/loss")
    assert [e.step for e in loss] == [0, 1] and all(e.value > 0 for e in loss)
    assert [e.step for e in ea.Scalars("train/lr")] == [0, 1]
    # scores
    for key in ("auc", "avg", "balanced"):
        (event,) = ea.Scalars(key)
        assert event.value == pytest.approx(record["metrics"][key], rel=1e-6)
    (event,) = ea.Scalars("exact.auc")
    assert event.value == pytest.approx(record["metrics"]["exact"]["auc"], rel=1e-6)
    # figures: PNG images
    assert tags["images"] and all(t.startswith("figures/") for t in tags["images"])
    (image,) = ea.Images(tags["images"][0])
    assert image.encoded_image_string[:8] == b"\x89PNG\r\n\x1a\n" and image.width > 100
    # parameters: the HParams session and the config text
    from tensorboard.plugins.hparams import plugin_data_pb2

    content = ea.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info
    assert start.hparams["method"].string_value == "ce" and start.hparams["epochs"].number_value == 2
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    assert "auc" in {m.name.tag for m in experiment.metric_infos}
    assert '    data: "digits"' in _text(ea, "config") and _text(ea, "status") == "finished"
    # the run's files beside the event files
    assert json.loads((folder / "records.json").read_text())[0]["metrics"]["auc"] == record["metrics"]["auc"]
    assert "<img" in (folder / "report.html").read_text()


def test_export_store_to_tensorboard(tmp_path, capsys):
    from vistabench.store import Record, ResultsStore

    with ResultsStore(tmp_path / "e.sqlite") as s:
        s.add(Record(protocol="stream", dataset="nevis", method="finetune", seed=None, split_hash=None,
                     settings={"run_id": "a"}, metrics={"error": 0.25, "curve": [0.1, 0.2]}, tag="task"))
        s.add(Record(protocol="longtail", dataset="digits", method="ce", seed=0, split_hash=None,
                     settings={}, metrics={"auc": 0.7}))
    rc = main(["export", "tensorboard", "--store", str(tmp_path / "e.sqlite"), "--track-dir", str(tmp_path / "tb"),
               "--protocol", "stream", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and (out["records"], out["exported"]) == (1, 1)
    (folder,) = (tmp_path / "tb").iterdir()
    assert folder.name.startswith("stream-finetune-")
    ea = _read(folder)
    assert [(e.step, e.value) for e in ea.Scalars("error")] == [(0, 0.25)]
    assert ea.Tags()["scalars"] == ["error"]  # the list is in records.json, not a scalar
    rc = main(["export", "tensorboard", "--store", str(tmp_path / "e.sqlite"), "--track-dir", str(tmp_path / "tb"),
               "--json"])
    again = json.loads(capsys.readouterr().out)
    assert rc == 0 and (again["exported"], again["skipped"]) == (1, 1)  # the stream record was sent before


@pytest.mark.parametrize("protocol", ["detection", "incremental"])
def test_other_protocols_are_tracked(protocol, tmp_path, capsys):
    """Every protocol's run goes through the same tracking: its config, scores and report figures
    (and the curves where a learner trains: incremental's base session)."""
    if protocol == "detection":
        assert main(["detection", "synth", "--out", str(tmp_path / "syn"), "--images", "30", "--categories", "10"]) == 0
        argv = ["detection", "run", "--gt", str(tmp_path / "syn" / "gt.json"), "--results",
                str(tmp_path / "syn" / "results.json")]
    else:
        argv = ["incremental", "run", "--data", "digits", "--base-classes", "8", "--way", "1", "--shot", "3",
                "--base-shot", "30", "--method", "prototype", "--epochs", "2"]
    capsys.readouterr()
    rc = main([*argv, "--track", "tensorboard", "--track-dir", str(tmp_path / "tb"), "--no-store", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    record = json.loads(out)
    (folder,) = (tmp_path / "tb").iterdir()
    ea = _read(folder)
    assert folder.name.startswith(protocol) and ea.Tags()["images"]
    numbers = {k: v for k, v in record["metrics"].items() if isinstance(v, float) and v == v}
    key, value = sorted(numbers.items())[0]
    (event,) = ea.Scalars(key)
    assert event.value == pytest.approx(value, rel=1e-6)
    curve = [e.step for e in ea.Scalars("train/loss")] if protocol == "incremental" else []
    assert curve == ([0, 1] if protocol == "incremental" else [])
