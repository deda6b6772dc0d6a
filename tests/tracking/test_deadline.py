"""A tracker never holds a run hostage: a server that never answers stops the command before training
(one line, exit 2), `export` checks it the same way, a tracker that hangs or dies mid-run is one
warning while the run finishes and stores its record (sent later by `vistabench export`)."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from vistabench import epochs
from vistabench.cli import main
from vistabench.store import Record, ResultsStore
from vistabench.tracking import backends, guard
from vistabench.tracking.guard import TIMEOUT_ENV, call_timeout

from .conftest import FAST, _free_port, start_mlflow_server, stop_mlflow_server

mlflow = pytest.importorskip("mlflow", reason="mlflow not installed (pip install 'vistabench[track]')")


def _cli(argv, env=None, timeout=300):
    """The installed command line in a process of its own: (exit status, stdout, stderr, seconds)."""
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "vistabench", *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
    return done.returncode, done.stdout, done.stderr, time.monotonic() - t0


def _store(path):
    with ResultsStore(path) as s:
        s.add(Record(protocol="longtail", dataset="digits", method="ce", seed=1, split_hash="h",
                     settings={"imbalance": 10.0}, metrics={"auc": 0.5}))
    return path


def test_a_server_that_never_answers_stops_the_run_before_training(silent_server, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", silent_server)
    trained = []
    t0 = time.monotonic()
    with epochs.listen(trained.append):
        rc = main(["longtail", "run", *FAST, "--track", "mlflow", "--store", str(tmp_path / "s.sqlite")])
    err = capsys.readouterr().err
    assert rc == 2 and trained == [] and time.monotonic() - t0 < 30
    assert err.startswith(f"vistabench: error: --track: mlflow: no tracking server answers at {silent_server} "
                          "(MLFLOW_TRACKING_URI): no answer to an HTTP request within 5 s"), err
    assert len(err.strip().splitlines()) == 1
    with ResultsStore(tmp_path / "s.sqlite") as s:
        assert s.records() == []  # nothing ran, nothing stored


@pytest.fixture
def unwritable(tmp_path):
    """A folder nobody may write: read-only for a user, a read-only tmpfs for root (skipped if neither)."""
    where = tmp_path / "locked"
    where.mkdir()
    if os.geteuid() != 0:
        where.chmod(0o500)
        yield where
        where.chmod(0o700)
        return
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(where)], capture_output=True,
                          text=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"cannot make a read-only folder as root here ({done.stderr.strip()})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


@pytest.mark.parametrize("case", ["silent", "closed", "unwritable sqlite"])
def test_export_checks_the_tracker_like_track(case, request, tmp_path):
    store = _store(tmp_path / "s.sqlite")
    if case == "silent":
        uri, says = request.getfixturevalue("silent_server"), "no answer to an HTTP request within 5 s"
    elif case == "closed":
        uri, says = f"http://127.0.0.1:{_free_port()}", "Connection refused"
    else:
        folder = request.getfixturevalue("unwritable")
        uri, says = f"sqlite:///{folder}/mlflow.db", "cannot write the tracking database"
    rc, out, err, seconds = _cli(["export", "mlflow", "--store", store], env={"MLFLOW_TRACKING_URI": uri})
    assert rc == 2 and out == "" and seconds < 30, (rc, seconds, err[-2000:])
    assert err.count("\n") == 1 and "Traceback" not in err and "retried" not in err, err  # no MLflow retry storm
    assert err.startswith("vistabench: error: track: mlflow: ") and says in err and uri in err, err


class Hanging(backends.Backend):
    """A tracker whose server stops answering after the run's first epoch (its calls never return)."""

    calls: list[str] = []
    released = threading.Event()

    def _call(self, what):
        Hanging.calls.append(what)
        if what == "epoch" and Hanging.calls.count("epoch") > 1:
            Hanging.released.wait()  # hangs until the test ends

    def log_params(self, params):
        self._call("params")

    def log_metrics(self, metrics, *, step, axis):
        self._call(axis)

    def set_tags(self, tags):
        self._call("tags")

    def log_figure(self, name, png):
        self._call("figure")

    def log_file(self, path):
        self._call("file")

    def finish(self, ok):
        self._call("finish")
        return "hanging"


@pytest.fixture
def hanging(monkeypatch):
    import types

    module = types.ModuleType("vistabench.tracking.hanging_backend")
    module.TRACKER = Hanging
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(guard.BACKENDS.targets, "mlflow", module.__name__)
    monkeypatch.setitem(backends.TOOL_PACKAGES.targets, "mlflow", "json")
    monkeypatch.setenv(TIMEOUT_ENV, "2")
    Hanging.calls = []
    Hanging.released.clear()
    yield Hanging
    Hanging.released.set()


