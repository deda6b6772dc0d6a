"""A task's search trials through the grid engine: local processes and a 2-worker Ray give the
sequential events (same errors, same cFLOP, same curves) on the embedded stream."""

import pytest

from vistabench.errors import InputError
from vistabench.engine import Engine
from vistabench.learners.stream import SearchLearner, TrialEngine, make_learner
from vistabench.protocols.stream.runner import run_stream
from vistabench.store import ResultsStore

OPTS = {"trials": 2, "steps": 2, "seed": 0, "arch": "cnn28", "arch_options": {"width": 4}}
WALL = ("seconds",)  # wall time differs run to run


def _events(tmp_path, name, learner, engine=None):
    with ResultsStore(tmp_path / f"{name}.sqlite") as store:
        res = run_stream("embedded", make_learner(learner, **OPTS), store=store, run_id="r",
                         work_dir=tmp_path / name, max_tasks=2, trial_engine=engine)
        recs = store.records(protocol="stream")
    assert [r.metrics["task_index"] for r in recs] == [e["task_index"] for e in res.events] == [0, 1]
    return [(r.method, r.seed, r.settings, {k: v for k, v in r.metrics.items() if k not in WALL}) for r in recs]


def _not_here(*args, **kwargs):
    raise AssertionError("a trial ran in the driver: the engine did not dispatch it")


@pytest.fixture(scope="module")
def sequential(tmp_path_factory):
    return _events(tmp_path_factory.mktemp("seq"), "seq", "ft-prev")


def test_ray_two_workers_give_the_sequential_events(sequential, tmp_path, monkeypatch):
    pytest.importorskip("ray")
    first, second = (m for *_, m in sequential)
    assert second["init_from"] == first["task"]  # ft-prev: the second task starts from the first's network
    assert first["flops"] > 0 and first["train_steps"] == 2 * 2  # trials x steps, all charged
    monkeypatch.setattr(SearchLearner, "_run_trial", _not_here)  # workers import their own, unpatched
    by_ray = _events(tmp_path, "ray", "ft-prev", TrialEngine(engine=Engine(engine="ray", max_parallel=2)))
    assert by_ray == sequential  # errors, curves, best trial and cFLOP (sum of charged steps) unchanged


def test_local_processes_give_the_sequential_events_with_an_auxiliary_task(tmp_path, monkeypatch):
    # mt: FT-d start + co-training with a kept past task, the most state a trial reads
    seq = _events(tmp_path, "mt-seq", "mt")
    assert seq[1][3]["init_from"] == seq[0][3]["task"]
    monkeypatch.setattr(SearchLearner, "_run_trial", _not_here)
    assert _events(tmp_path, "mt-par", "mt", TrialEngine(engine=Engine(max_parallel=2))) == seq


def test_trial_engine_is_checked_and_not_a_learner_setting():
    with pytest.raises(InputError, match="max.parallel: expected a number >= 1, got 0"):
        TrialEngine(engine=Engine(max_parallel=0))
    with pytest.raises(InputError, match="ray.address: only read with engine 'ray'"):
        TrialEngine(engine=Engine(ray_address="127.0.0.1:1"))
    with pytest.raises(InputError, match="threads: expected a positive integer, got 0"):
        TrialEngine(threads_per_trial=0)
    learner = make_learner("indep", **OPTS)
    before = learner.settings()
    learner.trial_engine = TrialEngine(engine=Engine(engine="ray"))
    assert learner.settings() == before and "engine" not in before
