"""Issue 39 items 1–6 (the Nevis stream against dm_nevis), each value read where the learner uses
it: the task kinds of the built-in streams, the multilabel trial score, a fresh network's
initialisation, the input scaling, the trials' fit/validation split and BHPO's space."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vistabench.errors import InputError
from vistabench.learners.stream import make_learner, search
from vistabench.learners.stream.base import ComputeLedger, TaskView
from vistabench.learners.stream.search import haiku_init, selection_score
from vistabench.protocols.stream.config import StreamConfig
from vistabench.streams import load_stream
from vistabench.streams.sources import resolve_task


def _view(task, data, seed=1):
    return TaskView(uid=task.uid, name=task.name, year=task.year, domain=task.domain, kind=task.kind,
                    num_classes=data.train.num_classes, class_names=tuple(data.train.class_names), seed=seed)


def _train(cfg: StreamConfig, task_index: int):
    stream = load_stream("embedded")
    task = stream.tasks[task_index]
    data = resolve_task(task, stream)
    learner = make_learner("indep", **cfg.learner_config())
    _, pred = learner.train(_view(task, data), data.train.read_only_copy(), learner.init(), ComputeLedger())
    return learner, pred, data


def test_dm_nevis_streams_take_the_kinds_of_dm_nevis_tfds_builder():
    # item 1: tfds_builder.py:28–56 (voc/2012 and celeb_a multi-label, sun397 single-label)
    kinds = {t.name: t.kind for t in load_stream("nevis-full").tasks}
    assert (kinds["Pascal 2012"], kinds["CelebA"], kinds["SUN 397"]) == ("multilabel", "multilabel", "multiclass")
    assert {t.name: t.kind for t in load_stream("nevis-short").tasks}["Pascal 2012"] == "multilabel"
    paper = {t.name: t.kind for t in load_stream("nevis-full-paper").tasks}  # the paper's table, kept
    assert (paper["Pascal 2012"], paper["CelebA"], paper["SUN 397"]) == ("multiclass", "multiclass", "multilabel")


def test_multilabel_selection_error_is_dm_nevis_per_label_error():
    # item 2: heads.py:191 — errors of the Bernoulli mode (p > 0.5) against the targets, mean over both axes
    logits = np.array([[2.0, -1.0, 0.0], [-3.0, 0.5, 4.0]])
    targets = np.array([[1, 0, 1], [0, 0, 1]])
    assert selection_score("multilabel", logits, targets, multilabel="error") == pytest.approx(1 - 2 / 6)
    assert selection_score("multilabel", logits, targets, multilabel="map") != pytest.approx(1 - 2 / 6)


def test_trials_score_multilabel_tasks_with_the_configs_selection(monkeypatch):
    seen = []
    original = search.selection_score

    def spy(kind, logits, targets, **kw):
        seen.append((kind, kw.get("multilabel")))
        return original(kind, logits, targets, **kw)

    monkeypatch.setattr(search, "selection_score", spy)
    cfg = StreamConfig.from_dict({"stream": "embedded", "trials": 1, "steps": 2, "width": 2,
                                  "multilabel_selection": "error"})
    index = next(i for i, t in enumerate(load_stream("embedded").tasks) if t.kind == "multilabel")
    _train(cfg, index)
    assert seen and all(s == ("multilabel", "error") for s in seen)
    assert StreamConfig.from_dict({"stream": "nevis-full"}).multilabel_selection == "error"
    assert StreamConfig.from_dict({"stream": "embedded"}).multilabel_selection == "map"


def test_haiku_init_statistics():
    # item 3: haiku VarianceScaling(1, fan_in, truncated_normal) for convolutions; TruncatedNormal(1/√fan_in) linear
    conv, lin = torch.nn.Conv2d(64, 128, 3, bias=False), torch.nn.Linear(512, 100)
    torch.manual_seed(0)
    haiku_init(torch.nn.Sequential(conv, lin))
    assert float(conv.weight.std()) == pytest.approx(math.sqrt(1 / (64 * 9)), rel=0.03)
    assert float(conv.weight.abs().max()) <= 2 * math.sqrt(1 / (64 * 9)) / 0.8796 + 1e-7
    # a normal truncated at ±2σ has std 0.8796σ
    assert float(lin.weight.std()) == pytest.approx(0.8796 / math.sqrt(512), rel=0.03)
    assert float(lin.bias.abs().max()) == 0.0


def test_fresh_networks_take_the_configs_init(monkeypatch):
    built = []
    original = search.SearchLearner._build

    def spy(self, *a, **kw):
        model = original(self, *a, **kw)
        built.append(model)
        return model

    monkeypatch.setattr(search.SearchLearner, "_build", spy)
    for init, want in (("haiku", lambda fan: math.sqrt(1 / fan)), ("torch", lambda fan: None)):
        built.clear()
        cfg = StreamConfig.from_dict({"stream": "embedded", "trials": 1, "steps": 2, "width": 8, "weight_init": init})
        _train(cfg, 0)
        conv = next(m for m in built[0].modules() if isinstance(m, torch.nn.Conv2d) and m.weight.numel() > 2000)
        # the network as built (its trial trains a copy of these values: read before training)
        fan_in, fan_out = conv.weight[0].numel(), conv.weight.shape[0] * conv.weight[0, 0].numel()
        expected = want(fan_in) or math.sqrt(2 / fan_out)
        assert float(conv.weight.detach().std()) == pytest.approx(expected, rel=0.15), init
    assert StreamConfig.from_dict({"stream": "nevis-full"}).weight_init == "haiku"


def test_input_scaling_minus_one_one_is_the_trainers_normaliser():
    # item 4: augmentations.py:68–88 — 2·x/255 − 1
    cfg = StreamConfig.from_dict({"stream": "embedded", "trials": 1, "steps": 2, "width": 2,
                                  "input_scaling": "minus_one_one"})
    _, pred, data = _train(cfg, 0)
    norm = pred.members[0].trainer.normaliser
    x = torch.tensor([[[[0.0]]], [[[1.0]]]])  # pixel values 0 and 255 after the 1/255 scaling
    np.testing.assert_allclose(norm.apply(x.clone()).flatten().numpy(), [-1.0, 1.0])
    _, own, _ = _train(StreamConfig.from_dict({"stream": "embedded", "trials": 1, "steps": 2, "width": 2}), 0)
    assert not np.allclose(own.members[0].trainer.normaliser.mean, 0.5)  # measured on the task
    assert StreamConfig.from_dict({"stream": "nevis-full"}).input_scaling == "minus_one_one"


def test_trials_hold_out_val_fraction_of_the_training_part():
    # item 5 (listed, no option): ours a random stratified split of the task's training part, not dm_nevis's
    # fixed dev split (nevis_stream.py:906–935): read from the trial's record
    cfg = StreamConfig.from_dict({"stream": "embedded", "trials": 1, "steps": 2, "width": 2})
    _, pred, data = _train(cfg, 0)
    n = len(data.train.targets)
    assert pred.info["fit_images"] + pred.info["val_images"] == n
    assert pred.info["val_images"] == pytest.approx(cfg.val_fraction * n, abs=data.train.num_classes)


def test_bhpo_large_space_refuses_a_model_without_width():
    # item 6: bhpo.py:47–49 dropped the architecture dimension silently
    with pytest.raises(InputError, match="^search_space: 'large' searches the architecture"):
        StreamConfig.from_dict({"stream": "nevis-full", "learner": "bhpo"})
    ok = StreamConfig.from_dict({"stream": "nevis-full", "learner": "bhpo", "model": "cnn28"})
    from vistabench.learners.stream.bhpo import search_space
    dims = [d[0] for d in search_space(make_learner("bhpo", **ok.learner_config()).config)]
    assert "width" in dims
    StreamConfig.from_dict({"stream": "nevis-full", "learner": "bhpo", "search_space": "default"})
