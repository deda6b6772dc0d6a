"""MT, BHPO and PT-MT: no future access, cFLOP = sum of charged steps, sequential seeded BHPO."""

import json

import numpy as np
import pytest
import torch

from vistabench.errors import InputError
from vistabench.learners.flops import count_forward_flops, count_train_step_flops
from vistabench.learners.models import build_model
from vistabench.learners.stream import TaskView, batch_size_for, eval_points, learner_names, make_learner
from vistabench.learners.stream.bhpo import decode, search_space
from vistabench.learners.stream.options import PretrainSettings
from vistabench.learners.stream.pretrain import pretrain_meta_train
from vistabench.protocols.stream.runner import run_events, run_stream
from vistabench.store import ResultsStore
from vistabench.streams import Stream, Task, parse_stream
from vistabench.streams.sources import resolve_task

from .test_stream_runner import OPTS, TINY, _walk

torch.set_num_threads(1)
THREE = {**TINY, "tasks": TINY["tasks"][:3]}  # multiclass, multiclass, multilabel


@pytest.fixture
def store(tmp_path):
    with ResultsStore(tmp_path / "r.sqlite") as s:
        yield s


def test_registry_lists_the_new_learners():
    assert {"mt", "bhpo", "pt"} <= set(learner_names())


class Spy:
    """Wraps a real learner: logs the order of resolve / train calls and what train receives."""

    def __init__(self, inner, log):
        self.inner, self.log, self.seen = inner, log, []
        self.name = inner.name

    def __getattr__(self, k):
        return getattr(self.inner, k)

    def train(self, task, data, state, ledger):
        self.log.append(("train", task.uid))
        self.seen.append((task, data, state))
        with pytest.raises(ValueError):
            data.images[0, 0, 0, 0] = 1
        return self.inner.train(task, data, state, ledger)


@pytest.mark.parametrize("name", ["mt", "bhpo", "pt"])
def test_no_future_access_for_the_new_learners(name, store, tmp_path):
    stream = parse_stream(THREE)
    opts = dict(OPTS, trials=2, steps=2, seed=0, knn_train=20, knn_val=10, search_space="large")
    if name == "pt":
        ck = pretrain_meta_train(stream, PretrainSettings(out=tmp_path / "pt.pt", steps=4),
                                 config=make_learner("indep", **OPTS).config)
        opts["checkpoint"] = ck["checkpoint"]
    log, cache = [], {}

    def resolver(task):
        log.append(("resolve", task.uid))
        cache[task.uid] = resolve_task(task, stream)
        return cache[task.uid]

    spy = Spy(make_learner(name, **opts), log)
    res = run_stream(stream, spy, store=store, run_id=name, work_dir=tmp_path, resolver=resolver)
    expected = []
    for t in stream.tasks:
        expected += [("resolve", t.uid), ("train", t.uid)]
    assert log == expected
    for k, ((view, data, state), task) in enumerate(zip(spy.seen, stream.tasks)):
        assert isinstance(view, TaskView) and view.uid == task.uid
        for obj in list(_walk(view)) + list(_walk(data)) + list(_walk(state)):
            assert not isinstance(obj, (Stream, Task))
        assert not np.shares_memory(data.images, cache[task.uid].train.images)
        # the state holds past tasks only: networks (and MT's memory) of tasks 0..k-1
        assert [m["uid"] for m in state["models"]] == [t.uid for t in stream.tasks[:k]]
        assert set(state.get("memory", {})) <= {t.uid for t in stream.tasks[:k]}
    assert len(run_events(store, name)) == 3
    assert all(0 <= e["error"] <= 1 for e in res.events)


def test_mt_cflop_equals_the_sum_of_charged_steps(store, tmp_path):
    stream = parse_stream({**TINY, "tasks": TINY["tasks"][:2]})
    trials, steps = 2, 4
    learner = make_learner("mt", trials=trials, steps=steps, seed=0, knn_train=20, knn_val=10, **OPTS)
    ledgers, preds = [], []
    orig = learner.train

    def train(task, data, state, ledger):
        out = orig(task, data, state, ledger)
        ledgers.append(ledger)
        preds.append(out[1])
        return out

    learner.train = train
    res = run_stream(stream, learner, store=store, run_id="mt", work_dir=tmp_path)
    ev1, led, pred = res.events[1], ledgers[1], preds[1]
    assert pred.info["init_from"] == stream.tasks[0].uid and pred.info["aux_task"] == stream.tasks[0].uid
    head = 3 + 3  # current block + the auxiliary task's block
    model = build_model("cnn28", num_classes=head, in_channels=1, **OPTS["arch_options"])
    bs = batch_size_for(pred.info["fit_images"], min_batch=16)
    per_step = count_train_step_flops(model, (1, 8, 8), bs)
    per_image = count_forward_flops(model, (1, 8, 8), batch_size=1)
    aux_items = [i for i in led.items if "auxiliary" in i["what"]]
    assert len(aux_items) == trials and all(i["steps"] == steps for i in aux_items)
    # every step charged twice (current half + auxiliary half), plus validation and the k-NN probe
    assert ev1["flops_train"] == 2 * trials * steps * per_step == sum(i["flops"] for i in led.items if "steps" in i)
    knn = 30 * count_forward_flops(build_model("cnn28", num_classes=3, in_channels=1, **OPTS["arch_options"]), (1, 8, 8))
    assert ev1["flops_eval"] == trials * eval_points(steps) * pred.info["val_images"] * per_image + knn
    assert ev1["flops"] == sum(i["flops"] for i in led.items)
    # the auxiliary weight is searched (one per trial, in range)
    ws = [c["aux_weight"] for c in pred.info["trial_configs"]]
    assert len(set(ws)) == trials and all(0.1 <= w <= 1.0 for w in ws)
    # first task: nothing to co-train with
    assert preds[0].info["aux_task"] is None and res.events[0]["flops_train"] == trials * steps * count_train_step_flops(
        build_model("cnn28", num_classes=3, in_channels=1, **OPTS["arch_options"]), (1, 8, 8), bs)


