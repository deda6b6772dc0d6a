"""The protocol end to end on sklearn digits (tiny budget), the tables and the CLI contract."""

import json

import numpy as np
import pytest
from scipy import stats as sps

from vistabench.cli import main
from vistabench.report import build_report
from vistabench.report.smalldata import accuracy_table, cost_table
from vistabench.store import Record, ResultsStore

TINY = ["--dataset", "digits", "--per-class", "20", "--split", "0", "--epochs", "2", "--trials", "3",
        "--grace-period", "1", "--batch-sizes", "10", "--sampler", "random", "--threads", "1"]


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _resumed(out: str) -> int:
    """Trials a `tune --json` found done in its study (the one tune record it printed)."""
    return json.loads(out)["settings"]["search"]["resumed_trials"]


def test_run_tune_final_records_and_table(tmp_path, capsys):
    store, work = tmp_path / "r.sqlite", tmp_path / "work"
    common = [*TINY, "--store", store, "--work-dir", work]
    rc, out, err = run(capsys, "smalldata", "run", "--method", "ce", "--repeats", "2", "--json", *common)
    assert rc == 0, err
    printed = json.loads(out)["records"]
    assert [r["kind"] for r in printed] == ["tune", "final", "final"] and len({r["run_id"] for r in printed}) == 1
    search_printed = printed[0]["settings"]["search"]
    sp = {"best_config": search_printed["best_config"], "best_val": search_printed["best_value"]}
    assert printed[0]["metrics"]["trials"] == 3 and sp["best_config"]["batch_size"] == 10
    with ResultsStore(store) as s:
        tune_recs = s.records(protocol="smalldata", kind="tune")
        finals = s.records(protocol="smalldata", kind="final")
    assert len(tune_recs) == 1 and len(finals) == 2
    search = tune_recs[0].settings["search"]
    assert len(search["trials"]) == 3 and all(len(t["curve"]) == t["epochs"] >= 1 for t in search["trials"])
    assert tune_recs[0].metrics["best_val_score"] == search["best_value"] == sp["best_val"]
    # gem's rules by default, re-derived from the stored curves: score = mean of the last 5 epochs'
    # plain val accuracy, best among all trials (stopped or not), first trial on a tie
    st = search["settings"]
    assert (st["reduction_factor"], st["sampler"], st["score_window"], st["select"]) == (2, "random", 5, "all")
    assert tune_recs[0].settings["val_metric"] == "accuracy" and tune_recs[0].settings["recipe"] == "gem"
    gem = [float(np.mean(t["curve"][-5:])) for t in search["trials"]]
    assert search["best_value"] == pytest.approx(max(gem)) and search["best_trial"] == int(np.argmax(gem))
    n_val = 10 * 8  # --per-class 20 keeps gem's 30/20 share: 12 train + 8 val per class
    assert all(abs(v * n_val - round(v * n_val)) < 1e-9 for t in search["trials"] for v in t["curve"])
    for r in finals:
        assert r.settings["config"] == sp["best_config"] and r.settings["test"] == "test"
        assert 0 <= r.metrics["balanced_accuracy"] <= 1 and r.metrics["images_per_second"] > 0
        assert r.split_hash == tune_recs[0].split_hash
    assert [r.seed for r in finals] == [0, 1]
    # the search is stored: `final` reuses it without new trials, `tune` resumes with nothing to do
    rc, out, err = run(capsys, "smalldata", "tune", "--method", "ce", "--json", *common)
    assert rc == 0 and _resumed(out) == 3
    # untuned baseline: no search, the data-rich defaults
    rc, out, err = run(capsys, "smalldata", "final", "--method", "ce_untuned", "--repeats", "2", "--json", *common)
    assert rc == 0, err
    cfg = json.loads(out)["records"][0]["settings"]["config"]
    assert cfg == {"lr": 0.1, "weight_decay": 1e-4, "batch_size": 10}
    rc, out, _ = run(capsys, "smalldata", "table", "--store", store, "--json")
    t = json.loads(out)
    assert [r["method"] for r in t["rows"]] == ["ce", "ce_untuned"] and t["columns"] == ["digits", "average"]
    rc, out, _ = run(capsys, "smalldata", "table", "--store", store, "--format", "latex")
    assert rc == 0 and "\\textbf{" in out
    rc, out, _ = run(capsys, "smalldata", "table", "--store", store, "--cost")
    assert rc == 0 and "Images/s" in out
    html = build_report(ResultsStore(store), tmp_path / "rep").read_text()
    assert "Small datasets" in html and "data:image/png" in html


