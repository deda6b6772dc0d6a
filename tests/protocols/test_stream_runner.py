"""The stream runner: no future access, FLOP charging, resume, multilabel scoring, PT checkpoints."""

import json

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score

from vistabench.errors import InputError
from vistabench.learners.flops import count_forward_flops, count_train_step_flops
from vistabench.learners.models import build_model
from vistabench.learners.stream import (StreamLearner, TaskView, batch_size_for, eval_points,
                                        make_learner, save_checkpoint)
from vistabench.protocols.stream.runner import run_events, run_stream
from vistabench.store import ResultsStore
from vistabench.streams import Stream, Task, load_stream, parse_stream
from vistabench.streams.sources import resolve_task

torch.set_num_threads(1)



TINY = {
    "name": "tiny",
    "meta_test_from_year": 2003,
    "input": {"image_size": 8, "channels": 1},
    "tasks": [
        {"name": "d01", "year": 2000, "domain": "scan", "kind": "multiclass",
         "source": {"embedded": "digits", "classes": [0, 1, 2], "n_train": 60, "n_test": 30}},
        {"name": "d-inv", "year": 2001, "domain": "inverted", "kind": "multiclass",
         "source": {"embedded": "digits", "classes": [3, 4, 5], "invert": True, "n_train": 60, "n_test": 30}},
        {"name": "attrs", "year": 2003, "domain": "scan", "kind": "multilabel",
         "source": {"embedded": "digits", "attributes": ["even", "prime"], "n_train": 80, "n_test": 40}},
        {"name": "d01", "year": 2004, "domain": "scan", "kind": "multiclass",
         "source": {"embedded": "digits", "classes": [0, 1, 2], "n_train": 60, "n_test": 30}},
    ],
}

OPTS = {"arch": "cnn28", "arch_options": {"width": 4}, "min_batch": 16}


def tiny_stream_file(tmp_path, doc=None):
    p = tmp_path / "tiny.json"
    p.write_text(json.dumps(doc or TINY))
    return p


@pytest.fixture
def stream(tmp_path):
    return load_stream(str(tiny_stream_file(tmp_path)))


@pytest.fixture
def store(tmp_path):
    with ResultsStore(tmp_path / "r.sqlite") as s:
        yield s


class SpyLearner(StreamLearner):
    """Records what it is given; predicts constant (seeded random) scores."""

    name = "spy"

    def __init__(self, log):
        super().__init__()
        self.log = log
        self.seen = []

    def init(self):
        return {"n": 0}

    def train(self, task, data, state, ledger):
        self.log.append(("train", task.uid))
        self.seen.append((task, data))
        with pytest.raises(ValueError):
            data.images[0, 0, 0, 0] = 1  # read-only copy
        return {"n": state["n"] + 1}, task.num_classes

    def predict(self, predictor, images):
        self.log.append(("predict", images.shape[0]))
        assert not images.flags.writeable
        return np.random.default_rng(images.shape[0]).random((len(images), predictor))

    def state_to_dict(self, state):
        return dict(state)

    def state_from_dict(self, d):
        return dict(d)


def _walk(obj, depth=0):
    """Every object reachable through attributes / containers (to look for stream objects)."""
    yield obj
    if depth > 3:
        return
    children = []
    if isinstance(obj, dict):
        children = list(obj.values())
    elif isinstance(obj, (list, tuple)):
        children = list(obj)
    elif hasattr(obj, "__dict__"):
        children = list(vars(obj).values())
    elif hasattr(obj, "__dataclass_fields__"):
        children = [getattr(obj, f) for f in obj.__dataclass_fields__]
    for c in children:
        if not isinstance(c, np.ndarray):
            yield from _walk(c, depth + 1)


