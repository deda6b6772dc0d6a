"""The dm-nevis recipe against google-deepmind/dm_nevis's logic, re-written here (issue 22), and the
stream config's contract (issue 20): grid keys, per-cell run ids, --print-config."""

from __future__ import annotations

import ast
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from vistabench.learners.stream.options import batch_size_for
from vistabench.protocols.stream.config import StreamConfig

SRC = Path(__file__).resolve().parents[2] / "src"


# ------------------------------------------------------------------------------ batch size
def _dm_nevis_batch(n: int) -> int:  # finetuning_dknn_learner._adapt_batch_size_to_dataset_size
    return min(512, max(16, int(2 ** int(np.log2(0.0025 * n)))))


@pytest.mark.parametrize("n", [1, 10, 100, 6_399, 6_400, 10_000, 12_799, 12_800, 25_600, 51_200, 100_000,
                               204_799, 204_800, 10**6, 10**7])
def test_batch_size_rule_is_dm_nevis_on_a_table_of_n(n):
    assert batch_size_for(n, rule="0.0025n", min_batch=16, max_batch=512) == _dm_nevis_batch(n)


def test_batch_size_rules_differ_where_the_issue_says():
    assert batch_size_for(10_000, rule="0.0025n", max_batch=512) == 16
    assert batch_size_for(10_000, rule="n/16", max_batch=256) == 256


# ------------------------------------------------------------------------------ the printed recipe
def test_nevis_streams_default_to_the_dm_nevis_recipe_embedded_to_cpu():
    cfg = StreamConfig.from_dict({"stream": "nevis-full"})
    assert cfg.recipe == "dm-nevis"
    assert (tuple(cfg.lr_range), cfg.nesterov, cfg.weight_decay, cfg.decay_mask, cfg.batch_size_rule, cfg.max_batch,
            cfg.schedule, cfg.warmup_epochs, cfg.final_lr, cfg.keep_best_state) == (
        (1e-4, 0.1), True, 1e-4, "weights", "0.0025n", 512, "warmup-cosine", 7, 1e-8, True)
    ftd = StreamConfig.from_dict({"stream": "nevis-short", "learner": "ft-d"}).learner_options
    assert ftd == {"knn_train": 10_000, "knn_val": 5_000, "knn_k": 5, "knn_fresh": True,
                   "knn_fresh_wins": "next-past", "knn_bn": "train", "knn_multilabel": "map"}
    # finetuning_dknn.py: 'trials_per_task': 16 on resnet.CifarResNet34
    assert (cfg.trials, cfg.model) == (16, "cifar_resnet34")
    assert StreamConfig.from_dict({"stream": "embedded"}).trials == 2
    cpu = StreamConfig.from_dict({"stream": "embedded", "learner": "ft-d"})
    assert cpu.recipe == "cpu" and tuple(cpu.lr_range) == (3e-3, 0.3) and cpu.learner_options["knn_train"] == 200
    # what the user gives wins over the recipe
    assert StreamConfig.from_dict({"stream": "nevis-full", "weight_decay": 5e-4}).weight_decay == 5e-4


def test_print_config_json_shows_the_dm_nevis_recipe_fast_and_without_torch():
    code = ("import sys, json, io, contextlib; from vistabench.cli import main; buf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf): rc = main(['stream', 'run', '--print-config', '--json'])\n"
            "print(json.dumps({'rc': rc, 'cfg': json.loads(buf.getvalue()), 'torch': 'torch' in sys.modules}))")
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    seconds = time.perf_counter() - t0
    res = json.loads(out.stdout)
    cfg = res["cfg"]
    assert res["rc"] == 0 and not res["torch"] and seconds < 3
    assert cfg["batch_size_rule"] == "0.0025n" and cfg["max_batch"] == 512 and cfg["min_batch"] == 16
    assert cfg["optimizer"] == "sgd" and cfg["nesterov"] is True and cfg["momentum"] == 0.9
    assert cfg["weight_decay"] == 1e-4 and cfg["lr_range"] == [1e-4, 0.1] and cfg["schedule"] == "warmup-cosine"
    assert StreamConfig.from_dict(cfg) == StreamConfig.from_dict({})  # the printed config reads back


