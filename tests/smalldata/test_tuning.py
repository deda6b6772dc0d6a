"""The tuning engine: ASHA prunes, records curves, resumes after an interruption; the Ray path."""

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from vistabench.engine import Engine
from vistabench.errors import InputError
from vistabench.tuning import (Choice, Fixed, LogUniform, TrialRecord, TuneResult, TuneSettings, Uniform,
                               parse_space, select_best, space_to_json, tune)

SPACE = {"lr": LogUniform(1e-4, 0.1), "bs": Choice((8, 16)), "momentum": Fixed(0.9)}


def objective(config, report):
    """A learning curve that rises to a ceiling set by how close lr is to 1e-2."""
    ceiling = 1.0 - abs(math.log10(config["lr"]) + 2.0) / 3.0
    v = 0.0
    for epoch in range(1, 10):
        v = ceiling * (1.0 - 0.5 ** epoch)
        report(epoch, v)
    return v


def test_asha_prunes_and_records_every_epoch():
    # the vistabench rules: last-epoch value, best among completed trials
    s = TuneSettings(trials=15, max_epochs=9, grace_period=1, reduction_factor=3, sampler="random", seed=1,
                     score_window=1, select="complete")
    r = tune(objective, SPACE, s)
    assert len(r.trials) == 15 and [t.number for t in r.trials] == list(range(15))
    states = {t.state for t in r.trials}
    assert states == {"complete", "pruned"}
    for t in r.trials:
        assert t.epochs == len(t.curve) and t.config["momentum"] == 0.9 and t.config["bs"] in (8, 16)
        ceiling = 1.0 - abs(math.log10(t.config["lr"]) + 2.0) / 3.0
        assert t.curve == pytest.approx([ceiling * (1 - 0.5 ** e) for e in range(1, t.epochs + 1)])
        if t.state == "complete":
            assert t.epochs == 9 and t.value == pytest.approx(t.curve[-1])
        else:
            assert t.epochs < 9 and t.value == pytest.approx(t.curve[-1])  # its score when it was stopped
    best = max((t for t in r.trials if t.state == "complete"), key=lambda t: t.value)
    assert r.best_value == best.value and r.best_config == best.config
    assert r.total_epochs == sum(t.epochs for t in r.trials) < 15 * 9
    # plain search of the same configurations trains every trial to the end
    full = tune(objective, SPACE, TuneSettings(trials=15, max_epochs=9, scheduler="none", sampler="random", seed=1,
                                               score_window=1, select="complete"))
    assert full.total_epochs == 15 * 9
    assert [t.config for t in full.trials] == [t.config for t in r.trials]
    assert full.best_value >= r.best_value


class Interrupt(Exception):
    pass


def test_resume_after_interruption_in_process(tmp_path):
    db = tmp_path / "study.db"
    s = TuneSettings(trials=8, max_epochs=9, grace_period=3, sampler="random", seed=0)

    def stop_after_3(n):
        if n >= 3:
            raise Interrupt()

    with pytest.raises(Interrupt):
        tune(objective, SPACE, s, storage=db, study_name="x", callbacks=[stop_after_3])
    seen = []

    def counting(config, report):
        seen.append(config["lr"])
        return objective(config, report)

    r = tune(counting, SPACE, s, storage=db, study_name="x")
    assert r.resumed_trials == 3 and len(seen) == 5 and len(r.trials) == 8
    lrs = [t.config["lr"] for t in r.trials]
    assert len(set(lrs)) == 8  # no configuration repeated
    again = tune(counting, SPACE, s, storage=db, study_name="x")  # complete: nothing re-run
    assert len(seen) == 5 and again.to_dict() == dict(r.to_dict(), resumed_trials=8)