def test_learner_gets_only_the_current_task_and_copies(stream, store, tmp_path):
    log = []
    cache = {}

    def resolver(task):
        log.append(("resolve", task.uid))
        cache[task.uid] = resolve_task(task, stream)
        return cache[task.uid]

    spy = SpyLearner(log)
    run_stream(stream, spy, store=store, run_id="spy", work_dir=tmp_path, resolver=resolver)
    # task k+1 is not even loaded before the learner has finished task k
    kinds = [(k, v) for k, v in log]
    expected = []
    for t in stream.tasks:
        expected += [("resolve", t.uid), ("train", t.uid)]
    assert [x for x in kinds if x[0] != "predict"] == expected
    for (view, data), task in zip(spy.seen, stream.tasks):
        assert isinstance(view, TaskView) and view.uid == task.uid
        # nothing reachable from what the learner got is a stream, a task list or another task's data
        for obj in list(_walk(view)) + list(_walk(data)):
            assert not isinstance(obj, (Stream, Task))
        full = cache[task.uid]
        assert not np.shares_memory(data.images, full.train.images)
        np.testing.assert_array_equal(data.targets, full.train.targets)  # train part only, never test labels
        assert len(data) == len(full.train) != 0
    assert len(run_events(store, "spy")) == len(stream.tasks)


def test_multilabel_error_is_one_minus_sklearn_macro_map(stream, store, tmp_path):
    spy = SpyLearner([])
    res = run_stream(stream, spy, store=store, run_id="ml", work_dir=tmp_path)
    task = stream.tasks[2]
    test = resolve_task(task, stream).test
    scores = np.random.default_rng(len(test)).random((len(test), test.num_classes))
    assert res.events[2]["kind"] == "multilabel"
    assert res.events[2]["error"] == pytest.approx(1 - average_precision_score(test.targets, scores, average="macro"))
    test0 = resolve_task(stream.tasks[0], stream).test
    s0 = np.random.default_rng(len(test0)).random((len(test0), 3))
    assert res.events[0]["error"] == pytest.approx(np.mean(s0.argmax(1) != test0.targets))


def test_charged_flops_equal_trials_times_steps_times_per_step(stream, store, tmp_path):
    trials, steps = 2, 6
    learner = make_learner("indep", trials=trials, steps=steps, seed=0, **OPTS)
    learner.count_in_trainer = True  # the trainer counts independently, for the cross-check
    one = parse_stream({**TINY, "tasks": TINY["tasks"][:1]})
    seen = {}
    orig = learner.train

    def train(task, data, state, ledger):
        out = orig(task, data, state, ledger)
        seen["ledger"], seen["pred"], seen["n"] = ledger, out[1], len(data)
        return out

    learner.train = train
    res = run_stream(one, learner, store=store, run_id="flops", work_dir=tmp_path)
    ev, pred = res.events[0], seen["pred"]
    model = build_model("cnn28", num_classes=3, in_channels=1, **OPTS["arch_options"])
    n_val = pred.info["val_images"]
    bs = batch_size_for(pred.info["fit_images"], min_batch=16)
    per_step = count_train_step_flops(model, (1, 8, 8), bs)
    per_image = count_forward_flops(model, (1, 8, 8), batch_size=1)
    e = eval_points(steps)
    assert ev["train_steps"] == trials * steps
    assert ev["flops_train"] == trials * steps * per_step
    assert ev["flops_eval"] == trials * e * n_val * per_image  # validation after each of the E chunks
    assert ev["flops"] == ev["flops_train"] + ev["flops_eval"]
    # the shared trainer's own count agrees trial by trial
    assert [c["trainer_flops"] for c in pred.info["trial_configs"]] == [steps * per_step] * trials
    # a forward count is linear in the batch (what charging n x one image relies on)
    assert count_forward_flops(model, (1, 8, 8), batch_size=7) == 7 * per_image


def test_ft_d_charges_relatedness_and_picks_a_past_task(stream, store, tmp_path):
    learner = make_learner("ft-d", trials=1, steps=4, seed=0, knn_train=20, knn_val=10, **OPTS)
    res = run_stream(stream, learner, store=store, run_id="ftd", work_dir=tmp_path)
    indep = run_stream(stream, make_learner("indep", trials=1, steps=4, seed=0, **OPTS), store=store,
                       run_id="ind", work_dir=tmp_path)
    assert res.events[0]["init_from"] == "random"
    past = torch.load(tmp_path / "ftd" / "checkpoint.pt", weights_only=True)["state"]["models"]
    assert [m["num_outputs"] for m in past][:2] == [3, 3]
    for k in (1, 2, 3):
        assert res.events[k]["init_from"] in [t.uid for t in stream.tasks[:k]]
        # same training budget as Indep, plus one forward pass of 30 images through each past network
        extra = res.events[k]["flops"] - indep.events[k]["flops"]
        assert res.events[k]["flops_train"] == indep.events[k]["flops_train"]
        expected = sum(30 * count_forward_flops(build_model("cnn28", num_classes=m["num_outputs"], in_channels=1,
                                                            **OPTS["arch_options"]), (1, 8, 8))
                       for m in past[:k])
        assert extra == expected