# ------------------------------------------------------------------------------ lr search space
def test_lr_is_drawn_log_uniformly_in_the_dm_nevis_range():
    from vistabench.learners.stream import make_learner

    learner = make_learner("indep", **StreamConfig.from_dict({"stream": "nevis-full"}).learner_config())
    rng = np.random.default_rng(0)
    lrs = np.array([learner._sample(rng)["lr"] for _ in range(4000)])
    assert lrs.min() >= 1e-4 and lrs.max() <= 0.1
    logs = np.log10(lrs)  # log-uniform on [-4, -1]: mean -2.5, each decade a third
    assert abs(logs.mean() + 2.5) < 0.05
    assert abs(np.mean(logs < -3) - 1 / 3) < 0.03


# ------------------------------------------------------------------------------ optimiser and schedule
def _optax_warmup_cosine(step, *, peak, warmup, total, end):  # optax.warmup_cosine_decay_schedule(init 0)
    if step < warmup:
        return peak * step / warmup
    frac = min(step - warmup, total - warmup) / (total - warmup)
    return end + (peak - end) * 0.5 * (1 + math.cos(math.pi * frac))


def test_warmup_cosine_follows_optax():
    from vistabench.learners.models import build_model
    from vistabench.learners.recipe import Recipe
    from vistabench.learners.stream.options import TrialSchedule
    from vistabench.learners.stream.search import SearchTrainer
    from vistabench.learners.trainer import TrainConfig

    model = build_model("cnn28", num_classes=2, in_channels=1, seed=0, width=2)
    recipe = Recipe(schedule="warmup-cosine", warmup_epochs=7)
    tr = SearchTrainer(model, TrainConfig(lr=0.05, epochs=1, count_flops=False),
                       trial=TrialSchedule(recipe=recipe, final_lr=1e-8, steps_per_data_epoch=3))
    total = 100
    warm = min(total - 1, 7 * 3)  # dm_nevis: min(max_steps - 1, warmup_epochs * steps_per_epoch)
    for step in (0, 1, 10, 20, 21, 22, 50, 99):
        assert tr.lr_at(step, total, 25) == pytest.approx(
            _optax_warmup_cosine(step, peak=0.05, warmup=warm, total=total, end=1e-8), rel=1e-12, abs=1e-15)
    # warm-up longer than the run: dm_nevis caps it at total - 1 steps
    short = SearchTrainer(model, TrainConfig(lr=0.05, epochs=1, count_flops=False),
                          trial=TrialSchedule(recipe=recipe, final_lr=1e-8, steps_per_data_epoch=30))
    assert short.lr_at(8, 10, 10) == pytest.approx(0.05 * 8 / 9)
    assert short.lr_at(9, 10, 10) == pytest.approx(_optax_warmup_cosine(9, peak=0.05, warmup=9, total=10, end=1e-8))


def test_sgdw_step_matches_dm_nevis_reference():
    """One step of SGD, Nesterov 0.9, weight decay added to the gradient of conv / linear weights only
    (optax.add_decayed_weights(wd, mask=names 'w') then optax.sgd(nesterov))."""
    import torch

    from vistabench.learners.models import build_model
    from vistabench.learners.stream.options import TrialSchedule
    from vistabench.learners.stream.search import SearchTrainer
    from vistabench.learners.trainer import TrainConfig

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (32, 8, 8, 1), dtype=np.uint8)
    y = np.arange(32) % 2
    lr, wd, mom = 0.1, 0.01, 0.9
    model = build_model("cnn28", num_classes=2, in_channels=1, seed=0, width=2)
    ref = build_model("cnn28", num_classes=2, in_channels=1, seed=0, width=2)
    tr = SearchTrainer(model, TrainConfig(lr=lr, epochs=1, batch_size=32, momentum=mom, nesterov=True,
                                          weight_decay=0.0, count_flops=False), trial=TrialSchedule(masked_decay=wd))
    tr.fit(x, y)  # one step: the cosine's first lr is lr
    xb = tr.normaliser.apply(torch.from_numpy(x).permute(0, 3, 1, 2).float() / 255.0)
    ref.train()
    loss = torch.nn.functional.cross_entropy(ref(xb), torch.from_numpy(y))
    grads = torch.autograd.grad(loss, list(ref.parameters()))
    for (name, p_ref), g, p_new in zip(ref.named_parameters(), grads, model.parameters()):
        decayed = p_ref.dim() > 1  # conv / linear weights ('w' in haiku); biases and BN scale/offset are not
        g = g + wd * p_ref.detach() if decayed else g
        buf = g  # first step: the momentum buffer is the gradient
        expected = p_ref.detach() - lr * (g + mom * buf)
        assert torch.allclose(p_new.detach(), expected, atol=1e-5), name


