"""`vistabench stream ...`: run, resume, report --json contract, errors (exit 2), and the report section."""

import json

import pytest

from vistabench.cli import main

TINY = {"name": "tiny", "meta_test_from_year": 2001, "input": {"image_size": 8, "channels": 1}, "tasks": [
    {"name": "a", "year": 2000, "domain": "scan", "kind": "multiclass",
     "source": {"embedded": "digits", "classes": [0, 1], "n_train": 40, "n_test": 20}},
    {"name": "b", "year": 2001, "domain": "scan", "kind": "multiclass",
     "source": {"embedded": "digits", "classes": [2, 3], "n_train": 40, "n_test": 20}},
    {"name": "a", "year": 2002, "domain": "scan", "kind": "multiclass",
     "source": {"embedded": "digits", "classes": [0, 1], "n_train": 40, "n_test": 20}}]}


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_run_resume_and_report_json(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(TINY))
    common = ["--stream", str(f), "--trials", "1", "--steps", "4", "--width", "4", "--threads", "1",
              "--store", str(tmp_path / "r.sqlite"), "--work-dir", str(tmp_path / "w"), "--json"]
    code, out, _ = _run(capsys, "stream", "run", "--learner", "indep", "--max-tasks", "1", *common)
    first = json.loads(out)  # one task: one record
    assert code == 0 and first["metrics"]["task_index"] == 0 and first["run_id"].startswith("tiny-indep-t1-s4-seed0-")
    code, out, _ = _run(capsys, "stream", "run", "--learner", "indep", *common)
    res = json.loads(out)["records"]
    # resumed: task 0 is the stored record of the first call, tasks 1-2 are new
    assert code == 0 and [r["metrics"]["task_index"] for r in res] == [0, 1, 2] and res[0]["id"] == first["id"]
    assert all(r["id"] is not None for r in res)
    code, out, _ = _run(capsys, "stream", "run", "--learner", "ft-prev", *common)
    assert code == 0
    code, out, _ = _run(capsys, "stream", "report", "--store", str(tmp_path / "r.sqlite"), "--json",
                        "--plot", str(tmp_path / "p.png"))
    rep = json.loads(out)
    assert code == 0 and set(rep) >= {"runs", "regret", "forward_transfer"}
    for r in rep["runs"]:
        assert set(r) >= {"run", "learner", "avg_error", "cflop", "pareto"}
    # the run ids carry a hash of the settings beyond the classic ones (here --width 4)
    ft_run = first["run_id"].replace("-indep-", "-ft-prev-")
    assert rep["regret"][ft_run]["reference"] == first["run_id"]
    assert "a" in rep["forward_transfer"][ft_run]["tasks"]
    assert (tmp_path / "p.png").stat().st_size > 0
    code, out, _ = _run(capsys, "stream", "report", ft_run, "--store", str(tmp_path / "r.sqlite"))
    assert code == 0 and "ft-prev" in out and "forward transfer" in out

    from vistabench.report import build_report
    from vistabench.store import ResultsStore

    with ResultsStore(tmp_path / "r.sqlite") as st:
        html = build_report(st, tmp_path / "rep").read_text()
    assert "Never-ending task streams" in html and "data:image/png;base64" in html and "beat" in html


@pytest.mark.parametrize("argv, message", [
    (["stream", "run", "--stream", "embedded", "--learner", "ft_d"], "did you mean 'ft-d'"),
    (["stream", "run", "--stream", "nevis-short", "--learner", "indep", "--data-root", "/nonexistent"], "no such folder"),
    (["stream", "run", "--stream", "nope.json", "--learner", "indep"], "no such file"),
    (["stream", "run", "--stream", "embedded", "--learner", "indep", "--steps", "0"], "--steps"),
    (["stream", "run", "--stream", "embedded", "--learner", "pt"], "needs a checkpoint"),
    (["stream", "report", "--store", "/nonexistent.sqlite"], "no such results store"),
    (["stream", "run", "--stream", "nevis-full", "--learner", "indep", "--meta-test-from", "later"], "--meta-test-from"),
    (["stream", "run", "--stream", "embedded", "--learner", "mt", "--meta-test-from", "dm-nevis"], "--meta-test-from"),
    (["stream", "pretrain", "--stream", "embedded", "--out", "x.pt", "--steps", "0"], "--steps"),
    (["stream", "pretrain", "--stream", "embedded", "--out", "x.pt", "--meta-test-from", "1990"], "no meta-train task"),
])
def test_errors_are_one_line_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, *argv)
    assert code == 2 and message in err and err.count("\n") == 1


def test_missing_nevis_data_names_the_data_root(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(capsys, "stream", "run", "--stream", "nevis-short", "--learner", "indep", "--max-tasks", "1")
    assert code == 2 and "--data-root" in err and "coil100" in err


def test_pretrain_then_pt_prints_cut_and_cflop_parts(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(TINY))
    code, out, _ = _run(capsys, "stream", "pretrain", "--stream", str(f), "--out", str(tmp_path / "pt.pt"),
                        "--steps", "3", "--width", "4", "--json")
    rep = json.loads(out)
    assert code == 0 and rep["flops"] > 0 and len(rep["tasks"]) == 1 and (tmp_path / "pt.pt.json").is_file()
    code, out, _ = _run(capsys, "stream", "run", "--stream", str(f), "--learner", "pt", "--checkpoint",
                        str(tmp_path / "pt.pt"), "--trials", "1", "--steps", "2", "--width", "4", "--meta-test-from",
                        "2002", "--store", str(tmp_path / "r.sqlite"), "--work-dir", str(tmp_path / "w"))
    assert code == 0 and "meta-test from 2002: 2 meta-train, 1 meta-test tasks run of 3" in out
    assert "= training" in out and "selection/validation forwards" in out


def test_list_and_show(capsys):
    code, out, _ = _run(capsys, "stream", "list", "--json")
    assert {"mt", "bhpo", "pt"} <= set(json.loads(out)["learners"])
    assert code == 0 and {s["name"] for s in json.loads(out)["streams"]} == {"embedded", "nevis-full", "nevis-full-paper", "nevis-short"}
    code, out, _ = _run(capsys, "stream", "show", "nevis-full")
    assert code == 0 and "106 tasks" in out and "ImageNet" in out


def test_print_config_then_config_gives_the_same_record_settings(tmp_path, capsys):
    """The printed config is a loadable --config; running from it stores what the flags store."""
    flags = ["--stream", "embedded", "--learner", "ft-d", "--trials", "1", "--steps", "4", "--width", "2",
             "--max-tasks", "2", "--learner-opt", "knn_k=3", "--recipe", "dm-nevis", "--arch", "cnn28"]
    code, out, _ = _run(capsys, "stream", "run", *flags, "--print-config")
    assert code == 0 and "batch_size_rule: 0.0025n" in out
    (tmp_path / "c.yaml").write_text(out)
    code, out, _ = _run(capsys, "stream", "run", *flags, "--no-store", "--out", str(tmp_path / "a"), "--json")
    by_flags = json.loads(out)["records"]
    code2, out, _ = _run(capsys, "stream", "run", "--config", str(tmp_path / "c.yaml"), "--no-store",
                         "--out", str(tmp_path / "b"), "--json")
    by_file = json.loads(out)["records"]
    assert code == code2 == 0
    assert [r["settings"] for r in by_flags] == [r["settings"] for r in by_file]
    assert by_flags[0]["settings"]["recipe"] == "dm-nevis" and by_flags[0]["settings"]["knn_k"] == 3
    assert [r["metrics"]["error"] for r in by_flags] == [r["metrics"]["error"] for r in by_file]
