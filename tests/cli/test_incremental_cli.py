"""`vistabench incremental ...`: the JSON contract, --compat, predictions, one-line errors, report."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vistabench.cli import main
from vistabench.data import save_predictions
from vistabench.protocols.incremental import runner as P


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def acc_json(tmp_path):
    path = tmp_path / "acc.json"
    path.write_text(json.dumps({"matrix": [[0.8], [0.75, 0.3], [0.7, 0.25, 0.4]]}))
    return path


def test_score_matrix_json_contract(capsys, acc_json) -> None:
    rc, out, err = run_cli(capsys, "incremental", "score", "--matrix", str(acc_json),
                           "--base-classes", "60", "--way", "5", "--json")
    assert rc == 0 and err == ""
    r = json.loads(out)
    assert set(r) >= {"aacc", "lacc", "tacc", "gacc", "pd", "kr", "sessions", "curve"}
    assert [set(s) >= {"aacc", "tacc", "gacc"} for s in r["sessions"]] == [True] * 3
    assert len(r["curve"]) == 101 and set(r["curve"][0]) == {"alpha", "gacc"}
    # hand-worked: aAcc_2 = (60*0.75 + 5*0.3)/65, tAcc_3 = (0.7+0.25+0.4)/3, PD = 0.8 - 0.7
    assert r["sessions"][1]["aacc"] == pytest.approx((60 * 0.75 + 5 * 0.3) / 65)
    assert r["sessions"][2]["tacc"] == pytest.approx(0.45)
    assert r["pd"] == pytest.approx(0.1) and r["kr"] == pytest.approx(0.875)
    assert r["sessions"][0]["novel_acc"] is None  # NaN -> null


def test_score_matrix_compat_and_human(capsys, acc_json) -> None:
    rc, out, _ = run_cli(capsys, "incremental", "score", "--matrix", str(acc_json),
                         "--base-classes", "60", "--way", "5", "--compat", "--json")
    r = json.loads(out)
    assert rc == 0 and r["settings"]["mode"] == "compat" and len(r["curve"]) == 13
    rc, out, _ = run_cli(capsys, "incremental", "score", "--matrix", str(acc_json), "--base-classes", "60", "--way", "5")
    assert rc == 0 and "gAcc" in out and "session" in out


@pytest.mark.parametrize("matrix,match", [
    ([[0.8], [0.75, 0.3, 0.1]], "row 2 has 3 entries, expected 2"),
    ([[80], [75, 30]], "these look like percentages: divide by 100"),
    ([[0.8], [1.2, 0.3]], r"fractions in \[0, 1\], found 1.2"),
])
def test_score_matrix_bad_input_one_line(capsys, tmp_path, matrix, match) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"matrix": matrix}))
    rc, out, err = run_cli(capsys, "incremental", "score", "--matrix", str(path), "--base-classes", "60", "--way", "5")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("vistabench: error: ")
    import re

    assert re.search(match, err)


def test_score_matrix_missing_options_and_files(capsys, tmp_path, acc_json) -> None:
    rc, _, err = run_cli(capsys, "incremental", "score", "--matrix", str(acc_json))
    assert rc == 2 and "--base-classes: a --matrix needs --base-classes and --way" in err
    rc, _, err = run_cli(capsys, "incremental", "score", "--matrix", str(acc_json), "--sessions", "s.json")
    assert rc == 2 and "--sessions: goes with --predictions; with --matrix give --base-classes and --way" in err
    rc, _, err = run_cli(capsys, "incremental", "score", "--predictions", "p.npz", "--sessions", "s.json",
                         "--way", "2")
    assert rc == 2 and "--way: goes with --matrix; with --predictions the sessions give the layout" in err
    rc, _, err = run_cli(capsys, "incremental", "score", "--matrix", str(tmp_path / "nope.json"),
                         "--base-classes", "6", "--way", "1")
    assert rc == 2 and "no such file" in err
    (tmp_path / "list.json").write_text("[[0.5]]")
    rc, _, err = run_cli(capsys, "incremental", "score", "--matrix", str(tmp_path / "list.json"),
                         "--base-classes", "6", "--way", "1")
    assert rc == 2 and "'matrix' key" in err


def test_sessions_score_predictions_record_and_table(capsys, tmp_path) -> None:
    out_s = tmp_path / "sessions.json"
    rc, out, _ = run_cli(capsys, "incremental", "sessions", "--data", "digits", "--base-classes", "6",
                         "--way", "2", "--shot", "5", "--seed", "3", "--out", str(out_s), "--json")
    r = json.loads(out)
    assert rc == 0 and r["session_sizes"] == [6, 2, 2] and r["train_sizes"][1:] == [10, 10]
    sessions = P.load_sessions(out_s)
    rng = np.random.default_rng(0)
    files = []
    for i in range(1, 4):
        _, lab = P.session_test_pool(sessions, i)
        logits = rng.normal(size=(len(lab), 10))
        logits[np.arange(len(lab)), lab] += 1.5
        files.append(str(tmp_path / f"s{i}.npz"))
        save_predictions(files[-1], labels=lab, logits=logits)
    store = tmp_path / "r.sqlite"
    rc, out, err = run_cli(capsys, "incremental", "score", "--predictions", *files, "--sessions", str(out_s),
                           "--method", "noisy-oracle", "--dataset", "digits", "--store", str(store),
                           "--plot", str(tmp_path / "g.png"), "--json")
    assert rc == 0, err
    r = json.loads(out)
    direct = P.score_prediction_files(files, sessions)
    assert r["gacc"] == pytest.approx(direct.gacc) and r["record_id"] == 1
    assert (tmp_path / "g.png").stat().st_size > 1000
    rc, out, _ = run_cli(capsys, "table", "--protocol", "incremental", "--store", str(store))
    assert rc == 0 and "noisy-oracle" in out and "Lazy (ref.)" in out
    # wrong number of files: one line
    rc, _, err = run_cli(capsys, "incremental", "score", "--predictions", *files[:2], "--sessions", str(out_s))
    assert rc == 2 and "3 sessions, got 2 predictions files" in err and err.count("\n") == 1


def test_sessions_errors_one_line(capsys, tmp_path) -> None:
    rc, _, err = run_cli(capsys, "incremental", "sessions", "--data", "digits", "--base-classes", "6",
                         "--way", "2", "--shot", "500", "--out", str(tmp_path / "s.json"))
    assert rc == 2 and err.count("\n") == 1 and "500 shots requested but class 6" in err
    rc, _, err = run_cli(capsys, "incremental", "sessions", "--data", "digits", "--preset", "cifar100",
                         "--out", str(tmp_path / "s.json"))
    assert rc == 2 and "expects 100 classes" in err
    rc, _, err = run_cli(capsys, "incremental", "sessions", "--data", "digits", "--way", "2",
                         "--out", str(tmp_path / "s.json"))
    assert rc == 2 and "--preset: give a preset or all of base_classes, way, shot (missing base_classes, shot)" in err
    bad = tmp_path / "overlap.json"
    bad.write_text(json.dumps({"kind": "incremental-sessions", "classes": [[0, 1], [1, 2]]}))
    npz = tmp_path / "p.npz"
    save_predictions(npz, labels=[0, 1], pred=[0, 1])
    rc, _, err = run_cli(capsys, "incremental", "score", "--predictions", str(npz), str(npz), "--sessions", str(bad))
    assert rc == 2 and "class 1 is in session 1 and session 2" in err and err.count("\n") == 1


def test_reference_command(capsys) -> None:
    rc, out, _ = run_cli(capsys, "incremental", "reference", "--preset", "mini_imagenet", "--json")
    r = json.loads(out)
    assert rc == 0 and set(r) == {"Lazy", "Greedy", "Greedy-NF"}
    assert r["Lazy"]["aacc"] == pytest.approx(np.mean([51 / (60 + 5 * i) for i in range(9)]))
    assert r["Lazy"]["pd"] == 0 and r["Lazy"]["kr"] == 1


def test_run_command(capsys, tmp_path) -> None:
    rc, out, err = run_cli(capsys, "incremental", "run", "--data", "digits", "--base-classes", "8", "--way", "1",
                           "--shot", "3", "--base-shot", "30", "--method", "prototype", "--epochs", "1",
                           "--out", str(tmp_path / "run"), "--store", str(tmp_path / "r.sqlite"), "--json")
    assert rc == 0, err
    r = json.loads(out)  # the stored record
    assert r["id"] == 1 and r["protocol"] == "incremental" and len(r["metrics"]["sessions"]) == 3
    assert (tmp_path / "run" / "sessions.json").is_file()
    assert len(list((tmp_path / "run").glob("session_*.npz"))) == 3
    rc, out, _ = run_cli(capsys, "incremental", "run", "--data", "digits", "--base-classes", "8", "--way", "1",
                         "--shot", "3", "--base-shot", "30", "--method", "prototype", "--epochs", "1",
                         "--out", str(tmp_path / "run2"), "--no-store")
    assert rc == 0 and "gAcc" in out and "stored as record" not in out
    rc, _, err = run_cli(capsys, "incremental", "run", "--data", "digits", "--sessions",
                         str(tmp_path / "run" / "sessions.json"), "--method", "protoype")
    assert rc == 2 and "did you mean 'prototype'" in err


def test_help_texts(capsys) -> None:
    for argv in (["incremental", "--help"], ["incremental", "score", "--help"], ["incremental", "run", "--help"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 0
        assert "usage:" in capsys.readouterr().out


def test_run_fr_command_stores_settings(capsys, tmp_path) -> None:
    from vistabench.store import ResultsStore

    store = tmp_path / "r.sqlite"
    rc, out, err = run_cli(capsys, "incremental", "run", "--data", "digits", "--base-classes", "8", "--way", "1",
                           "--shot", "3", "--base-shot", "30", "--method", "fr", "--epochs", "1",
                           "--model-opt", "dim=16", "--model-opt", "depth=3", "--model-opt", "heads=2",
                           "--fr-epochs", "2", "--fr-weights", "cr=0.5", "--out", str(tmp_path / "run"),
                           "--store", str(store), "--json")
    assert rc == 0, err
    r = json.loads(out)
    assert len(r["metrics"]["sessions"]) == 3 and 0 <= r["metrics"]["gacc"] <= 1
    with ResultsStore(store) as s:
        (rec,) = s.records(protocol="incremental")
    assert rec.method == "fr" and rec.settings["model"] == "vit_small"
    # no --model: the method's default ViT shape, updated by --model-opt
    assert rec.settings["model_options"] == {"dim": 16, "depth": 3, "heads": 2}
    fr = rec.settings["fr"]
    assert fr["epochs_fr"] == 2 and fr["cr"] == 0.5 and fr["cos"] == 0.1 and fr["layers"] == [0, 1] and fr["hidden"] == 128


@pytest.mark.parametrize("extra,match", [
    (["--method", "fr", "--fr-weights", "kl=1"], "--fr-weights: unknown loss 'kl'"),
    (["--method", "fr", "--fr-weights", "cr"], "--fr-weights: expected KEY=VALUE"),
    (["--method", "fr", "--fr-epochs", "0"], "--fr-epochs"),
    (["--method", "prototype", "--fr-epochs", "3"], "--fr-epochs: goes with method fr"),
    (["--method", "fr", "--model-opt", "dim"], "--model-opt: expected KEY=VALUE"),
    (["--method", "fr", "--model", "cnn28"], "needs a ViT"),
    (["--method", "fr", "--model-opt", "dim=abc"], "--model-opt: dim: expected an integer"),
    (["--method", "fr", "--model-opt", "dims=8"], "--model-opt: dims: not an option of model 'vit_small'"),
    (["--method", "fr", "--model-opt", "patch_size=16"], "--model-opt: patch_size: 16 is larger than the 8-pixel"),
    (["--method", "fr", "--method-opt", "layers=9"], "method_options.layers: expected intermediate blocks 0..4"),
    (["--method", "fr", "--method-opt", "cr=x"], "method_options.cr: expected a number"),
    (["--method", "fr", "--method-opt", "kl=1"], "method_options.kl: unknown option"),
    (["--method", "fr", "--fr-epochs", "3", "--method-opt", "epochs_fr=4"], "--fr-epochs: says epochs_fr=3"),
    (["--method", "fr", "--fr-epochs", "3", "--method-opt", "epochs=4"], "--fr-epochs: says epochs_fr=3"),  # older name
    (["--method", "fr", "--method-opt", "epochs=3", "--method-opt", "epochs_fr=4"],
     "method_options.epochs_fr: given as epochs_fr=4 and under its older name epochs=3; keep one"),
    (["--method", "prototype", "--schedule", "step"], "--lr-milestones: the step schedule needs"),
    (["--method", "prototype", "--lr-milestones", "2"], "--lr-milestones: only the step schedule uses milestones"),
    (["--method", "prototype", "--warmup-epochs", "1"], "--warmup-epochs: expected fewer than epochs=1"),
])
def test_run_fr_bad_options_one_line(capsys, tmp_path, extra, match) -> None:
    try:
        rc, _, err = run_cli(capsys, "incremental", "run", "--data", "digits", "--base-classes", "8", "--way", "1",
                             "--shot", "3", "--base-shot", "10", "--epochs", "1", "--out", str(tmp_path / "run"),
                             "--store", str(tmp_path / "r.sqlite"), *extra)
    except SystemExit as exc:  # argparse's own errors (KEY=VALUE syntax)
        rc, err = exc.code, capsys.readouterr().err
    assert rc == 2 and match in err and len(err.strip().splitlines()) == 1, err
