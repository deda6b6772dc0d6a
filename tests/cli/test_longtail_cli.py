"""The longtail command-line contract, through vistabench.cli.main."""

import json

import numpy as np
import pytest

from vistabench.cli import main
from vistabench.data import save_predictions


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_profile_json(capsys):
    rc, out, _ = run(capsys, "longtail", "profile", "--classes", "10", "--n-max", "5000", "--imbalance", "100", "--json")
    assert rc == 0 and json.loads(out) == [5000, 2997, 1796, 1077, 645, 387, 232, 139, 83, 50]


def test_profile_reciprocal_says_so_on_stderr(capsys):
    rc, out, err = run(capsys, "longtail", "profile", "--classes", "10", "--n-max", "5000", "--imbalance", "0.01", "--json")
    assert rc == 0 and json.loads(out)[-1] == 50
    assert err.strip() == "vistabench: warning: imbalance=0.01 < 1 read as the paper's reciprocal notation: rho = 100"


@pytest.mark.parametrize("rho", ["0", "-3"])
def test_profile_bad_rho_one_line(capsys, rho):
    rc, out, err = run(capsys, "longtail", "profile", "--classes", "10", "--n-max", "50", "--imbalance", rho)
    assert rc == 2 and err.count("\n") == 1 and "imbalance" in err and "Traceback" not in err


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(4), 30)[rng.permutation(120)]
    logits = rng.normal(size=(120, 4))
    logits[np.arange(120), labels] += 1.5
    save_predictions(tmp_path / "pred.npz", labels=labels, logits=logits)
    (tmp_path / "counts.json").write_text(json.dumps([200, 60, 20, 6]))
    return tmp_path


def test_sweep_then_score(capsys, files):
    rc, out, err = run(capsys, "longtail", "sweep", "--labels", str(files / "pred.npz"), "--train-counts",
                       str(files / "counts.json"), "--test-imbalance", "10", "--points", "4", "--repeats", "3",
                       "--seed", "1", "--out", str(files / "sweep.json"), "--json")
    assert rc == 0, err
    sweep = json.loads((files / "sweep.json").read_text())
    assert set(sweep) == {"kind", "version", "seed", "num_classes", "train_counts", "test_imbalance", "n_max",
                          "repeats", "pool_size", "points", "sha256"}
    for extra in ([], ["--exact"]):
        rc, out, err = run(capsys, "longtail", "score", "--predictions", str(files / "pred.npz"), "--sweep",
                           str(files / "sweep.json"), "--json", *extra)
        assert rc == 0, err
        r = json.loads(out)
        for k in ("auc", "avg", "std", "max", "min", "drop_ratio", "balanced", "many", "medium", "few"):
            assert k in r
            assert r[k] is None or 0 <= r[k] <= 1
        assert r["medium"] == pytest.approx((r["per_class"][1] + r["per_class"][2]) / 2)  # counts 60, 20
        assert r["many"] == pytest.approx(r["per_class"][0]) and r["few"] == pytest.approx(r["per_class"][3])
    assert len(r["points"]) == 4 and set(r["points"][0]) == {"alpha", "divergence", "accuracy"}
    rc, out, _ = run(capsys, "longtail", "score", "--predictions", str(files / "pred.npz"), "--sweep",
                     str(files / "sweep.json"))
    assert rc == 0 and "AUC=" in out and "point" in out


def test_score_null_when_no_many_class(capsys, files):
    (files / "counts.json").write_text(json.dumps([90, 60, 20, 6]))
    run(capsys, "longtail", "sweep", "--labels", str(files / "pred.npz"), "--train-counts", str(files / "counts.json"),
        "--test-imbalance", "10", "--out", str(files / "s.json"))
    rc, out, _ = run(capsys, "longtail", "score", "--predictions", str(files / "pred.npz"), "--sweep",
                     str(files / "s.json"), "--json")
    assert rc == 0 and json.loads(out)["many"] is None
    assert "NaN" not in out


def test_score_errors_are_one_line(capsys, files):
    run(capsys, "longtail", "sweep", "--labels", str(files / "pred.npz"), "--train-counts", str(files / "counts.json"),
        "--test-imbalance", "10", "--out", str(files / "s.json"))
    # predictions of another length
    save_predictions(files / "short.npz", labels=np.arange(4), pred=np.arange(4))
    cases = [
        (["--predictions", str(files / "short.npz"), "--sweep", str(files / "s.json")], "length differs"),
        (["--predictions", str(files / "nope.npz"), "--sweep", str(files / "s.json")], "no such file"),
        (["--predictions", str(files / "pred.npz"), "--sweep", str(files / "nope.json")], "no such file"),
    ]
    s = json.loads((files / "s.json").read_text())
    s["test_imbalance"] = 3.0
    (files / "tampered.json").write_text(json.dumps(s))
    cases.append((["--predictions", str(files / "pred.npz"), "--sweep", str(files / "tampered.json")], "sha256 mismatch"))
    np.savez(files / "nan.npz", labels=np.zeros(3, int), logits=np.array([[np.nan, 1], [0, 1], [0, 1]]))
    cases.append((["--predictions", str(files / "nan.npz"), "--sweep", str(files / "s.json")], "NaN"))
    for argv, msg in cases:
        rc, out, err = run(capsys, "longtail", "score", *argv)
        assert rc == 2 and msg in err and err.count("\n") == 1, (argv, err)


def test_sweep_bad_counts_file(capsys, files):
    (files / "bad.json").write_text("[1, 2,")
    rc, _, err = run(capsys, "longtail", "sweep", "--labels", str(files / "pred.npz"), "--train-counts",
                     str(files / "bad.json"), "--test-imbalance", "10", "--out", str(files / "x.json"))
    assert rc == 2 and "malformed JSON" in err
    (files / "wrong.json").write_text("[1, 2]")
    rc, _, err = run(capsys, "longtail", "sweep", "--labels", str(files / "pred.npz"), "--train-counts",
                     str(files / "wrong.json"), "--test-imbalance", "10", "--out", str(files / "x.json"))
    assert rc == 2 and "labels must be < num_classes=2" in err


def test_help_teaches(capsys):
    with pytest.raises(SystemExit):
        main(["longtail", "--help"])
    out = capsys.readouterr().out
    assert "sweep" in out and "score" in out and "0.01 is read as 100" in out