def test_cli_errors_are_one_line(tmp_path, capsys):
    base = ["--store", tmp_path / "r.sqlite", "--work-dir", tmp_path / "w"]
    rc, _, err = run(capsys, "smalldata", "final", "--method", "cosine", *TINY, *base)
    assert rc == 2 and err.count("\n") == 1 and "no search for 'cosine'" in err
    rc, _, err = run(capsys, "smalldata", "tune", "--method", "ce", *TINY[:-10], "--trials", "2", "--epochs", "1",
                     "--batch-sizes", "200", *base)
    assert rc == 2 and err.count("\n") == 1 and "batch_size: 200 is larger than the 120 images of train0" in err
    rc, _, err = run(capsys, "smalldata", "run", "--method", "harmonc", *TINY, *base)
    assert rc == 2 and "did you mean 'harmonic'" in err and err.count("\n") == 1
    rc, _, err = run(capsys, "smalldata", "table", "--store", tmp_path / "none.sqlite")
    assert rc == 2 and "no such results store" in err


def _add(store, dataset, method, scores, ips=100.0, mem=1e9):
    for i, v in enumerate(scores):
        store.add(Record(protocol="smalldata", dataset=dataset, method=method, seed=i, split_hash="h", kind="final",
                         settings={"split": i // 10}, metrics={"balanced_accuracy": v, "images_per_second": ips,
                                                               "peak_memory_bytes": mem,
                                                               "peak_memory_kind": "process_max_rss"}))


def test_table3_bold_best_italic_not_significantly_worse(tmp_path):
    rng = np.random.default_rng(0)
    data = {("a", "ce"): rng.normal(0.60, 0.02, 30), ("a", "cosine"): rng.normal(0.595, 0.02, 30),
            ("a", "grad_l2"): rng.normal(0.50, 0.02, 30),
            ("b", "ce"): rng.normal(0.80, 0.01, 30), ("b", "cosine"): rng.normal(0.70, 0.01, 30),
            ("b", "grad_l2"): rng.normal(0.81, 0.01, 30)}
    with ResultsStore(tmp_path / "s.sqlite") as s:
        for (d, m), v in data.items():
            _add(s, d, m, v.tolist(), ips={"ce": 200.0, "cosine": 150.0, "grad_l2": 50.0}[m],
                 mem={"ce": 1e9, "cosine": 2e9, "grad_l2": 3e9}[m])
        t = accuracy_table(s)
        c = cost_table(s)
    rows = {r["method"]: i for i, r in enumerate(t.rows)}
    for d in ("a", "b"):
        means = {m: data[(d, m)].mean() for m in rows}
        best = max(means, key=means.get)
        assert t.styles[(rows[best], d)] == "bold"
        for m in rows:
            assert t.rows[rows[m]][d] == pytest.approx(means[m])
            if m == best:
                continue
            p = sps.ttest_ind(data[(d, best)], data[(d, m)], equal_var=False).pvalue
            assert t.styles.get((rows[m], d)) == ("italic" if p >= 0.05 else None)
    avg = {m: np.mean([data[("a", m)].mean(), data[("b", m)].mean()]) for m in rows}
    assert t.styles[(rows[max(avg, key=avg.get)], "average")] == "bold"
    md = t.render("markdown")
    assert md.count("**") == 2 * 3  # two dataset columns + average
    crow = {r["method"]: r for r in c.rows}
    assert crow["ce"]["images_per_second"] == 200.0 and crow["grad_l2"]["peak_memory_gb"] == pytest.approx(3.0)
    assert c.styles == {(0, "images_per_second"): "bold", (0, "peak_memory_gb"): "bold"}