def test_resume_after_a_crash_equals_an_uninterrupted_run(stream, tmp_path):
    with ResultsStore(tmp_path / "a.sqlite") as s1:
        full = run_stream(stream, make_learner("ft-prev", trials=1, steps=4, seed=3, **OPTS), store=s1,
                          run_id="r", work_dir=tmp_path / "a", seed=3)
    with ResultsStore(tmp_path / "b.sqlite") as s2:
        learner = make_learner("ft-prev", trials=1, steps=4, seed=3, **OPTS)
        orig = learner.train

        def crashing(task, *a):
            if task.uid.startswith("002"):
                raise RuntimeError("power cut")
            return orig(task, *a)

        learner.train = crashing
        with pytest.raises(RuntimeError):
            run_stream(stream, learner, store=s2, run_id="r", work_dir=tmp_path / "b", seed=3)
        assert len(run_events(s2, "r")) == 2
        resumed = run_stream(stream, make_learner("ft-prev", trials=1, steps=4, seed=3, **OPTS), store=s2,
                             run_id="r", work_dir=tmp_path / "b", seed=3)
        assert resumed.resumed_from == 2
        got = [r.metrics for r in run_events(s2, "r")]
    keys = ("task", "error", "flops", "init_from", "curve")
    assert [{k: e[k] for k in keys} for e in got] == [{k: e[k] for k in keys} for e in full.events]


def test_events_missing_from_the_store_are_restored_from_the_checkpoint(stream, tmp_path):
    with ResultsStore(tmp_path / "a.sqlite") as s:
        run_stream(stream, SpyLearner([]), store=s, run_id="x", work_dir=tmp_path, max_tasks=2)
        s.delete(protocol="stream", run_id="x")  # as if the process was killed before its events reached the store
        res = run_stream(stream, SpyLearner([]), store=s, run_id="x", work_dir=tmp_path)
        assert res.resumed_from == 2
        assert [r.metrics["task_index"] for r in run_events(s, "x")] == [0, 1, 2, 3]


def test_events_without_a_checkpoint_cannot_resume(stream, store, tmp_path):
    run_stream(stream, SpyLearner([]), store=store, run_id="z", work_dir=tmp_path, max_tasks=1)
    (tmp_path / "z" / "checkpoint.pt").unlink()
    with pytest.raises(InputError, match="no checkpoint"):
        run_stream(stream, SpyLearner([]), store=store, run_id="z", work_dir=tmp_path)


def test_a_checkpoint_of_another_stream_is_refused(stream, store, tmp_path):
    run_stream(stream, SpyLearner([]), store=store, run_id="w", work_dir=tmp_path, max_tasks=1)
    other = parse_stream({**TINY, "meta_test_from_year": 2001})
    with pytest.raises(InputError, match="different stream"):
        run_stream(other, SpyLearner([]), store=store, run_id="w", work_dir=tmp_path)


def test_pt_loads_a_weights_only_checkpoint(stream, store, tmp_path):
    model = build_model("cnn28", num_classes=10, in_channels=1, seed=5, **OPTS["arch_options"])
    ck = save_checkpoint(model, tmp_path / "pre.pt")
    learner = make_learner("pt", trials=1, steps=4, seed=0, checkpoint=str(ck), **OPTS)
    for k, v in model.state_dict().items():
        assert torch.equal(learner.pretrained[k], v)
    res = run_stream(stream, learner, store=store, run_id="pt", work_dir=tmp_path)
    assert all(e["init_from"] == "checkpoint" for e in res.events)
    with pytest.raises(InputError, match="needs a checkpoint"):
        make_learner("pt", trials=1, steps=4)
    bad = tmp_path / "bad.pt"
    torch.save({"fn": print}, bad)  # not loadable with weights_only=True
    with pytest.raises(InputError, match="weights-only"):
        make_learner("pt", checkpoint=str(bad))
    with pytest.raises(InputError, match="no such file"):
        make_learner("pt", checkpoint=str(tmp_path / "missing.pt"))


