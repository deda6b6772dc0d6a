"""Tracking outputs on a full disk, as every other output (tests/cli/test_full_disk.py): one line naming
the file and "no space left on device" before anything runs, one warning during a run (the record is
stored all the same), and no partial event file or `records.json` left behind."""

import pytest

from vistabench import epochs
from vistabench.cli import main
from vistabench.store import Record, ResultsStore

from .conftest import FAST, fill

pytest.importorskip("tensorboardX", reason="tensorboardX not installed (pip install 'vistabench[track]')")


def _files(disk):
    """Files on the disk besides the filler (partial or temporary files would show up here)."""
    return sorted(str(p.relative_to(disk)) for p in disk.rglob("*") if p.is_file() and p.name != "filler")


def test_track_tensorboard_on_a_full_disk_stops_before_training(disk, capsys, tmp_path):
    fill(disk)
    trained = []
    with epochs.listen(trained.append):
        rc = main(["longtail", "run", *FAST, "--track", "tensorboard", "--track-dir", str(disk / "tb"),
                   "--store", str(tmp_path / "s.sqlite")])
    err = capsys.readouterr().err
    assert rc == 2 and trained == [], err
    (line,) = err.strip().splitlines()
    assert line.startswith("vistabench: error: tensorboard log '") and "no space left on device" in line
    assert str(disk / "tb") in line and "Traceback" not in err
    assert _files(disk) == []


def test_a_disk_filling_up_mid_run_is_one_warning_and_the_record_is_stored(disk, capsys, tmp_path):
    def fill_after_first_epoch(entry):
        if entry["epoch"] == 1:
            fill(disk)

    with epochs.listen(fill_after_first_epoch):  # runs before the tracker's listener: it writes to a full disk
        rc = main(["longtail", "run", *FAST, "--track", "tensorboard", "--track-dir", str(disk / "tb"),
                   "--store", str(tmp_path / "s.sqlite")])
    out, err = capsys.readouterr()
    assert rc == 0, err
    (line,) = err.strip().splitlines()
    # the first write to meet the full disk names itself: an event (log) or one of the run's files
    assert line.startswith(("vistabench: warning: track: tensorboard failed during the run (tensorboard log '",
                            "vistabench: warning: track: tensorboard failed during the run (tensorboard file '")), line
    assert "no space left on device" in line and f"vistabench export tensorboard --store {tmp_path / 's.sqlite'}" in line
    with ResultsStore(tmp_path / "s.sqlite") as s:
        (record,) = s.records()
    assert f"stored record {record.id}" in out
    assert _files(disk) == []  # the run's folder removed: no partial event file


def test_export_tensorboard_on_a_full_disk(disk, capsys, tmp_path):
    with ResultsStore(tmp_path / "s.sqlite") as s:
        s.add(Record(protocol="longtail", dataset="digits", method="ce", seed=0, split_hash=None, settings={},
                     metrics={"auc": 0.7}))
    fill(disk)
    rc = main(["export", "tensorboard", "--store", str(tmp_path / "s.sqlite"), "--track-dir", str(disk / "tb")])
    err = capsys.readouterr().err
    assert rc == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith("vistabench: error: tensorboard log '") and "no space left on device" in line, line
    assert _files(disk) == []
    (disk / "filler").unlink()  # space again: the same export sends it
    rc = main(["export", "tensorboard", "--store", str(tmp_path / "s.sqlite"), "--track-dir", str(disk / "tb"),
               "--json"])
    assert rc == 0 and '"exported": 1' in capsys.readouterr().out
    assert [p.split("/")[-1].split(".")[0] for p in _files(disk)] == ["events", "records"]
