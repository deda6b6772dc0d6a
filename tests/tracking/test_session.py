"""What a tracked run hands to its trackers, independent of the tool: flattening, the per-epoch
listener, runtime-only (keys unchanged), failures, missing packages, the CLI and grid options."""

import json

import numpy as np
import pytest

from vistabench import epochs
from vistabench.cli import main
from vistabench.config import TRACKERS
from vistabench.errors import InputError
from vistabench.protocols.longtail.config import LongtailConfig
from vistabench.store import Record
from vistabench.tracking import backends, guard, run_tracked
from vistabench.tracking.session import flat_metrics, flat_params, record_key


class Recorder(backends.Backend):
    """A backend that keeps what it gets (registered under a test-only name)."""

    runs: list["Recorder"] = []

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.params, self.metrics, self.figures, self.files, self.closed = {}, [], [], {}, None
        Recorder.runs.append(self)

    def log_params(self, params):
        self.params.update(params)

    def log_metrics(self, metrics, *, step, axis):
        self.metrics.append((axis, step, dict(metrics)))

    def set_tags(self, tags):
        self.tags.update(tags)

    def log_figure(self, name, png):
        self.figures.append((name, png))

    def log_file(self, path):
        self.files[path.name] = path.read_text()

    def finish(self, ok):
        self.closed = ok
        return f"recorder {self.name}"


@pytest.fixture
def recorder(monkeypatch):
    """``track: [mlflow]`` served by :class:`Recorder` (the real tools have their own tests)."""
    import sys
    import types

    module = types.ModuleType("vistabench.tracking.recorder_backend")
    module.TRACKER = Recorder
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(guard.BACKENDS.targets, "mlflow", module.__name__)
    monkeypatch.setitem(backends.TOOL_PACKAGES.targets, "mlflow", "json")
    Recorder.runs = []
    return Recorder


def test_trackers_are_the_config_choices():
    assert tuple(backends.TOOL_PACKAGES) == tuple(guard.BACKENDS) == TRACKERS


def test_flatten():
    assert flat_params({"a": {"b": 1, "c": {}}, "d": [1, 2], "e": None, "f": "x", "g": True}) == \
        {"a.b": 1, "a.c": "{}", "d": "[1, 2]", "e": "null", "f": "x", "g": True}
    assert flat_metrics({"auc": 0.5, "exact": {"auc": 0.4, "points": [1]}, "n": 3, "nan": float("nan"),
                         "none": None, "flag": True, "name": "ce", "odd key?": 1.0}) == \
        {"auc": 0.5, "exact.auc": 0.4, "n": 3.0, "odd key_": 1.0}


def test_settings_are_params_never_metrics():
    from vistabench.tracking.session import record_params

    metrics = {"auc": 0.5, "settings": {"seed": 3, "points": 5}, "exact": {"auc": 0.4, "settings": {"x": 1}}}
    assert flat_metrics(metrics) == {"auc": 0.5, "exact.auc": 0.4}
    records = [Record(protocol="stream", dataset="d", method="m", seed=None, split_hash=None,
                      settings={"stream": "s", "task": t}, metrics={"error": 0.1, "settings": {"seed": 3, "n": t}})
               for t in (1, 2)]
    # one value per name: a setting that differs between the records is left out (records.json has it)
    assert record_params(records, settings=True) == {"scoring.seed": 3, "settings.stream": "s"}
    assert record_params(records[:1], settings=False) == {"scoring.seed": 3, "scoring.n": 1}


def test_epoch_listener_receives_the_trainers_history():
    from vistabench.learners.models import build_model
    from vistabench.learners.trainer import TrainConfig, Trainer

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (40, 8, 8, 1), dtype=np.uint8)
    y = np.arange(40) % 2
    seen = []
    with epochs.listen(seen.append):
        res = Trainer(build_model("cnn28", num_classes=2, in_channels=1, seed=0),
                      TrainConfig(epochs=3, batch_size=16, lr=0.05)).fit(x, y)
    assert seen == res.history and [e["epoch"] for e in seen] == [1, 2, 3]
    seen.clear()
    Trainer(build_model("cnn28", num_classes=2, in_channels=1, seed=0), TrainConfig(epochs=1, batch_size=16)).fit(x, y)
    assert seen == []  # the listener is gone after its block


def test_track_is_runtime_only():
    plain = LongtailConfig.from_dict({"data": "digits", "method": "ce", "imbalance": 10})
    tracked = LongtailConfig.from_dict({"data": "digits", "method": "ce", "imbalance": 10,
                                        "track": ["mlflow", "tensorboard"], "track_dir": "tb"})
    assert plain.key_dict() == tracked.key_dict() and tracked.track == ("mlflow", "tensorboard")
    assert list(tracked.to_dict())[-2:] == ["track", "track_dir"]  # after the protocol's own fields
    with pytest.raises(InputError, match="track: expected one of mlflow, tensorboard, wandb, got 'mlfow'; did you mean 'mlflow'"):
        LongtailConfig.from_dict({"data": "digits", "method": "ce", "imbalance": 10, "track": "mlfow"})


