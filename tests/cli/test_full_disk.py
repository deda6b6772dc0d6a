"""A full disk loses nothing: one line naming the file and "no space left on device", exit 2; the
earlier file survives; no partial or temporary file is left; read-only views of a store still work.

The disk is a 4 MiB tmpfs (root may mount one); without that permission the tests are skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from vistabench.cli import main
from vistabench.errors import USER_ERROR


@pytest.fixture
def disk(tmp_path):
    """A small file system of its own (tmpfs), unmounted at the end."""
    where = tmp_path / "disk"
    where.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a small tmpfs to fill ({exc})")
    if done.returncode != 0:
        pytest.skip(f"mounting a small tmpfs is not permitted here ({done.stderr.strip() or done.returncode})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def fill(disk: Path) -> None:
    """Take every free byte of ``disk``."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


def _run(capsys, argv):
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def _one_line_full(rc, err, name):
    assert rc == USER_ERROR, err[-2000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "no space left on device" in lines[0] and name in lines[0], lines[0]


def _leftovers(disk: Path) -> list[str]:
    """Files on the disk besides the filler: temporary or partial files would show up here."""
    return sorted(str(p.relative_to(disk)) for p in disk.rglob("*") if p.is_file() and p.name != "filler")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    from vistabench.data import save_predictions
    from vistabench.data.detection_synth import synth_detection_set

    t = tmp_path_factory.mktemp("inputs")
    rng = np.random.default_rng(0)
    save_predictions(t / "pred.npz", labels=np.repeat(np.arange(4), 30), logits=rng.normal(size=(120, 4)))
    (t / "counts.json").write_text(json.dumps([200, 60, 20, 6]))
    syn = synth_detection_set(num_images=10, num_categories=5, dets_per_image=5, seed=0)
    (t / "dt.json").write_text(json.dumps(syn.results))
    assert main(["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10", "--epochs", "1",
                 "--points", "3", "--repeats", "2", "--store", str(t / "s.sqlite")]) == 0
    return t


def _sweep(inputs, out, points):
    return ["longtail", "sweep", "--labels", inputs / "pred.npz", "--train-counts", inputs / "counts.json",
            "--test-imbalance", "10", "--points", str(points), "--repeats", "2", "--out", out]


def test_sweep_over_an_existing_file_keeps_it(capsys, disk, inputs):
    out = disk / "sweep.json"
    assert _run(capsys, _sweep(inputs, out, 3))[0] == 0
    before = out.read_bytes()
    fill(disk)
    rc, _, err = _run(capsys, _sweep(inputs, out, 5))
    _one_line_full(rc, err, "sweep.json")
    assert out.read_bytes() == before  # the earlier file, whole
    assert _leftovers(disk) == ["sweep.json"]


def test_rerank_report_and_runs_on_a_full_disk(capsys, disk, inputs):
    fill(disk)
    rc, _, err = _run(capsys, ["detection", "rerank", "--results", inputs / "dt.json", "--per-class-topk", "5",
                               "--out", disk / "r.json"])
    _one_line_full(rc, err, "r.json")
    rc, _, err = _run(capsys, ["report", "--store", inputs / "s.sqlite", "--out", disk / "rep"])
    _one_line_full(rc, err, "index.html")
    rc, _, err = _run(capsys, ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10",
                               "--epochs", "1", "--points", "3", "--repeats", "2", "--no-store", "--out", disk / "lt"])
    _one_line_full(rc, err, "split.json")
    rc, _, err = _run(capsys, ["stream", "run", "--stream", "embedded", "--learner", "indep", "--trials", "1",
                               "--steps", "2", "--max-tasks", "1", "--no-store", "--work-dir", disk / "st"])
    _one_line_full(rc, err, "checkpoint.pt")
    assert "--checkpoint" not in err  # the run's checkpoint, not the pt learner's --checkpoint
    assert _leftovers(disk) == []


def test_a_tuning_study_on_a_full_disk_is_one_line_and_resumes(disk):
    from vistabench.tuning import TuneSettings, tune
    from vistabench.tuning.space import LogUniform

    space = {"lr": LogUniform(1e-3, 1.0)}

    def objective(config, report):
        for epoch in range(1, 4):
            report(epoch, config["lr"] * epoch)
        return config["lr"]

    db = disk / "studies" / "s.db"
    settings = dict(max_epochs=3, grace_period=3, sampler="random")
    tune(objective, space, TuneSettings(trials=1, **settings), storage=db, study_name="s")
    fill(disk)
    from vistabench.errors import InputError

    with pytest.raises(InputError, match=r"study file '.*s.db': no space left on device") as exc:
        tune(objective, space, TuneSettings(trials=4, **settings), storage=db, study_name="s")
    assert "\n" not in str(exc.value)
    (disk / "filler").unlink()
    res = tune(objective, space, TuneSettings(trials=2, **settings), storage=db, study_name="s")
    assert res.resumed_trials >= 1 and len(res.trials) == 2  # the trial done before the full disk is kept


def test_store_views_work_on_a_full_disk_and_writers_say_so(capsys, disk, inputs):
    import shutil

    from vistabench.store import ResultsStore

    store = disk / "s.sqlite"
    shutil.copyfile(inputs / "s.sqlite", store)
    fill(disk)
    rc, out, err = _run(capsys, ["longtail", "table", "--store", store, "--format", "csv"])
    assert rc == 0, err
    assert "ce" in out
    rc, out, err = _run(capsys, ["table", "--protocol", "longtail", "--store", store, "--format", "csv"])
    assert rc == 0, err
    assert _leftovers(disk) == ["s.sqlite"]  # no -wal / -shm begun by the readers
    rc, _, err = _run(capsys, ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10",
                               "--epochs", "1", "--points", "3", "--repeats", "2", "--store", store])
    _one_line_full(rc, err, "s.sqlite")
    rc, _, err = _run(capsys, ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10",
                               "--epochs", "1", "--points", "3", "--repeats", "2", "--store", disk / "new.sqlite"])
    _one_line_full(rc, err, "new.sqlite")
    assert _leftovers(disk) == ["s.sqlite"]
    with ResultsStore(store, read_only=True) as s:
        assert len(s.records()) == 1  # nothing half-stored
