"""The final runs through the grid engine: local processes and a 2-worker Ray store the same records as
one after another in this process (same seeds, same threads -> same metrics)."""

import math

import pytest

from vistabench.engine import Engine
from vistabench.errors import InputError
import vistabench.protocols.smalldata.final as sd
from vistabench.protocols.smalldata.runner import RunPlan as Options, SmalldataConfig, final_split, prepare
from vistabench.store import ResultsStore

# measured cost, not results: wall time, and on CPU the process's peak RSS (another process, another peak)
COST = ("train_seconds", "images_per_second", "peak_memory_bytes")
CONFIG = {"lr": 0.05, "weight_decay": 1e-4, "batch_size": 10}


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return prepare("digits", per_class=20, splits=[0], out_splits=tmp_path_factory.mktemp("splits"))


@pytest.fixture(scope="module")
def sequential(ctx, tmp_path_factory):
    return _finals(ctx, tmp_path_factory.mktemp("seq") / "r.sqlite", Options(epochs=1, repeats=2, threads=1))


def _finals(ctx, store_path, opts):
    records = []
    out = final_split(ctx, ctx.splits[0], "ce", CONFIG, opts, records)
    with ResultsStore(store_path) as store:
        store.add_many(records)
        recs = store.records(protocol="smalldata", kind="final")
    assert [o["metrics"]["balanced_accuracy"] for o in out] == [r.metrics["balanced_accuracy"] for r in recs]
    # where each run trained (alone here, or a job of the engine) says how to read its cost: not a result
    kinds = {r.settings["placement"]["kind"] for r in recs}
    assert kinds == ({"alone"} if not opts.engine.dispatches() else {"job"})
    return [(r.seed, r.split_hash, {k: v for k, v in r.settings.items() if k != "placement"},
             {k: v for k, v in r.metrics.items() if k not in COST})
            for r in recs]


def _not_here(*args, **kwargs):
    raise AssertionError("a final run ran in the driver: the engine did not dispatch it")


def test_local_processes_store_the_sequential_records(ctx, sequential, tmp_path, monkeypatch):
    assert [r[0] for r in sequential] == [0, 1]
    assert sequential[0][3]["balanced_accuracy"] != sequential[1][3]["balanced_accuracy"]  # seeds differ: not vacuous
    assert all(0 <= r[3]["balanced_accuracy"] <= 1 and not math.isnan(r[3]["accuracy"]) for r in sequential)
    monkeypatch.setattr(sd, "_final_run", _not_here)  # the workers import their own, unpatched
    par = _finals(ctx, tmp_path / "p.sqlite", Options(epochs=1, repeats=2, threads=1, engine=Engine(max_parallel=2)))
    assert par == sequential


def test_ray_two_workers_store_the_sequential_records(ctx, sequential, tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setattr(sd, "_final_run", _not_here)
    by_ray = _finals(ctx, tmp_path / "ray.sqlite", Options(epochs=1, repeats=2, threads=1,
                                                           engine=Engine(engine="ray", max_parallel=2)))
    assert by_ray == sequential


def test_engine_options_are_checked_once():
    base = {"dataset": "digits", "method": "ce_untuned"}
    with pytest.raises(InputError, match="max_parallel: expected a number >= 1, got 0"):
        SmalldataConfig.from_dict({**base, "max_parallel": 0})
    with pytest.raises(InputError, match="ray_address: only read with engine 'ray'"):
        SmalldataConfig.from_dict({**base, "ray_address": "127.0.0.1:1"})