def test_a_protocols_run_refuses_to_track_silently():
    from vistabench.protocols.longtail.runner import run

    config = LongtailConfig.from_dict({"data": "digits", "method": "ce", "imbalance": 10, "track": ["mlflow"]})
    with pytest.raises(InputError, match=r"^track: mlflow asked for, but a protocol's run\(config\) does not track"):
        run(config)
    plain = config.without_tracking()
    assert plain.track == () and plain.key_dict() == config.key_dict()
    assert plain.given() == {"data": "digits", "method": "ce", "imbalance": 10.0}


def test_untracked_run_is_the_plain_run():
    config = LongtailConfig.from_dict({"data": "digits", "method": "ce", "imbalance": 10})
    calls = []
    assert run_tracked(lambda c, **kw: calls.append(kw) or ["r"], config, store="S", work_dir="W") == ["r"]
    assert calls == [{"store": "S", "work_dir": "W"}]


def _fake_run(config, *, store=None, work_dir=None):
    assert config.track == () and config.track_dir is None  # the protocol's run gets the config without trackers
    for epoch in (1, 2, 1):  # two trainings: 2 epochs, then 1
        epochs.report({"epoch": epoch, "loss": 1.0 / epoch, "train_acc": 0.5, "val_acc": float("nan"), "lr": 0.1})
    points = [{"divergence": d, "accuracy": 0.9 - d, "alpha": 1 - d} for d in (0.0, 0.2, 0.4)]
    return [Record(protocol="longtail", dataset="digits", method="ce", seed=i, split_hash=None,
                   settings={"imbalance": 10.0}, metrics={"auc": 0.5 + i / 10, "points": points}, id=7 + i)
            for i in range(2)]


def test_what_each_tracker_gets(recorder):
    config = LongtailConfig.from_dict({"data": "digits", "method": "ce", "imbalance": 10, "track": ["mlflow"],
                                       "method_options": {}})
    lines = []
    records = run_tracked(_fake_run, config, tags={"x": "y"}, log=lines.append)
    (run,) = recorder.runs
    assert [r.id for r in records] == [7, 8] and run.closed is True
    assert lines == [f"tracked: recorder {run.name}"] and run.name.startswith("longtail-ce-seed0-")
    assert run.tags == {"vistabench.protocol": "longtail", "x": "y", "vistabench.record_ids": "7,8",
                        "vistabench.record_keys": ",".join(record_key(r) for r in records)}
    assert run.params == flat_params(config.to_dict())
    curve = [(step, m["train/loss"], m["train/fit"]) for axis, step, m in run.metrics if axis == "epoch"]
    assert curve == [(0, 1.0, 1.0), (1, 0.5, 1.0), (2, 1.0, 2.0)]
    assert all("train/val_acc" not in m for axis, _, m in run.metrics if axis == "epoch")  # NaN left out
    assert [(step, m) for axis, step, m in run.metrics if axis == "record"] == [(0, {"auc": 0.5}), (1, {"auc": 0.6})]
    assert json.loads(run.files["records.json"])[1]["id"] == 8
    assert json.loads(run.files["config.json"]) == config.to_dict()
    # the long-tail report section of these two records: its page and its figure(s)
    assert "<img" in run.files["report.html"]
    assert run.figures and all(png[:8] == b"\x89PNG\r\n\x1a\n" for _, png in run.figures)


def test_a_failing_run_closes_its_trackers(recorder):
    config = LongtailConfig.from_dict({"data": "digits", "method": "ce", "imbalance": 10, "track": ["mlflow"]})

    def broken(config, *, store=None, work_dir=None):
        epochs.report({"epoch": 1, "loss": 1.0})
        raise InputError("data: broken")

    with pytest.raises(InputError, match="data: broken"):
        run_tracked(broken, config)
    (run,) = recorder.runs
    assert run.closed is False and len(run.metrics) == 1


def test_missing_package_names_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(backends.TOOL_PACKAGES.targets, "mlflow", "vistabench_no_such_package")
    rc = main(["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10", "--track", "mlflow",
               "--no-store"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.strip() == ("vistabench: error: --track: mlflow needs the package vistabench_no_such_package, not "
                           "installed: pip install 'vistabench[track]'")


def test_track_flag_repeats_and_prints(capsys):
    rc = main(["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10", "--track", "mlflow",
               "--track", "tensorboard", "wandb", "--track-dir", "tb", "--print-config", "--json"])
    printed = json.loads(capsys.readouterr().out)
    assert rc == 0 and printed["track"] == ["mlflow", "tensorboard", "wandb"] and printed["track_dir"] == "tb"
    rc = main(["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10", "--track", "mlfow"])
    assert rc == 2 and "did you mean 'mlflow'" in capsys.readouterr().err
    rc = main(["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10", "--track", "mlflow",
               "--track-dir", "tb", "--print-config"])
    assert rc == 2 and capsys.readouterr().err.strip() == (
        "vistabench: error: --track-dir: TensorBoard's log folder, set to 'tb', but the run is not tracked with "
        "tensorboard; add --track tensorboard or drop --track-dir")


def test_export_bad_input(tmp_path, capsys):
    rc = main(["export", "mlflw", "--store", str(tmp_path / "x.sqlite")])  # the positional's choices, one line
    assert rc == 2 and capsys.readouterr().err == (
        "vistabench: error: TRACKER: expected one of mlflow, tensorboard, wandb, got 'mlflw'; did you mean 'mlflow'?\n")
    rc = main(["export", "tensorboard", "--store", str(tmp_path / "x.sqlite")])
    assert rc == 2 and "no such results store" in capsys.readouterr().err