def test_stats_welch_cli_matches_scipy(tmp_path, capsys):
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.7, 0.05, 30).tolist(), rng.normal(0.68, 0.02, 25).tolist()
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    rc, out, _ = run(capsys, "stats", "welch", "--a", tmp_path / "a.json", "--b", tmp_path / "b.json", "--json")
    r = json.loads(out)
    ref = sps.ttest_ind(a, b, equal_var=False)
    assert rc == 0 and r["t"] == pytest.approx(ref.statistic) and r["p"] == pytest.approx(ref.pvalue)
    assert r["df"] == pytest.approx(ref.df)
    (tmp_path / "c.json").write_text("[0.5]")
    rc, _, err = run(capsys, "stats", "welch", "--a", tmp_path / "a.json", "--b", tmp_path / "c.json", "--json")
    assert rc == 2 and "needs at least 2" in err  # undefined -> refused with the reason
    (tmp_path / "d.json").write_text("[0.5, \"x\"]")
    rc, _, err = run(capsys, "stats", "welch", "--a", tmp_path / "a.json", "--b", tmp_path / "d.json")
    assert rc == 2 and err.count("\n") == 1 and "--b" in err


def test_diverged_trials_are_recorded_and_reported(tmp_path, capsys):
    store = tmp_path / "r.sqlite"
    rc, _, err = run(capsys, "smalldata", "tune", "--method", "ce", *TINY, "--space", '{"lr": 1e9}',
                     "--store", store, "--work-dir", tmp_path / "w")
    assert rc == 2 and err.count("\n") == 1 and "no trial completed (all pruned or diverged)" in err
    with ResultsStore(store) as s:
        (rec,) = s.records(protocol="smalldata", kind="tune")
    trials = rec.settings["search"]["trials"]
    assert len(trials) == 3 and all(t["state"] == "failed" and "loss" in t["error"] for t in trials)


def test_vistabench_recipe_keeps_the_earlier_rules(tmp_path, capsys):
    store = tmp_path / "r.sqlite"
    tiny = [a if a != "3" else "2" for a in TINY if a not in ("--sampler", "random")]  # 2 trials, recipe's sampler
    rc, out, err = run(capsys, "smalldata", "tune", "--method", "ce", "--recipe", "vistabench", *tiny, "--json",
                       "--store", store, "--work-dir", tmp_path / "w")
    assert rc == 0, err
    with ResultsStore(store) as s:
        (rec,) = s.records(protocol="smalldata", kind="tune")
    st = rec.settings["search"]["settings"]
    assert (st["reduction_factor"], st["sampler"], st["score_window"], st["select"]) == (3, "tpe", 1, "complete")
    assert rec.settings["val_metric"] == "balanced_accuracy" and rec.settings["recipe"] == "vistabench"
    assert rec.settings["preset"]["val_fraction"] == 0.4 and rec.settings["preset"]["train_per_class"] is None
    trials = rec.settings["search"]["trials"]
    done = [t for t in trials if t["state"] == "complete"]
    best = max(done, key=lambda t: t["curve"][-1])
    assert rec.settings["search"]["best_value"] == best["curve"][-1]
    # an individual option overrides the recipe; a different rule is a different study
    rc, out, err = run(capsys, "smalldata", "tune", "--method", "ce", "--recipe", "vistabench", "--select", "all",
                       *tiny, "--json", "--store", store, "--work-dir", tmp_path / "w")
    assert rc == 0, err
    assert _resumed(out) == 2  # selection is not part of the study's name
    rc, out, err = run(capsys, "smalldata", "tune", "--method", "ce", "--recipe", "vistabench", "--score-window", "2",
                       *tiny, "--json", "--store", store, "--work-dir", tmp_path / "w")
    assert rc == 0 and _resumed(out) == 0


def test_cost_table_says_how_many_runs_trained_beside_others(tmp_path):
    def add(s, seed, placement):
        s.add(Record(protocol="smalldata", dataset="a", method="ce", seed=seed, split_hash="h", kind="final",
                     settings={"split": 0, "repeat": seed, **({"placement": placement} if placement else {})},
                     metrics={"balanced_accuracy": 0.5 + seed / 100, "images_per_second": 100.0 + seed,
                              "peak_memory_bytes": 1e9, "peak_memory_kind": "process_max_rss"}))

    with ResultsStore(tmp_path / "s.sqlite") as s:
        add(s, 0, {"kind": "alone"})
        add(s, 1, None)  # a record stored before runs said where they trained
        assert "at the same time" not in cost_table(s).caption
        add(s, 2, {"kind": "lanes", "lanes": 2})
        add(s, 3, {"kind": "lanes", "lanes": 2})
        add(s, 4, {"kind": "job", "engine": "local"})
        caption = cost_table(s).caption
    assert ("3 of the 5 runs trained at the same time as others (2 in lanes, beside another run in the same "
            "process; 1 as parallel jobs)") in caption and "VISTABENCH_LANES=0" in caption