def test_resume_after_kill(tmp_path):
    """A search process killed (SIGKILL) mid-trial resumes from its completed trials."""
    db, progress = tmp_path / "killed.db", tmp_path / "done.txt"
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_tuning import SPACE, objective
        from vistabench.tuning import TuneSettings, tune
        def slow(config, report):
            time.sleep(0.2)
            return objective(config, report)
        def mark(n):
            open({str(progress)!r}, "w").write(str(n))
        tune(slow, SPACE, TuneSettings(trials=50, max_epochs=9, grace_period=9, sampler="random"),
             storage={str(db)!r}, study_name="k", callbacks=[mark])
    """)
    proc = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.time() + 60
    while time.time() < deadline and not (progress.exists() and progress.read_text().strip() >= "3"):
        time.sleep(0.05)
    time.sleep(0.1)  # let it get into the next trial
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    st = optuna.load_study(study_name="k", storage=f"sqlite:///{db}")
    finished = [t for t in st.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
    assert 3 <= len(finished) < 50, progress.read_text()
    assert any(t.state == TrialState.RUNNING for t in st.get_trials(deepcopy=False))  # killed mid-trial
    before = {t.params["lr"] for t in finished}
    ran = []

    def counting(config, report):
        ran.append(config["lr"])
        return objective(config, report)

    r = tune(counting, SPACE, TuneSettings(trials=len(finished) + 2, max_epochs=9, grace_period=9, sampler="random"),
             storage=db, study_name="k")
    assert r.resumed_trials == len(finished) and len(ran) == 2 and len(r.trials) == len(finished) + 2
    assert not (set(ran) & before)
    assert {t.config["lr"] for t in r.trials} == before | set(ran)
    assert all(t.state == "complete" and t.epochs == 9 for t in r.trials)


def test_failed_trials_are_recorded_not_fatal():
    def diverging(config, report):
        if config["bs"] == 16:
            raise FloatingPointError("training loss became nan")
        return objective(config, report)

    r = tune(diverging, SPACE, TuneSettings(trials=10, max_epochs=9, scheduler="none", sampler="random", seed=3))
    failed = [t for t in r.trials if t.state == "failed"]
    assert failed and all("nan" in t.error for t in failed) and len(r.trials) == 10
    assert all(t.value is None for t in failed)
    assert r.best_config["bs"] == 8


def test_space_json_round_trip_and_errors():
    spec = {"lr": {"loguniform": [1e-4, 0.1]}, "p": {"uniform": [0, 1]}, "bs": {"choice": [8, 16]}, "m": 0.9}
    sp = parse_space(spec)
    assert sp == {"lr": LogUniform(1e-4, 0.1), "p": Uniform(0.0, 1.0), "bs": Choice((8, 16)), "m": Fixed(0.9)}
    assert space_to_json(sp) == {"lr": {"loguniform": [0.0001, 0.1]}, "p": {"uniform": [0.0, 1.0]},
                                 "bs": {"choice": [8, 16]}, "m": 0.9}
    with pytest.raises(InputError, match="unknown distribution 'normal'"):
        parse_space({"x": {"normal": [0, 1]}})
    with pytest.raises(InputError, match="low < high"):
        LogUniform(0.1, 0.01)
    with pytest.raises(InputError, match="grace_period"):
        TuneSettings(trials=3, max_epochs=5, grace_period=6)
    with pytest.raises(InputError, match="engine"):
        TuneSettings(trials=3, max_epochs=5, engine=Engine(engine="slurm"))
    with pytest.raises(InputError, match="select: expected one of"):
        TuneSettings(trials=3, max_epochs=5, select="best")
    with pytest.raises(InputError, match="score_window"):
        TuneSettings(trials=3, max_epochs=5, score_window=0)
    with pytest.raises(InputError, match="reduction_factor"):
        TuneSettings(trials=3, max_epochs=5, reduction_factor=1)


def _shape(obj):
    if isinstance(obj, dict):
        return {k: _shape(v) for k, v in obj.items() if k not in ("config", "best_config")}
    if isinstance(obj, list):
        return [_shape(obj[0])] if obj else []
    return type(obj).__name__ if obj is not None else "null"


def test_ray_engine_tiny_search_same_record_shape(tmp_path):
    ray = pytest.importorskip("ray")
    from vistabench.jobs import connect_ray

    # a private local Ray (address "local"): never a cluster another session runs on this machine
    assert connect_ray(None, num_cpus=2)
    try:
        s = dict(trials=4, max_epochs=9, grace_period=1, sampler="random", seed=0)
        r = tune(objective, SPACE, TuneSettings(engine=Engine(engine="ray"), **s), storage=tmp_path / "ray.db",
                 study_name="r")
    finally:
        ray.shutdown()
    local = tune(objective, SPACE, TuneSettings(**s))
    assert isinstance(r, TuneResult) and len(r.trials) == 4 and r.engine == "ray"
    assert {t.state for t in r.trials} <= {"complete", "pruned"} and "complete" in {t.state for t in r.trials}
    for t in r.trials:
        assert set(t.config) == {"lr", "bs", "momentum"} and t.config["momentum"] == 0.9
        ceiling = 1.0 - abs(math.log10(t.config["lr"]) + 2.0) / 3.0
        assert t.curve == pytest.approx([ceiling * (1 - 0.5 ** e) for e in range(1, t.epochs + 1)])
    a, b = r.to_dict(), local.to_dict()
    assert set(a) == set(b) and set(a["trials"][0]) == set(b["trials"][0])
    # gem's rules on Ray too: value = mean of the last 5 raw values, best among all trials
    for t in r.trials:
        assert t.value == pytest.approx(float(np.mean(t.curve[-5:])))
    assert r.best_value == max(t.value for t in r.trials)
    json.dumps(a)  # JSON-serialisable like the local record


# ------------------------------------------------------------------ gem's rules, side by side
# gem (scripts/hpo.py, gem/pipelines/common.py) reports after every epoch
#     accuracy_avg5 = np.mean(metrics["val_accuracy"][-5:])
# ASHA (reduction factor 2) stops trials on it, and the best configuration is
#     analysis.get_best_trial("accuracy_avg5", "max", scope="last")
# i.e. over ALL trials (stopped ones included) the largest last reported accuracy_avg5, NaN
# skipped, the first trial winning a tie. Both are re-written here on their own.

def gem_avg5_sequence(curve):
    out, hist = [], []
    for v in curve:
        hist.append(v)
        out.append(np.mean(hist[-5:]))
    return out


def gem_best_trial(trials):
    """Ray Tune's get_best_trial(metric, "max", scope="last") over the trials in creation order."""
    best, best_score = None, None
    for t in trials:
        if not t["curve"]:
            continue
        score = gem_avg5_sequence(t["curve"])[-1]
        if np.isnan(score):
            continue
        if best_score is None or score > best_score:
            best, best_score = t, score
    return best, best_score


