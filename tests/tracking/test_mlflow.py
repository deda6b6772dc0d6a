"""`--track mlflow` against a real local MLflow server (started and stopped by the fixture), read
back with the MLflow client; `vistabench export mlflow` of a store made in the test."""

import json

import pytest

from vistabench.cli import main

from .conftest import FAST

mlflow = pytest.importorskip("mlflow", reason="mlflow not installed (pip install 'vistabench[track]')")


@pytest.fixture
def client(mlflow_server, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "vistabench-test")
    return MlflowClient(tracking_uri=mlflow_server)


def _runs(client, **tags):
    exp = client.get_experiment_by_name("vistabench-test")
    if exp is None:
        return []
    query = " and ".join(f"tags.`{k}` = '{v}'" for k, v in tags.items()) or ""
    return client.search_runs([exp.experiment_id], filter_string=query)


def test_longtail_run_is_logged_and_reads_back(client, capsys, tmp_path):
    rc = main(["longtail", "run", *FAST, "--track", "mlflow", "--store", str(tmp_path / "r.sqlite"),
               "--out", str(tmp_path / "run")])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "tracked: mlflow run" in captured.err and "🏃" not in captured.out  # MLflow's own print kept off stdout
    from vistabench.store import ResultsStore

    with ResultsStore(tmp_path / "r.sqlite") as s:
        (record,) = s.records(protocol="longtail")
    (run,) = _runs(client, **{"vistabench.record_ids": str(record.id)})
    assert run.info.status == "FINISHED" and run.info.run_name.startswith("longtail-ce-seed0-")
    # the resolved config as parameters (nested options flattened, lists as JSON)
    config = record.settings["config"]
    params = run.data.params
    assert params["method"] == "ce" and params["data"] == "digits" and params["epochs"] == "2"
    assert params["recipe"] == config["recipe"] == "cpu" and params["schedule"] == config["schedule"]
    assert json.loads(params["track"]) == ["mlflow"]
    # the record's scores as metrics, nested ones flattened
    metrics = run.data.metrics
    for key in ("auc", "avg", "std", "balanced", "few"):
        assert metrics[key] == pytest.approx(record.metrics[key])
    assert metrics["exact.auc"] == pytest.approx(record.metrics["exact"]["auc"])
    # the scores' settings (the sweep's seed, points, ...) are parameters, never metrics
    assert not [k for k in metrics if k.startswith(("settings", "scoring"))]
    assert params["scoring.seed"] == str(record.metrics["settings"]["seed"]) and params["scoring.points"] == "3"
    # the per-epoch training curve as steps: one point per epoch, the trainer's values
    history = client.get_metric_history(run.info.run_id, "train/loss")
    assert [m.step for m in history] == [0, 1]
    assert all(m.value > 0 for m in history) and history[1].value < history[0].value * 1.5
    assert [m.value for m in client.get_metric_history(run.info.run_id, "train/fit")] == [1.0, 1.0]
    # the report's figures and the run's files as artifacts
    top = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"figures", "report.html", "records.json", "config.json"} <= top
    figures = [a.path for a in client.list_artifacts(run.info.run_id, "figures")]
    assert figures and all(p.endswith(".png") for p in figures)
    local = client.download_artifacts(run.info.run_id, figures[0], str(tmp_path / "dl"))
    with open(local, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    stored = json.loads(open(client.download_artifacts(run.info.run_id, "records.json", str(tmp_path / "dl"))).read())
    assert stored[0]["id"] == record.id and stored[0]["metrics"]["auc"] == pytest.approx(record.metrics["auc"])
    # exporting the store afterwards does not send the tracked record again
    rc = main(["export", "mlflow", "--store", str(tmp_path / "r.sqlite"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and (out["exported"], out["skipped"]) == (0, 1)


def test_failed_run_is_marked_failed(client, capsys):
    rc = main(["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10", "--epochs", "1",
               "--n-max", "100000", "--no-store", "--track", "mlflow", "--tag", "doomed"])
    assert rc == 2 and "--n-max" in capsys.readouterr().err
    (run,) = [r for r in _runs(client) if r.data.params.get("tag") == "doomed"]
    assert run.info.status == "FAILED"  # the config was logged before the run failed
    assert run.data.params["n_max"] == "100000"


def test_export_store_to_mlflow(client, capsys, tmp_path):
    from vistabench.store import Record, ResultsStore

    with ResultsStore(tmp_path / "e.sqlite") as s:
        ids = [s.add(Record(protocol="longtail", dataset="digits", method=m, seed=1, split_hash="h",
                            settings={"imbalance": 10.0, "config": {"lr": 0.1, "method_options": {}}},
                            metrics={"auc": a, "exact": {"auc": a + 0.01}, "per_class": [0.1, 0.2], "few": None,
                                     "settings": {"seed": 3, "points": 5}}))
               for m, a in (("ce", 0.5), ("ldam", 0.6))]
    rc = main(["export", "mlflow", "--store", str(tmp_path / "e.sqlite"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["exported"] == 2 and out["skipped"] == 0
    for rid, method, auc in zip(ids, ("ce", "ldam"), (0.5, 0.6)):
        (run,) = _runs(client, **{"vistabench.record_id": str(rid), "vistabench.method": method})
        assert run.data.metrics == {"auc": auc, "exact.auc": pytest.approx(auc + 0.01)}  # lists and nulls left out
        assert run.data.params["settings.config.lr"] == "0.1" and run.data.params["method"] == method
        assert run.data.params["settings.config.method_options"] == "{}"
        assert (run.data.params["scoring.seed"], run.data.params["scoring.points"]) == ("3", "5")  # not metrics
        assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"records.json"}
    # again: nothing new to send
    rc = main(["export", "mlflow", "--store", str(tmp_path / "e.sqlite"), "--json"])
    again = json.loads(capsys.readouterr().out)
    assert rc == 0 and again["exported"] == 0 and again["skipped"] == 2


def test_no_server_is_one_line_within_seconds(monkeypatch, capsys):
    import time

    from .conftest import _free_port

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{_free_port()}")  # nothing listens there
    t0 = time.perf_counter()
    rc = main(["longtail", "run", *FAST, "--track", "mlflow", "--no-store"])
    err = capsys.readouterr().err
    assert rc == 2 and time.perf_counter() - t0 < 30  # before any training; MLflow alone retries for minutes
    assert err.startswith("vistabench: error: --track: mlflow: no tracking server answers at http://127.0.0.1:")
    assert len(err.strip().splitlines()) == 1


def test_longtail_score_is_tracked(client, capsys, tmp_path):
    """`longtail score --track mlflow`: the options and the record's settings as params, only the scores
    as metrics; a later export knows the record was sent."""
    import numpy as np

    from vistabench.data import save_predictions
    from vistabench.store import ResultsStore
    from vistabench.tracking.session import record_key

    rng = np.random.default_rng(0)
    save_predictions(tmp_path / "pred.npz", labels=np.repeat(np.arange(4), 30), logits=rng.normal(size=(120, 4)))
    (tmp_path / "counts.json").write_text(json.dumps([200, 60, 20, 6]))
    assert main(["longtail", "sweep", "--labels", str(tmp_path / "pred.npz"), "--train-counts",
                 str(tmp_path / "counts.json"), "--test-imbalance", "10", "--points", "3", "--repeats", "2",
                 "--seed", "4", "--out", str(tmp_path / "sweep.json")]) == 0
    capsys.readouterr()
    store = tmp_path / "s.sqlite"
    rc = main(["longtail", "score", "--predictions", str(tmp_path / "pred.npz"), "--sweep", str(tmp_path / "sweep.json"),
               "--method", "mine", "--store", str(store), "--track", "mlflow", "--json"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    result = json.loads(captured.out)
    with ResultsStore(store) as s:
        (record,) = s.records()
    (run,) = _runs(client, **{"vistabench.record_keys": record_key(record)})
    assert run.info.status == "FINISHED" and run.info.run_name.startswith("longtail-score-mine-")
    assert run.data.tags["vistabench.command"] == "longtail score"
    params, metrics = run.data.params, run.data.metrics
    assert params["method"] == "mine" and params["sweep"] == str(tmp_path / "sweep.json") and "track" not in params
    assert params["settings.points"] == "3" and params["scoring.seed"] == "4"  # settings: params
    assert not [k for k in metrics if k.startswith(("settings", "scoring"))]  # only scores are metrics
    assert metrics["auc"] == pytest.approx(result["auc"]) and metrics["exact.auc"] == pytest.approx(result["exact"]["auc"])
    rc = main(["export", "mlflow", "--store", str(store), "--json"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["skipped"] == 1