def test_joint_loss_equals_a_per_task_computation():
    from vistabench.learners.stream.losses import JointLoss as _JointLoss, LossPart as _Part

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 5, generator=g)
    y = torch.tensor([0, 2, 1, 3, 4, 3])  # 0..2 current (3 outputs), 3..4 auxiliary (2 outputs)
    loss = _JointLoss([_Part(0, 3, 0, 3, 1.0, None, 0.0), _Part(3, 2, 3, 2, 0.25, None, 0.0)])(logits, y)
    cur = torch.nn.functional.cross_entropy(logits[[0, 1, 2], :3], y[[0, 1, 2]], reduction="sum")
    aux = torch.nn.functional.cross_entropy(logits[[3, 4, 5], 3:], y[[3, 4, 5]] - 3, reduction="sum")
    assert loss.item() == pytest.approx(((cur + 0.25 * aux) / 6).item())


def test_bhpo_trials_are_sequential_and_seeded():
    learner = make_learner("bhpo", trials=4, steps=4, **OPTS)
    dims = search_space(learner.config)
    assert [d[0] for d in dims] == ["lr", "label_smoothing", "schedule", "batch_scale", "width", "crop", "flip"]
    assert [d[0] for d in search_space(make_learner("bhpo", search_space="default", **OPTS).config)] == [
        "lr", "label_smoothing"]

    def sequence(seed, scores):
        rng, hist = np.random.default_rng(seed), []
        for t, sc in enumerate(scores):
            hp = learner._propose(rng, t, list(hist))
            hist.append((hp, sc))
        return [h for h, _ in hist]

    a = sequence(1, [0.2, 0.5, 0.4])
    assert a == sequence(1, [0.2, 0.5, 0.4])  # seeded
    assert [h["proposed_by"] for h in a] == ["random", "gp-ucb", "gp-ucb"]
    assert sequence(2, [0.2])[0] != a[0]
    # sequential: a later proposal depends on the earlier trials' scores
    b = sequence(1, [0.5, 0.2, 0.4])
    assert b[:2] == a[:2] and b[2]["u"] != a[2]["u"]
    for h in a:
        lo, hi = learner.config.lr_range
        assert lo <= h["lr"] <= hi and h["width"] in (2, 4, 8) and h["batch_scale"] in (0.5, 1.0, 2.0)
        assert decode(np.array(h["u"]), dims) == {k: v for k, v in h.items() if k not in ("u", "proposed_by")}


def test_bhpo_run_feeds_each_trial_the_earlier_scores(store, tmp_path):
    stream = parse_stream({**TINY, "tasks": TINY["tasks"][:1]})
    learner = make_learner("bhpo", trials=3, steps=4, seed=0, **OPTS)
    seen = []
    orig = learner._propose

    def propose(rng, trial, history):
        seen.append((trial, [s for _, s in history]))
        return orig(rng, trial, history)

    learner._propose = propose
    preds = []
    orig_train = learner.train

    def train(task, data, state, ledger):
        out = orig_train(task, data, state, ledger)
        preds.append(out[1])
        return out

    learner.train = train
    res = run_stream(stream, learner, store=store, run_id="b", work_dir=tmp_path)
    assert [t for t, _ in seen] == [0, 1, 2] and [len(h) for _, h in seen] == [0, 1, 2]
    rec = run_events(store, "b")[0]
    assert rec.settings["search_space"] == "large" and rec.method == "bhpo"
    # cFLOP = the sum of the charged steps, each trial at its own batch size and width
    assert res.events[0]["train_steps"] == 3 * 4
    expected = 0
    for c in preds[0].info["trial_configs"]:
        m = build_model("cnn28", num_classes=3, in_channels=1, width=c["width"])
        expected += c["steps"] * count_train_step_flops(m, (1, 8, 8), c["batch_size"])
    assert res.events[0]["flops_train"] == expected


