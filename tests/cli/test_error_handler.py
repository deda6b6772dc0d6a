"""The top-level handler and the robustness checks of issue 11 that are not a single bad option."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from vistabench.cli import main
from vistabench.errors import INTERNAL_ERROR, USER_ERROR, InputError


def _run(capsys, argv):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


# ------------------------------------------------------------------ handler
def test_internal_bug_shows_traceback_and_asks_for_a_report(capsys, monkeypatch, tmp_path):
    import vistabench.cli.stats as st

    def broken(args):
        raise KeyError("some internal key")  # not the user's fault

    monkeypatch.setattr(st, "_welch", broken)
    (tmp_path / "a.json").write_text("[1, 2]")
    rc, out, err = _run(capsys, ["stats", "welch", "--a", str(tmp_path / "a.json"), "--b", str(tmp_path / "a.json")])
    assert rc == INTERNAL_ERROR != USER_ERROR
    assert "Traceback" in err and "some internal key" in err
    assert err.strip().splitlines()[-1].startswith("vistabench: internal error (KeyError)")
    assert "please report" in err


def test_os_errors_without_a_file_name_are_bugs(capsys, monkeypatch):
    import vistabench.cli.stream as st

    def broken(args):
        raise OSError("device hiccup")

    monkeypatch.setattr(st, "_list", broken)
    rc, out, err = _run(capsys, ["stream", "list"])
    assert rc == INTERNAL_ERROR and "Traceback" in err


@pytest.mark.parametrize("exc,expect", [
    (PermissionError(13, "Permission denied", "/x/out.json"), "'/x/out.json': permission denied"),
    (IsADirectoryError(21, "Is a directory", "/x/dir"), "'/x/dir': is a folder, expected a file"),
    (FileExistsError(17, "File exists", "/x/f"), "'/x/f': already exists"),
    (FileNotFoundError(2, "No such file", "/x/n"), "'/x/n': no such file or folder"),
    (NotADirectoryError(20, "Not a directory", "/x/f/g"), "'/x/f/g': a part of the path is a file"),
    (OSError(28, "No space left on device", "/x/big"), "'/x/big': No space left on device"),
    (json.JSONDecodeError("Expecting value", "x", 0), "malformed JSON"),
])
def test_os_and_format_errors_on_a_named_path_are_user_errors(capsys, monkeypatch, exc, expect):
    import vistabench.cli.stream as st

    def raising(args):
        raise exc

    monkeypatch.setattr(st, "_list", raising)
    rc, out, err = _run(capsys, ["stream", "list"])
    assert rc == USER_ERROR and "Traceback" not in err
    assert err.count("\n") == 1 and expect in err


def test_unwritable_output_is_one_line(capsys, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    target = ro / "x"
    if os.geteuid() == 0:  # root ignores file permissions; sysfs refuses new entries even to root
        if not os.path.isdir("/sys/kernel"):
            pytest.skip("no read-only location for root")
        target = "/sys/kernel/vistabench-test-out"
    try:
        rc, out, err = _run(capsys, ["detection", "synth", "--out", str(target), "--images", "2",
                                     "--categories", "2"])
        rc2, out2, err2 = _run(capsys, ["longtail", "split", "--data", "digits", "--imbalance", "10",
                                        "--out", f"{target}.json"])
    finally:
        ro.chmod(0o700)
    for r, e in ((rc, err), (rc2, err2)):
        assert r == USER_ERROR and "permission denied" in e and e.count("\n") == 1 and "Traceback" not in e


def _subprocess(args, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(os.path.dirname(__file__), "..", "..", "src"),
                                         env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "vistabench", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_subprocess_user_error_has_no_traceback_and_debug_shows_one(tmp_path):
    store = tmp_path / "other.db"
    import sqlite3

    c = sqlite3.connect(store)
    c.execute("CREATE TABLE accounts (x)")
    c.commit()
    c.close()
    argv = ["table", "--protocol", "longtail", "--store", str(store)]
    r = _subprocess(argv, {"VISTABENCH_DEBUG": "0"})
    assert r.returncode == USER_ERROR and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "another program" in r.stderr
    r = _subprocess(argv, {"VISTABENCH_DEBUG": "1"})
    assert r.returncode == USER_ERROR and "Traceback" in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("vistabench: error:")


# ------------------------------------------------------------------ torch checkpoints
def test_torch_checkpoint_refusal_is_one_line_and_never_advises_the_unsafe_load(capsys, tmp_path):
    import torch

    bad = tmp_path / "model.pt"
    torch.save({"fn": print, "w": torch.zeros(2)}, bad)
    rc, out, err = _run(capsys, ["stream", "run", "--stream", "embedded", "--learner", "pt", "--checkpoint", str(bad),
                                 "--work-dir", str(tmp_path / "w"), "--store", str(tmp_path / "s.sqlite")])
    assert rc == USER_ERROR and err.count("\n") == 1
    assert "not a weights-only state dict" in err and "model.pt" in err
    assert "weights_only=False" not in err and "trust" not in err


# ------------------------------------------------------------------ stream resume settings
class _Tiny:
    name = "tiny-learner"

    def __init__(self, trials):
        self.trials = trials

    def settings(self):
        return {"learner": self.name, "trials": self.trials, "device": "cpu"}

    def init(self):
        return {"n": 0}

    def train(self, task, data, state, ledger):
        return {"n": state["n"] + 1}, task.num_classes

    def predict(self, predictor, images):
        return np.random.default_rng(len(images)).random((len(images), predictor))

    def num_parameters(self, predictor):
        return 1

    def state_to_dict(self, state):
        return dict(state)

    def state_from_dict(self, d):
        return dict(d)


def test_stream_resume_with_other_settings_is_refused_naming_the_setting(tmp_path):
    from vistabench.protocols.stream.runner import run_events, run_stream
    from vistabench.store import ResultsStore
    from vistabench.streams import parse_stream

    task = {"year": 2000, "domain": "scan", "kind": "multiclass",
            "source": {"embedded": "digits", "classes": [0, 1], "n_train": 20, "n_test": 10}}
    stream = parse_stream({"name": "two", "meta_test_from_year": 2001, "input": {"image_size": 8, "channels": 1},
                           "tasks": [{**task, "name": "a"}, {**task, "name": "b", "year": 2001}]})
    with ResultsStore(tmp_path / "r.sqlite") as store:
        run_stream(stream, _Tiny(1), store=store, run_id="r", work_dir=tmp_path, max_tasks=1,
                   settings={"steps": 5})
        with pytest.raises(InputError, match=r"started with steps=5, now 6: resume it with the same steps"):
            run_stream(stream, _Tiny(1), store=store, run_id="r", work_dir=tmp_path, max_tasks=2,
                       settings={"steps": 6})
        with pytest.raises(InputError, match=r"trials=1, now 2: resume it with the same trials"):
            run_stream(stream, _Tiny(2), store=store, run_id="r", work_dir=tmp_path, max_tasks=2,
                       settings={"steps": 5})
        assert len(run_events(store, "r")) == 1  # nothing mixed in
        res = run_stream(stream, _Tiny(1), store=store, run_id="r", work_dir=tmp_path, max_tasks=2,
                         settings={"steps": 5})  # the same settings resume
        assert res.resumed_from == 1 and len(run_events(store, "r")) == 2
    # without a store (--no-store) the checkpoint's saved settings are compared
    run_stream(stream, _Tiny(1), store=None, run_id="n", work_dir=tmp_path, max_tasks=1, settings={"steps": 5})
    with pytest.raises(InputError, match=r"started with steps=5, now 7"):
        run_stream(stream, _Tiny(1), store=None, run_id="n", work_dir=tmp_path, settings={"steps": 7})


# ------------------------------------------------------------------ long-tail split fraction (API)
@pytest.mark.parametrize("f", [1.5, 1.0, -0.1, float("nan")])
def test_val_fraction_out_of_range_is_refused_by_the_api(f):
    from vistabench.protocols.longtail.runner import build_training_split

    with pytest.raises(InputError, match="val_fraction"):
        build_training_split(np.repeat(np.arange(3), 20), imbalance=2, val_fraction=f)


@pytest.mark.parametrize("argv,api_message,shown", [
    (["longtail", "profile", "--classes", "3", "--n-max", "5", "--imbalance", "2"],
     "n_max: expected a positive number, got 0", "--n-max: expected a positive number, got 0"),
    (["longtail", "profile", "--classes", "3", "--n-max", "5", "--imbalance", "2"],
     "n_max=5: too small", "--n-max=5: too small"),
    (["longtail", "profile", "--classes", "3", "--n-max", "5", "--imbalance", "2"],
     "num_classes: goes with `n_max`", "--classes: goes with --n-max"),  # a field quoted in backticks
    (["longtail", "profile", "--classes", "3", "--n-max", "5", "--imbalance", "2"],
     "grace: n_max=5 is too small", "grace: n_max=5 is too small"),  # a field only at the start is shown as its flag
    (["longtail", "profile", "--classes", "3", "--n-max", "5", "--imbalance", "2"],
     "file 'n_max.json': bad", "file 'n_max.json': bad"),  # inside a quoted file name: untouched
    (["stats", "welch", "--a", "a.json", "--b", "b.json"], "x=1 is odd", "x=1 is odd"),  # no snake options
    (["stats", "welch", "--a", "a.json", "--b", "b.json"], "alternative: expected one of", "--alternative: expected one of"),
])
def test_api_parameter_names_become_option_names(capsys, monkeypatch, argv, api_message, shown):
    import vistabench.cli.longtail as lt
    import vistabench.cli.stats as st

    def raising(opts):
        raise InputError(api_message)

    monkeypatch.setattr(lt, "_profile", raising)
    monkeypatch.setattr(st, "_welch", raising)
    rc, out, err = _run(capsys, argv)
    assert rc == USER_ERROR and err == f"vistabench: error: {shown}\n"


# ------------------------------------------------------------------ a closed pipe
@pytest.mark.parametrize("argv", [["stream", "show", "nevis-full"], ["stream", "show", "nevis-full", "--json"],
                                  ["--help"], ["longtail", "score", "--help"]])
def test_output_cut_by_a_closed_pipe_exits_141_quietly(argv):
    """`vistabench ... | head`: the reader leaves; the command stops without a word, with 128 + SIGPIPE
    as the shell reports for `cat` or `grep` (the README's exit-status list names it)."""
    from vistabench.errors import OUTPUT_CLOSED

    read, write = os.pipe()
    os.close(read)  # the reader has already left: the first write fails
    try:
        proc = subprocess.run([sys.executable, "-m", "vistabench", *argv], stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    finally:
        os.close(write)
    assert proc.returncode == OUTPUT_CLOSED == 141
    assert proc.stderr == ""


def test_a_closed_pipe_in_the_middle_of_the_output_exits_141_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "vistabench", "stream", "show", "nevis-full", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.read(100).startswith(b"{")
    proc.stdout.close()  # like `head -c 100`
    err = proc.stderr.read()
    assert proc.wait(timeout=120) in (0, 141)  # 0 when the output fit in the pipe before the reader left
    assert err == b""