def test_keep_best_state_keeps_the_best_validation_network_and_scores_the_last(monkeypatch):
    import torch

    from vistabench.learners.stream import make_learner, search
    from vistabench.learners.stream.base import ComputeLedger, TaskView
    from vistabench.streams import load_stream
    from vistabench.streams.sources import resolve_task

    scores = iter([0.5, 0.9, 0.3, 0.4])
    snapshots = []
    original = search.SearchTrainer.predict_logits

    def spy(self, images):
        snapshots.append({k: v.detach().clone() for k, v in self.model.state_dict().items()})
        return original(self, images)

    monkeypatch.setattr(search.SearchTrainer, "predict_logits", spy)
    monkeypatch.setattr(search, "selection_score", lambda kind, logits, targets, **kw: next(scores))
    stream = load_stream("embedded")
    task = stream.tasks[0]
    data = resolve_task(task, stream)
    cfg = StreamConfig.from_dict({"stream": "embedded", "trials": 1, "steps": 4, "keep_best_state": True, "width": 2})
    learner = make_learner("indep", **cfg.learner_config())
    view = TaskView(uid=task.uid, name=task.name, year=task.year, domain=task.domain, kind=task.kind,
                    num_classes=data.train.num_classes, class_names=tuple(data.train.class_names), seed=1)
    _, pred = learner.train(view, data.train.read_only_copy(), learner.init(), ComputeLedger())
    kept = pred.members[0].trainer.model.state_dict()
    assert len(snapshots) == 4 and pred.members[0].config["kept_point"] == 2
    assert all(torch.equal(kept[k], snapshots[1][k]) for k in kept)
    assert not all(torch.equal(kept[k], snapshots[3][k]) for k in kept)
    assert pred.members[0].score == 0.4  # dm_nevis: the trial's cost is its last validation metric


# ------------------------------------------------------------------------------ FT-d's choice
def _tiny_state(learner, stream, data):
    """A learner state with one past network (trained on task 0)."""
    from vistabench.learners.stream.base import ComputeLedger, TaskView

    t = stream.tasks[0]
    view = TaskView(uid=t.uid, name=t.name, year=t.year, domain=t.domain, kind=t.kind,
                    num_classes=data.train.num_classes, class_names=tuple(data.train.class_names), seed=0)
    state, _ = learner.train(view, data.train.read_only_copy(), learner.init(), ComputeLedger())
    return state, view


@pytest.mark.parametrize("fresh, wins, fresh_score, expected", [
    (True, "scratch", 0.9, "random"), (True, "scratch", 0.1, "past"), (False, "scratch", 0.9, "past"),
    # dm_nevis _init_from_transfer_matrix: a winning fresh network is skipped for the best past task
    (True, "next-past", 0.9, "past"), (True, "next-past", 0.1, "past")])
def test_ftd_fresh_network_candidate(monkeypatch, fresh, wins, fresh_score, expected):
    from vistabench.learners.stream import baselines, make_learner
    from vistabench.learners.stream.base import ComputeLedger
    from vistabench.streams import load_stream
    from vistabench.streams.sources import resolve_task

    stream = load_stream("embedded")
    data = resolve_task(stream.tasks[0], stream)
    opts = {**StreamConfig.from_dict({"stream": "embedded", "trials": 1, "steps": 4, "width": 2}).learner_config(),
            "knn_fresh": fresh, "knn_fresh_wins": wins}
    learner = make_learner("ft-d", **opts)
    state, view = _tiny_state(learner, stream, data)
    calls = []

    def fake_knn(f_tr, y_tr, f_va, y_va, **kw):
        calls.append(1)
        return 0.5 if len(calls) == 1 else fresh_score  # past network first, the fresh one last

    monkeypatch.setattr(baselines, "knn_score", fake_knn)
    ledger = ComputeLedger()
    init, init_from = learner._init_from(view, data.train, np.arange(len(data.train)), state, ledger)
    assert len(calls) == (2 if fresh else 1)
    assert len(ledger.items) == len(calls)  # every candidate's forward passes are charged
    if expected == "random":
        assert init is None and init_from == "random"
    else:
        assert init_from == state["models"][0]["uid"] and init is state["models"][0]["state_dict"]
    if fresh:  # the fresh network's score is recorded either way
        assert learner.last_relatedness["random"] == fresh_score