@pytest.mark.parametrize("name", ["indep", "ft-prev", "ft-d", "ensemble"])
def test_every_learner_runs_and_scores_in_range(name, stream, store, tmp_path):
    res = run_stream(stream, make_learner(name, trials=2, steps=4, seed=1, **OPTS), store=store, run_id=name,
                     work_dir=tmp_path)
    assert len(res.events) == 4
    for e in res.events:
        assert 0 <= e["error"] <= 1 and e["flops"] > 0 and e["parameters"] > 0
        assert len(e["curve"]) == eval_points(4)
    if name == "ensemble":  # all trials kept
        assert res.events[0]["parameters"] == 2 * res.events[0]["parameters"] // 2
        single = run_stream(stream, make_learner("indep", trials=2, steps=4, seed=1, **OPTS), store=store,
                            run_id="single", work_dir=tmp_path)
        assert res.events[0]["parameters"] == 2 * single.events[0]["parameters"]


def test_batch_size_and_eval_points():
    assert batch_size_for(16 * 64) == 64
    assert batch_size_for(10) == 10  # never more than the data
    assert batch_size_for(10**7, max_batch=256) == 256
    assert [eval_points(s) for s in (1, 2, 3, 5, 6, 8, 9)] == [1, 2, 3, 1, 3, 4, 3]
    with pytest.raises(InputError, match="trials"):
        make_learner("indep", trials=0)
    with pytest.raises(InputError, match="unknown stream learner 'ft_d'; did you mean 'ft-d'"):
        make_learner("ft_d")
    with pytest.raises(InputError, match="unknown"):
        make_learner("indep", learning_rate=0.1)


def test_absent_labels_option_is_validated_and_stored(stream, store, tmp_path):
    with pytest.raises(InputError, match="absent_labels"):
        run_stream(stream, SpyLearner([]), store=store, run_id="a", work_dir=tmp_path, absent_labels="drop")
    res = run_stream(stream, SpyLearner([]), store=store, run_id="o", work_dir=tmp_path, absent_labels="omit")
    assert run_events(store, "o")[0].settings["absent_labels"] == "omit"
    s = res.summary()
    assert s["cflop"] == s["cflop_train"] + s["cflop_selection"]
    assert s["meta_test_cut"].startswith("meta-test from 2003 (stream file default): 2 meta-train, 2 meta-test")


def test_pretrain_checks_its_arguments_before_reading_data(tmp_path):
    from vistabench.protocols.stream.config import PretrainOptions
    from vistabench.protocols.stream.runner import pretrain

    with pytest.raises(InputError, match="^steps: expected a number >= 1, got 0"):  # the options' own rule
        PretrainOptions(stream="embedded", out=tmp_path / "pt.pt", steps=0)
    with pytest.raises(InputError, match="^width: "):
        PretrainOptions(stream="embedded", out=tmp_path / "pt.pt", width=0)
    with pytest.raises(InputError, match="^out '.*': is a folder"):
        PretrainOptions(stream="embedded", out=tmp_path, steps=1)
    with pytest.raises(InputError, match="^meta_test_from: "):  # where the stream is loaded, before any data
        pretrain(PretrainOptions(stream="embedded", out=tmp_path / "pt.pt", meta_test_from="papr"))
    with pytest.raises(InputError, match="^lr: expected a number > 0"):
        PretrainOptions(stream="embedded", out=tmp_path / "pt.pt", lr=0)
    with pytest.raises(InputError, match="^data_root '.*': no such folder"):
        PretrainOptions(stream="embedded", out=tmp_path / "pt.pt", data_root=tmp_path / "nope")
    opts = PretrainOptions(stream="embedded", out=tmp_path / "pt.pt")
    assert (opts.width, opts.arch_options(), opts.to_recipe().model) == (8, {"width": 8}, "cnn28")  # resolved once
    with pytest.raises(TypeError, match="PretrainOptions"):  # the checked value, not its fields one by one
        pretrain("embedded")


def test_stream_report_refuses_a_store_without_stream_runs(tmp_path):
    from vistabench.report.stream import stream_report
    from vistabench.store import Record, ResultsStore

    with ResultsStore(tmp_path / "s.sqlite") as s:
        s.add(Record(protocol="longtail", dataset="d", method="m", seed=0, split_hash=None, settings={},
                     metrics={"avg": 0.5}))
    with pytest.raises(InputError, match=r"^store '.*s.sqlite': holds no stream runs"):
        stream_report(tmp_path / "s.sqlite")
    with pytest.raises(InputError, match=r"^results store '.*nope.sqlite': no such results store"):
        stream_report(tmp_path / "nope.sqlite")
    with pytest.raises(InputError, match="^cost: expected 'total' or 'train'"):
        stream_report(tmp_path / "s.sqlite", cost="flops")


