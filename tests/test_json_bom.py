"""One BOM policy for a user's JSON files (issue 38): a file that starts with a UTF-8 byte-order mark (as
Windows editors write it) is read by every command that reads one, exactly as the same file without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vistabench.cli import main
from vistabench.jsonutil import UTF8_BOM, decode_user_json, read_json, strip_bom


def _with_bom(path: Path) -> Path:
    """A copy of ``path`` with a byte-order mark in front (the copy's name: bom-<name>)."""
    out = path.with_name("bom-" + path.name)
    out.write_bytes(UTF8_BOM + path.read_bytes())
    return out


def _json(capsys, *argv) -> dict:
    rc = main([*map(str, argv), "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


def test_decode_user_json_accepts_a_bom_and_nothing_else_changes(tmp_path) -> None:
    assert decode_user_json(UTF8_BOM + b'{"a": [1, 2]}') == decode_user_json(b'{"a": [1, 2]}') == {"a": [1, 2]}
    assert strip_bom(b"[]") == b"[]" and strip_bom(UTF8_BOM) == b""
    with pytest.raises(UnicodeDecodeError):
        decode_user_json('{"a": "é"}'.encode("latin-1"))
    (tmp_path / "x.json").write_bytes(UTF8_BOM + b"[1]")
    assert read_json(tmp_path / "x.json", what="x") == [1]


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth")
    assert main(["detection", "synth", "--out", str(d), "--images", "12", "--categories", "6",
                 "--dets-per-image", "10", "--seed", "3"]) == 0
    assert main(["detection", "split", "--gt", str(d / "gt.json"), "--out", str(d / "split.json")]) == 0
    assert main(["detection", "calibrate", "fit", "--gt", str(d / "gt.json"), "--results", str(d / "results.json"),
                 "--out", str(d / "cal.json")]) == 0
    return d


def test_detection_commands_read_bommed_files(capsys, synth) -> None:
    capsys.readouterr()
    gt, res, split, cal = (synth / n for n in ("gt.json", "results.json", "split.json", "cal.json"))
    plain = _json(capsys, "detection", "eval", "--gt", gt, "--results", res, "--split", split, "--no-store")
    bommed = _json(capsys, "detection", "eval", "--gt", _with_bom(gt), "--results", _with_bom(res), "--split",
                   _with_bom(split), "--no-store")
    assert bommed["old"] == plain["old"] and bommed["pool"] == plain["pool"]
    out = _json(capsys, "detection", "calibrate", "apply", "--calibration", _with_bom(cal), "--results",
                _with_bom(res), "--out", synth / "calibrated.json")
    assert out["detections"] > 0
    assert _json(capsys, "detection", "split", "--gt", _with_bom(gt), "--out", synth / "split2.json")["test"] > 0


def test_stats_and_incremental_read_bommed_files(capsys, tmp_path) -> None:
    (tmp_path / "a.json").write_text("[0.5, 0.6, 0.7]")
    (tmp_path / "b.json").write_text("[0.1, 0.2, 0.25]")
    plain = _json(capsys, "stats", "welch", "--a", tmp_path / "a.json", "--b", tmp_path / "b.json")
    assert _json(capsys, "stats", "welch", "--a", _with_bom(tmp_path / "a.json"),
                 "--b", _with_bom(tmp_path / "b.json")) == plain
    (tmp_path / "acc.json").write_text(json.dumps({"matrix": [[0.8], [0.75, 0.3]]}))
    r = _json(capsys, "incremental", "score", "--matrix", _with_bom(tmp_path / "acc.json"), "--base-classes", "6",
              "--way", "2")
    assert r["pd"] == pytest.approx(0.05)
    assert main(["incremental", "split", "--data", "digits", "--base-classes", "8", "--way", "1", "--shot", "3",
                 "--base-shot", "30", "--out", str(tmp_path / "s.json")]) == 0
    capsys.readouterr()
    rec = _json(capsys, "incremental", "run", "--data", "digits", "--sessions", _with_bom(tmp_path / "s.json"),
                "--method", "prototype", "--epochs", "1", "--no-store")
    assert len(rec["metrics"]["sessions"]) == 3


def test_config_files_read_bommed(capsys, tmp_path) -> None:
    printed = _json(capsys, "incremental", "run", "--data", "digits", "--base-classes", "8", "--way", "1",
                    "--shot", "3", "--method", "prototype", "--print-config")
    (tmp_path / "c.json").write_text(json.dumps(printed))
    assert _json(capsys, "incremental", "run", "--config", _with_bom(tmp_path / "c.json"), "--print-config") == printed


def test_smalldata_space_file_reads_bommed_and_names_a_malformed_one(capsys, tmp_path) -> None:
    space = {"lr": {"loguniform": [0.001, 0.1]}, "weight_decay": {"loguniform": [1e-5, 1e-3]}}
    (tmp_path / "space.json").write_text(json.dumps(space))
    argv = ("smalldata", "run", "--dataset", "digits", "--method", "ce", "--print-config", "--space")
    plain = _json(capsys, *argv, tmp_path / "space.json")
    assert _json(capsys, *argv, _with_bom(tmp_path / "space.json")) == plain
    assert plain["space"]["lr"] == {"loguniform": [0.001, 0.1]}
    (tmp_path / "bad.json").write_text('{"lr": ')
    assert main([*argv, str(tmp_path / "bad.json")]) == 2
    assert "malformed JSON" in capsys.readouterr().err