def overfitting(config, report):
    """A noisy curve that peaks at an epoch set by lr, then falls (so stopped trials can be the best)."""
    rng = np.random.default_rng(int(config["lr"] * 1e9) % 2**32)
    peak = 1 + int(8 * (math.log10(config["lr"]) + 4) / 3)
    v = 0.0
    for epoch in range(1, 13):
        v = 0.9 - 0.04 * abs(epoch - peak) + 0.05 * rng.standard_normal()
        report(epoch, v)
    return v


def test_gem_rules_match_a_rewrite_of_gem(tmp_path):
    s = TuneSettings(trials=24, max_epochs=12, grace_period=2, seed=4)  # defaults: eta 2, random, avg5, all
    assert (s.reduction_factor, s.sampler, s.score_window, s.select) == (2, "random", 5, "all")
    r = tune(overfitting, SPACE, s, storage=tmp_path / "g.db", study_name="g")
    trials = r.to_dict()["trials"]
    assert {t["state"] for t in trials} == {"complete", "pruned"}
    # what ASHA compared at every epoch is gem's accuracy_avg5 of the raw curve
    import optuna

    st = optuna.load_study(study_name="g", storage=f"sqlite:///{tmp_path / 'g.db'}")
    for t, ot in zip(trials, sorted(st.get_trials(deepcopy=False), key=lambda t: t.number)):
        seen = [ot.intermediate_values[k] for k in sorted(ot.intermediate_values)]
        assert seen == pytest.approx(gem_avg5_sequence(t["curve"]))
        assert t["value"] == pytest.approx(gem_avg5_sequence(t["curve"])[-1])
    best, score = gem_best_trial(trials)
    assert r.best_trial == best["number"] and r.best_value == pytest.approx(score)
    assert r.best_config == best["config"]
    # the difference the rule makes here: a stopped trial beats every completed one
    assert best["state"] == "pruned"
    complete = tune(overfitting, SPACE, TuneSettings(trials=24, max_epochs=12, grace_period=2, seed=4,
                                                     select="complete"))
    assert [t.curve for t in complete.trials] == [t["curve"] for t in trials]  # same search, other pick
    only = [t for t in trials if t["state"] == "complete"]
    assert complete.best_trial == gem_best_trial(only)[0]["number"] != r.best_trial


def test_select_best_edge_cases():
    def rec(n, state, value):
        return TrialRecord(number=n, config={"n": n}, state=state, value=value, curve=[], epochs=0)

    trials = [rec(0, "pruned", 0.9), rec(1, "complete", 0.8), rec(2, "complete", 0.8), rec(3, "failed", None),
              rec(4, "pruned", float("nan"))]
    assert select_best(trials, "all").number == 0
    assert select_best(trials, "complete").number == 1  # tie: the earlier trial, as Ray's strict ">"
    assert select_best([rec(0, "pruned", 0.5)], "complete") is None
    assert select_best([rec(0, "failed", None)], "all") is None