def test_write_stream_split_and_catalog(tmp_path):
    from vistabench.data.splits import read_split
    from vistabench.protocols.stream.runner import catalog, stream_split, write_stream_split

    summary = write_stream_split("embedded", tmp_path / "s.json")
    split = stream_split("embedded")
    assert read_split(tmp_path / "s.json", kind=split["kind"]) == split
    assert summary["tasks"] == len(split["tasks"]) and summary["sha256"] == split["sha256"]
    assert summary["meta_test"] == sum(t["split"] == "meta-test" for t in split["tasks"]) > 0
    listed = catalog()
    assert "embedded" in [s["name"] for s in listed["streams"]] and set(listed["learner_docs"]) == set(listed["learners"])


@pytest.mark.parametrize("cut", ["half", "empty", "garbage"])
def test_a_checkpoint_cut_short_is_redone_never_trusted(stream, tmp_path, cut):
    """A checkpoint that cannot be read back whole is removed, the run redone from its first task,
    and the events already stored are not stored twice (issue 32)."""
    with ResultsStore(tmp_path / "a.sqlite") as s:
        full = run_stream(stream, make_learner("ft-prev", trials=1, steps=4, seed=3, **OPTS), store=s,
                          run_id="r", work_dir=tmp_path / "a", seed=3)
    with ResultsStore(tmp_path / "b.sqlite") as s:
        run_stream(stream, make_learner("ft-prev", trials=1, steps=4, seed=3, **OPTS), store=s, run_id="r",
                   work_dir=tmp_path / "b", seed=3, max_tasks=2)
        ck = tmp_path / "b" / "r" / "checkpoint.pt"
        data = ck.read_bytes()
        ck.write_bytes({"half": data[: len(data) // 2], "empty": b"", "garbage": b"PK\x03\x04" + b"x" * 100}[cut])
        with pytest.warns(UserWarning, match="damaged"):
            res = run_stream(stream, make_learner("ft-prev", trials=1, steps=4, seed=3, **OPTS), store=s,
                             run_id="r", work_dir=tmp_path / "b", seed=3)
        assert res.resumed_from == 0  # redone from the first task
        got = [r.metrics for r in run_events(s, "r")]
        assert [m["task_index"] for m in got] == [0, 1, 2, 3]  # no event stored twice
        assert torch.load(ck, weights_only=True)["events"][-1]["task_index"] == 3  # a whole checkpoint again
    keys = ("task", "error", "flops", "init_from")
    assert [{k: e[k] for k in keys} for e in got] == [{k: e[k] for k in keys} for e in full.events]
    assert not list((tmp_path / "b" / "r").glob("*.tmp"))


def test_sigkill_mid_checkpoint_write_resumes_from_the_last_whole_one(stream, tmp_path):
    """A process killed (SIGKILL) while it writes a checkpoint leaves the previous checkpoint whole;
    the run resumes from it and equals an uninterrupted run (issue 32)."""
    import os
    import subprocess
    import sys
    import textwrap
    import time

    stream_file = tiny_stream_file(tmp_path)
    script = textwrap.dedent(f"""
        import os, signal, torch
        from vistabench.learners.stream import make_learner
        from vistabench.protocols.stream.runner import run_stream
        from vistabench.store import ResultsStore
        real, calls = torch.save, []
        def save(obj, f, *a, **k):
            calls.append(1)
            if len(calls) == 2:  # the second checkpoint: half written, then killed
                f.write(b"PK" * 5000)
                f.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            return real(obj, f, *a, **k)
        torch.save = save
        torch.set_num_threads(1)
        with ResultsStore({str(tmp_path / "b.sqlite")!r}) as s:
            run_stream({str(stream_file)!r}, make_learner("ft-prev", trials=1, steps=4, seed=3, **{OPTS!r}), store=s,
                       run_id="r", work_dir={str(tmp_path / "b")!r}, seed=3, max_tasks=2)
    """)
    proc = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stderr[-2000:]
    ck = tmp_path / "b" / "r" / "checkpoint.pt"
    assert len(torch.load(ck, weights_only=True)["events"]) == 1  # the last whole checkpoint
    (left,) = (tmp_path / "b" / "r").glob(".checkpoint.pt.*.tmp")  # the half-written temporary file
    os.utime(left, (time.time() - 3600,) * 2)
    with ResultsStore(tmp_path / "a.sqlite") as s:
        full = run_stream(stream, make_learner("ft-prev", trials=1, steps=4, seed=3, **OPTS), store=s,
                          run_id="r", work_dir=tmp_path / "a", seed=3, max_tasks=2)
    with ResultsStore(tmp_path / "b.sqlite") as s:
        res = run_stream(stream, make_learner("ft-prev", trials=1, steps=4, seed=3, **OPTS), store=s,
                         run_id="r", work_dir=tmp_path / "b", seed=3, max_tasks=2)
        assert res.resumed_from == 1
        got = [r.metrics for r in run_events(s, "r")]
    keys = ("task", "error", "flops", "init_from", "curve")
    assert [{k: e[k] for k in keys} for e in got] == [{k: e[k] for k in keys} for e in full.events]
    assert sorted(p.name for p in (tmp_path / "b" / "r").iterdir()) == ["checkpoint.pt"]  # the leftover removed


def _as_stored_before(settings: dict) -> dict:
    """A run's settings as versions before this one stored them: the backbone named ``arch``."""
    return {("arch" if k == "model" else k): v for k, v in settings.items()}


def test_runs_store_model_and_resume_a_run_stored_with_arch(stream, tmp_path):
    """The backbone is stored as ``model``. A run whose checkpoint (``ck``) or first stored event
    (``store``: a checkpoint without settings) an older version wrote with ``arch`` resumes; one
    started with another backbone is still refused, naming it."""
    from dataclasses import replace

    opts = {**OPTS, "trials": 1, "steps": 2}
    with ResultsStore(tmp_path / "s.sqlite") as s:
        for rid, backbone in (("ck", "cnn28"), ("store", "cnn28"), ("other", "resnet18")):
            run_stream(stream, make_learner("indep", **opts), store=s, run_id=rid, work_dir=tmp_path, max_tasks=1)
            (rec,) = run_events(s, rid)
            assert rec.settings["model"] == "cnn28" and "arch" not in rec.settings
            path = tmp_path / rid / "checkpoint.pt"
            ck = torch.load(path, weights_only=True)
            if rid == "store":
                del ck["settings"]
            else:
                old = json.loads(ck["settings"])
                ck["settings"] = json.dumps({**_as_stored_before(old), "arch": backbone}, sort_keys=True)
            torch.save(ck, path)
            s.delete(protocol="stream", run_id=rid)
            s.add(replace(rec, id=None, settings={**_as_stored_before(rec.settings), "arch": backbone}))
        for rid in ("ck", "store"):
            res = run_stream(stream, make_learner("indep", **opts), store=s, run_id=rid, work_dir=tmp_path)
            assert res.resumed_from == 1 and len(res.events) == len(stream.tasks)
            assert [r.settings.get("model") for r in run_events(s, rid)][1:] == ["cnn28"] * 3
        with pytest.raises(InputError, match=r"started with model='resnet18', now 'cnn28': resume it with the same "
                                             r"model"):
            run_stream(stream, make_learner("indep", **opts), store=s, run_id="other", work_dir=tmp_path)


def test_the_report_groups_a_run_stored_with_arch_with_one_stored_with_model(stream, tmp_path):
    """Two seeds of one configuration, one stored by an older version (``arch``): one row, n = 2."""
    from dataclasses import replace

    from vistabench.report.stream import stream_table

    with ResultsStore(tmp_path / "s.sqlite") as s:
        run_stream(stream, make_learner("indep", trials=1, steps=2, **OPTS), store=s, run_id="new", work_dir=None)
        for rec in run_events(s, "new"):
            assert "model" in rec.settings and "arch" not in rec.settings
            s.add(replace(rec, id=None, seed=1, run_id="old", settings=_as_stored_before(rec.settings)))
        table = stream_table(s.records())
    assert [(r["method"], r["n"], sorted(r["runs"])) for r in table.rows] == [("indep (tiny)", 2, ["new", "old"])]