def test_a_tracker_that_hangs_mid_run_is_one_warning_and_the_record_is_stored(hanging, capsys, tmp_path):
    store = tmp_path / "s.sqlite"
    t0 = time.monotonic()
    rc = main(["longtail", "run", *FAST, "--track", "mlflow", "--store", str(store)])
    seconds = time.monotonic() - t0
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert hanging.calls == ["params", "epoch", "epoch"]  # nothing asked of it after its first hang
    warnings_ = [line for line in err.splitlines() if line.startswith("vistabench: warning:")]
    assert warnings_ == [f"vistabench: warning: track: mlflow failed during the run (log_metrics: no answer within "
                         f"2 s, {TIMEOUT_ENV}); the run went on without it; its records are stored in "
                         f"{str(store)!r}: `vistabench export mlflow --store {store}` sends them later"]
    assert "tracked:" not in err and "Traceback" not in err
    with ResultsStore(store) as s:
        (record,) = s.records(protocol="longtail")
    assert f"stored record {record.id}" in out
    assert seconds < 120  # the run's own time (two tiny epochs) and one deadline of 2 s


def test_the_deadline_is_read_once_and_checked(monkeypatch, capsys):
    monkeypatch.delenv(TIMEOUT_ENV, raising=False)
    assert call_timeout() == 15.0
    monkeypatch.setenv(TIMEOUT_ENV, "2.5")
    assert call_timeout() == 2.5
    monkeypatch.setenv(TIMEOUT_ENV, "0")
    rc = main(["longtail", "run", *FAST, "--track", "tensorboard", "--no-store"])
    assert rc == 2 and capsys.readouterr().err == (
        f"vistabench: error: {TIMEOUT_ENV}: expected the seconds one call to a tracker may take, a number in "
        "(0, 86400), got '0'\n")


def test_a_server_killed_mid_run(tmp_path):
    """A real `mlflow server` killed after the run's first epoch reached it: the run ends on its own
    time, exit 0, one warning; its record is stored, and `export` sends it later (here to a local store)."""
    proc, uri, log = start_mlflow_server(tmp_path / "doomed")
    argv = ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10", "--epochs", "6",
            "--points", "3", "--repeats", "2", "--store", tmp_path / "s.sqlite", "--track", "mlflow", "--json"]
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MLFLOW_EXPERIMENT_NAME": "killed"}
    said = []  # (seconds since the start, line) of the run's stderr, as it comes

    def read(stream):
        for line in stream:
            said.append((time.monotonic() - t0, line.rstrip("\n")))

    try:
        t0 = time.monotonic()
        with open(tmp_path / "out.json", "w") as stdout:
            run = subprocess.Popen([sys.executable, "-m", "vistabench", *map(str, argv)], stdout=stdout,
                                   stderr=subprocess.PIPE, text=True, env=env)
        reader = threading.Thread(target=read, args=(run.stderr,), daemon=True)
        reader.start()
        client = mlflow.tracking.MlflowClient(tracking_uri=uri)
        while True:  # until the first epoch is in the server
            assert run.poll() is None, said
            exp = client.get_experiment_by_name("killed")
            runs = client.search_runs([exp.experiment_id]) if exp is not None else []
            if runs and client.get_metric_history(runs[0].info.run_id, "train/loss"):
                break
            assert time.monotonic() - t0 < 240, "the first epoch never reached the server"
            time.sleep(0.3)
        stop_mlflow_server(proc, log, sig=9)
        killed = time.monotonic() - t0
        run.wait(timeout=300)
        reader.join(10)
        ended = time.monotonic() - t0
    finally:
        stop_mlflow_server(proc, log)
    assert run.returncode == 0, said
    assert len(said) == 1 and said[0][1].startswith("vistabench: warning: track: mlflow failed during the run ("), said
    assert "`vistabench export mlflow --store" in said[0][1]
    warned = said[0][0]
    print(f"killed {killed:.1f} s after the start, warned {warned - killed:.1f} s later, ended {ended - killed:.1f} s "
          "after the kill")
    assert warned - killed < 30  # the dead server costs the run at most one bounded call
    record = json.loads((tmp_path / "out.json").read_text())
    with ResultsStore(tmp_path / "s.sqlite") as s:
        assert [r.id for r in s.records()] == [record["id"]]
    assert ended - killed < killed + 30  # the rest of a run that took `killed` s to its first epoch, + 30 s
    rc, out, err, _ = _cli(["export", "mlflow", "--store", tmp_path / "s.sqlite", "--json"],
                           env={"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'later.db'}"})
    assert rc == 0 and json.loads(out)["exported"] == 1, err