def test_knn_multilabel_map_is_dm_nevis_reference():
    """dm_nevis's _MultiLabelKNNClassifier: per label, the predict_proba of a KNeighborsClassifier on that
    label's 0/1 column; then sklearn's macro average_precision_score."""
    from sklearn.metrics import average_precision_score
    from sklearn.neighbors import KNeighborsClassifier

    from vistabench.learners.stream.baselines import knn_score

    rng = np.random.default_rng(0)
    f_tr, f_te = rng.normal(size=(60, 4)), rng.normal(size=(30, 4))
    y_tr = (rng.random((60, 3)) < 0.4).astype(np.int32)
    y_te = (rng.random((30, 3)) < 0.4).astype(np.int32)
    y_tr[:, 2] = (f_tr[:, 0] > 0)
    y_te[:, 2] = (f_te[:, 0] > 0)
    knn = KNeighborsClassifier().fit(f_tr, y_tr)
    proba = np.stack([p[:, 1] for p in knn.predict_proba(f_te)], axis=1)
    expected = average_precision_score(y_te, proba)
    assert knn_score(f_tr, y_tr, f_te, y_te, kind="multilabel", k=5, multilabel="map") == pytest.approx(expected)
    # the cpu recipe keeps exact-match accuracy over label patterns
    exact = knn_score(f_tr, y_tr, f_te, y_te, kind="multilabel", k=5, multilabel="exact-match")
    _, pat = np.unique(np.concatenate([y_tr, y_te]), axis=0, return_inverse=True)
    pat = pat.reshape(-1)
    by_pattern = KNeighborsClassifier().fit(f_tr, pat[:60]).predict(f_te)
    assert exact == pytest.approx(np.mean(by_pattern == pat[60:]))


def test_knn_embeds_in_training_mode_batch_norm():
    import torch

    from vistabench.learners.models import build_model
    from vistabench.learners.stream import make_learner
    from vistabench.learners.tensors import Normaliser

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (300, 8, 8, 1), dtype=np.uint8)
    model = build_model("cnn28", num_classes=2, in_channels=1, seed=0, width=2)
    with torch.no_grad():  # give the running statistics values unlike any batch's
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.fill_(3.0)
                m.running_var.fill_(9.0)
    norm = Normaliser.fit(images)
    x = norm.apply(torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255.0)
    model.train()
    with torch.no_grad():  # dm_nevis: is_training=True, batches of 128 (batch_size_embed_for_knn)
        ref = torch.cat([model.features(x[s:s + 128]) for s in range(0, 300, 128)]).numpy()
    learner = make_learner("ft-d", knn_bn="train")
    got = learner._embed(model, norm, images)
    assert np.allclose(got, ref, atol=1e-5)
    evalmode = make_learner("ft-d", knn_bn="eval")._embed(model, norm, images)
    assert not np.allclose(evalmode, ref, atol=1e-3)


# ------------------------------------------------------------------------------ grid keys and run ids
TINY_CANONICAL = {"arch": "cnn28", "checkpoint": None, "data_root": None, "device": "cpu", "learner": "indep",
                  "max_tasks": None, "meta_test_from": None, "multilabel_absent": "zero", "run_id": None,
                  "search_space": "large", "seed": 0, "steps": 10, "stream": "embedded", "trials": 1, "width": None}
NEVIS_CANONICAL = {"arch": "resnet18", "checkpoint": None, "data_root": "data/nevis", "device": "cuda",
                   "learner": "ft-d", "max_tasks": None, "meta_test_from": None, "multilabel_absent": "zero",
                   "run_id": None, "search_space": "large", "seed": 2, "steps": 10000, "stream": "nevis-full",
                   "trials": 16, "width": None}


