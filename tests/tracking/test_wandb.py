"""`--track wandb` in wandb's offline mode (WANDB_MODE=offline, no account, no network): the files
written under WANDB_DIR read back. wandb 0.31 has no public reader of its binary run log
(``run-*.wandb``), so the logged values are checked through the run's files and the keys in that log."""

import json

import pytest

from vistabench.cli import main

from .conftest import FAST

pytest.importorskip("wandb", reason="wandb not installed (pip install 'vistabench[track]')")


def test_offline_run_files(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wb"))
    monkeypatch.setenv("WANDB_PROJECT", "vistabench-test")
    monkeypatch.setenv("WANDB_SILENT", "true")
    rc = main(["longtail", "run", *FAST, "--track", "wandb", "--no-store", "--json"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    record = json.loads(captured.out)
    (run_dir,) = (tmp_path / "wb" / "wandb").glob("offline-run-*")
    files = run_dir / "files"
    assert json.loads((files / "records.json").read_text())[0]["metrics"]["auc"] == record["metrics"]["auc"]
    assert json.loads((files / "config.json").read_text())["method"] == "ce"
    assert "<img" in (files / "report.html").read_text()
    pngs = list((files / "media" / "images" / "figures").glob("*.png"))
    assert pngs and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    import wandb

    wandb.teardown()  # wandb's service finishes writing the run log when it stops
    (log,) = run_dir.glob("run-*.wandb")
    data = log.read_bytes()
    for key in (b"train/loss", b"train/step", b"auc", b"exact.auc", b"method"):
        assert key in data


def test_online_without_account_is_one_line(tmp_path, monkeypatch, capsys):
    import wandb

    wandb.teardown()  # wandb reads WANDB_* once per process (its setup singleton): forget the offline run's
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc login
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wb"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "cfg"))
    rc = main(["longtail", "run", *FAST, "--track", "wandb", "--no-store"])
    err = capsys.readouterr().err
    assert rc == 2 and "WANDB_MODE=offline" in err and len(err.strip().splitlines()) == 1
