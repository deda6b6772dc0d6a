"""End to end on sklearn digits: split -> train -> predictions -> sweep -> score -> store; re-scoring
the written files with the CLI reproduces the stored numbers."""

import json


from vistabench.cli import main
from vistabench.metrics.longtail import training_profile
from vistabench.store import ResultsStore


def test_run_then_rescore_from_files(tmp_path, capsys):
    rc = main(["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10", "--epochs", "1",
               "--points", "4", "--repeats", "2", "--out", str(tmp_path / "run"), "--store",
               str(tmp_path / "r.sqlite"), "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    rec = json.loads(out)
    assert rec["protocol"] == "longtail" and rec["settings"]["model"] == "cnn28"
    counts = rec["settings"]["train_counts"]
    assert counts == training_profile(10, n_max=counts[0], imbalance=10).tolist()
    for f in ("split.json", "sweep.json", "predictions.npz"):
        assert (tmp_path / "run" / f).is_file()
    rc = main(["longtail", "score", "--predictions", str(tmp_path / "run" / "predictions.npz"), "--sweep",
               str(tmp_path / "run" / "sweep.json"), "--json"])
    again = json.loads(capsys.readouterr().out)
    for k in ("auc", "avg", "std", "balanced", "few"):
        assert again[k] == rec["metrics"][k]
    with ResultsStore(tmp_path / "r.sqlite") as s:
        assert [r.method for r in s.records(protocol="longtail")] == ["ce"]
    rc = main(["table", "--protocol", "longtail", "--store", str(tmp_path / "r.sqlite"), "--format", "csv"])
    assert rc == 0 and capsys.readouterr().out.startswith("method,n,auc,auc_sd,avg,avg_sd")


def test_run_bad_inputs(tmp_path, capsys):
    rc = main(["longtail", "run", "--data", "digits", "--method", "cee", "--imbalance", "10", "--epochs", "1",
               "--store", str(tmp_path / "r.sqlite")])
    err = capsys.readouterr().err
    assert rc == 2 and "did you mean 'ce'" in err
    rc = main(["longtail", "run", "--data", "nope", "--method", "ce", "--imbalance", "10",
               "--store", str(tmp_path / "r.sqlite")])
    assert rc == 2 and "unknown dataset 'nope'" in capsys.readouterr().err
    rc = main(["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10", "--device", "cuda",
               "--store", str(tmp_path / "r.sqlite")])
    err = capsys.readouterr().err
    assert rc == 2 and "cuda" in err and err.count("\n") == 1