def test_grid_keys_of_the_examples():
    """examples/stream-tiny.yaml keeps its cells' keys (the canonical dicts of `grid status --json` before
    configs). examples/stream-nevis.yaml: its cells now run the dm-nevis recipe, a different run, so
    their key says so; pinned to recipe cpu they are the old cells exactly."""
    tiny = {"stream": "embedded", "trials": 1, "steps": 10, "learner": "indep", "seed": 0}
    assert StreamConfig.from_dict(tiny).key_dict() == TINY_CANONICAL
    assert StreamConfig.from_dict({**tiny, "learner": "ft-prev"}).key_dict() == {**TINY_CANONICAL, "learner": "ft-prev"}
    nevis = {"stream": "nevis-full", "data_root": "data/nevis", "arch": "resnet18", "trials": 16, "steps": 10000,
             "device": "cuda", "learner": "ft-d", "seed": 2}
    assert StreamConfig.from_dict({**nevis, "recipe": "cpu"}).key_dict() == NEVIS_CANONICAL
    key = StreamConfig.from_dict(nevis).key_dict()
    assert key["recipe"] == "dm-nevis" and key["batch_size_rule"] == "0.0025n"
    assert key["learner_options"]["knn_fresh"] is True
    # runtime-only fields never change a key
    assert StreamConfig.from_dict({**tiny, "engine": "ray", "threads": 2, "max_parallel": 3}).key_dict() == TINY_CANONICAL


def test_cells_differing_only_in_a_learner_option_get_their_own_run_ids():
    from vistabench.protocols.stream.runner import run_id_for
    from vistabench.streams import load_stream

    stream = load_stream("embedded")
    base = {"stream": "embedded", "learner": "ft-d", "trials": 1, "steps": 4}
    ids = {run_id_for(stream, StreamConfig.from_dict({**base, "learner_options": {"knn_k": k}})) for k in (3, 5, 7)}
    assert len(ids) == 3
    # the classic settings keep the classic id (resuming older runs, the demo's run names)
    assert run_id_for(stream, StreamConfig.from_dict(base)) == "embedded-ft-d-t1-s4-seed0"
    assert run_id_for(stream, StreamConfig.from_dict({**base, "run_id": "mine"})) == "mine"


# ------------------------------------------------------------------------------ layering of the stream modules
def _imports(path: Path, package: str) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):  # function-level imports count too
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            if node.module is None:
                out |= {f"{target}.{a.name}" for a in node.names}
            else:
                out.add(target)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out


def test_stream_learner_modules_have_no_import_cycle():
    pkg = SRC / "vistabench" / "learners" / "stream"
    mods = {f"vistabench.learners.stream.{p.stem}": p for p in pkg.glob("*.py") if p.stem != "__init__"}
    graph = {m: {i for i in _imports(p, "vistabench.learners.stream") if i in mods} for m, p in mods.items()}

    def reach(start, node, seen):
        for nxt in graph[node]:
            if nxt == start:
                return True
            if nxt not in seen:
                seen.add(nxt)
                if reach(start, nxt, seen):
                    return True
        return False

    cyclic = [m for m in graph if reach(m, m, set())]
    assert not cyclic, cyclic
    # the torch-free settings module imports no other module of the package, and no torch
    assert not graph["vistabench.learners.stream.options"]
    assert "torch" not in _imports(pkg / "options.py", "vistabench.learners.stream")


def test_dm_nevis_recipe_learner_builds_a_cifar_resnet34_and_runs_16_trials():
    # dm_nevis experiments_jax/training/resnet.py CifarResNet34: 3x3/1 stem, no max-pool, blocks 3-4-6-3
    import torch

    from vistabench.learners.stream import make_learner

    cfg = StreamConfig.from_dict({"stream": "nevis-short", "learner": "indep"})
    learner = make_learner("indep", **cfg.learner_config())
    assert learner.config.trials == 16
    net = learner._build(5, 3, 64, seed=0, init=None)
    convs = [m for m in net.stem.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.kernel_size, c.stride) for c in convs] == [((3, 3), (1, 1))]
    assert not any(isinstance(m, torch.nn.MaxPool2d) for m in net.modules())
    assert [len(s) for s in net.stages] == [3, 4, 6, 3]
    assert net(torch.zeros(2, 3, 64, 64)).shape == (2, 5)