def test_pretrain_writes_a_weights_only_checkpoint_and_its_cost(tmp_path, store):
    stream = parse_stream(THREE)
    cfg = make_learner("indep", **OPTS).config
    rep = pretrain_meta_train(stream, PretrainSettings(out=tmp_path / "pt.pt", steps=5), config=cfg)
    assert [t["task"] for t in rep["tasks"]] == [t.uid for t in stream.meta_train()]
    assert rep["model"] == "cnn28" and "arch" not in rep  # the backbone under its name
    sd = torch.load(rep["checkpoint"], weights_only=True)
    heads = sum(t["outputs"] for t in rep["tasks"])
    model = build_model("cnn28", num_classes=heads, in_channels=1, **OPTS["arch_options"])
    model.load_state_dict(sd)  # one output block per meta-train task
    n = sum(t["images"] for t in rep["tasks"])
    bs = batch_size_for(n, min_batch=16)
    assert rep["flops"] == 5 * count_train_step_flops(model, (1, 8, 8), bs)
    assert json.loads((tmp_path / "pt.pt.json").read_text())["flops"] == rep["flops"]
    learner = make_learner("pt", trials=1, steps=4, checkpoint=rep["checkpoint"], **OPTS)
    run_stream(stream, learner, store=store, run_id="ptmt", work_dir=tmp_path, max_tasks=1)
    rec = run_events(store, "ptmt")[0]
    assert rec.settings["pretrain_flops"] == rep["flops"]  # reported apart from the run's cFLOP
    with pytest.raises(InputError, match="no meta-train task"):
        pretrain_meta_train(parse_stream({**THREE, "meta_test_from_year": 1990}),
                            PretrainSettings(out=tmp_path / "x.pt", steps=1))


def test_mt_resumes_with_its_memory(tmp_path):
    stream = parse_stream(THREE)
    opts = dict(OPTS, trials=1, steps=2, seed=0, knn_train=20, knn_val=10)
    with ResultsStore(tmp_path / "a.sqlite") as s1:
        full = run_stream(stream, make_learner("mt", **opts), store=s1, run_id="m", work_dir=tmp_path / "a")
    with ResultsStore(tmp_path / "b.sqlite") as s2:
        run_stream(stream, make_learner("mt", **opts), store=s2, run_id="m", work_dir=tmp_path / "b", max_tasks=2)
        ck = torch.load(tmp_path / "b" / "m" / "checkpoint.pt", weights_only=True)
        assert sorted(ck["state"]["memory"]) == [t.uid for t in stream.tasks[:2]]
        resumed = run_stream(stream, make_learner("mt", **opts), store=s2, run_id="m", work_dir=tmp_path / "b")
    assert resumed.resumed_from == 2
    keys = ("task", "error", "flops", "init_from", "curve")
    assert [{k: e[k] for k in keys} for e in resumed.events] == [{k: e[k] for k in keys} for e in full.events]


def test_bhpo_schedule_and_separate_augmentations():
    from vistabench.learners.stream.options import TrialSchedule
    from vistabench.learners.stream.search import SearchTrainer as _SearchTrainer
    from vistabench.learners.tensors import Normaliser
    from vistabench.learners.trainer import TrainConfig

    model = build_model("cnn28", num_classes=2, in_channels=1, width=2)
    tr = _SearchTrainer(model, TrainConfig(lr=0.2, epochs=1, count_flops=False),
                         trial=TrialSchedule(shape="piecewise"))
    assert [tr.lr_at(s, 100, 10) for s in (0, 49, 50, 74, 75, 99)] == pytest.approx(
        [0.2, 0.2, 0.02, 0.02, 0.002, 0.002])
    cos = _SearchTrainer(model, TrainConfig(lr=0.2, epochs=1, count_flops=False))
    assert cos.lr_at(50, 100, 10) == pytest.approx(0.1)  # the trainer's cosine, unchanged
    imgs = np.random.default_rng(0).integers(0, 255, (16, 8, 8, 1)).astype(np.uint8)
    flip_only = _SearchTrainer(model, TrainConfig(epochs=1, augment=True, count_flops=False),
                               trial=TrialSchedule(flip=True))
    flip_only.normaliser = Normaliser.fit(imgs)
    out = flip_only.batch(imgs, np.arange(16), torch.Generator().manual_seed(0))
    ref = flip_only.normaliser.apply(torch.as_tensor(imgs, dtype=torch.float32).permute(0, 3, 1, 2) / 255.0)
    same = [torch.allclose(out[i], ref[i]) for i in range(16)]
    flipped = [torch.allclose(out[i], ref[i].flip(2)) for i in range(16)]
    assert all(a or b for a, b in zip(same, flipped)) and any(flipped) and not all(flipped)  # no crop shift
