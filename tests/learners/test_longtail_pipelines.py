"""The long-tail pipelines against their reference code, piece by piece (issue 21): the lr each
epoch actually applies (read from the optimizer) under every reference recipe, BBN's cumulative α
and reversed sampler, IB's switch, TDE's counterfactual α at eval, GCL's classifier stage, cRT's
re-initialised head, batch-norm mode and class-aware sampler."""

from __future__ import annotations

import bisect
import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from vistabench.data import Dataset
from vistabench.learners.longtail import MethodContext, fit_predict
from vistabench.learners.longtail.methods import ClassAwareSampler, retrain_classifier
from vistabench.learners.longtail.nets import BBNNet, reversed_probabilities
from vistabench.learners.longtail.options import CRTOptions, GCLOptions
from vistabench.learners.longtail.survey import bbn_step, gcl_classifier_stage, ib_step
from vistabench.learners.losses import IBLoss, bbn_alpha, tde_counterfactual
from vistabench.learners.models import NormedLinear, build_model
from vistabench.learners.trainer import TrainConfig, Trainer
from vistabench.protocols.longtail.config import LongtailConfig

RNG = np.random.default_rng(0)
LABELS = np.r_[np.zeros(40, int), np.ones(15, int), np.full(5, 2)]
IMAGES = RNG.integers(0, 256, (60, 8, 8, 1), dtype=np.uint8)
TRAIN = Dataset(IMAGES, LABELS, ["head", "mid", "tail"])
COUNTS = np.array([40, 15, 5])


class _Tiny(nn.Module):
    """features = flatten, classifier = linear: a model whose steps cost nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.classifier = nn.Linear(4, 2)
        self.in_channels, self.feature_dim = 1, 4

    def features(self, x):
        return x.flatten(1)

    def forward(self, x):
        return self.classifier(self.features(x))


# --- the references' lr functions, as written in their code (1-based epochs where they use them) ---

def _ldam_lr(base, e0, f1=0.01, f2=0.0001):  # LDAM-DRW cifar_train.py adjust_learning_rate
    epoch = e0 + 1
    if epoch <= 5:
        return base * epoch / 5
    if epoch > 180:
        return base * f2
    if epoch > 160:
        return base * f1
    return base


def _ib_lr(base, e0, start=100):  # IB-Loss cifar_train.py adjust_learning_rate ('IB' in loss_type)
    epoch = e0 + 1
    if epoch > start:
        return base * (0.000001 if epoch > 180 else 0.0001 if epoch > 160 else 0.01)
    return _ldam_lr(base, e0)


def _custom_lr(base, e0, gamma):  # RIDE / SADE train.py CustomLR (0-based LambdaLR epochs)
    lr = gamma * gamma if e0 >= 180 else gamma if e0 >= 160 else 1
    if e0 < 5:
        lr = lr * float(1 + e0) / 5
    return base * lr


def _warmup_multistep_lr(base, e0):  # BBN / TDE / LADE WarmupMultiStepLR, stepped before 1-based epoch
    last = e0 + 1
    factor = 1.0
    if last < 5:
        a = last / 5
        factor = (1.0 / 3) * (1 - a) + a
    return base * factor * 0.01 ** bisect.bisect_right([120, 160], last)


def _gcl_lr(base, e0):  # GCLLoss cifar_train_backbone.py adjust_learning_rate
    epoch = e0 + 1
    if epoch <= 5:
        return base * epoch / 5
    return base * (0.01 if epoch > 180 else 0.1 if epoch > 160 else 1)


REFERENCE_LR = {"ldam_drw": _ldam_lr, "ce": _ldam_lr, "ib": _ib_lr,
                "ride": lambda b, e: _custom_lr(b, e, 0.01), "tade": lambda b, e: _custom_lr(b, e, 0.1),
                "bbn": _warmup_multistep_lr, "tde": _warmup_multistep_lr, "lade": _warmup_multistep_lr,
                "gcl": _gcl_lr}


@pytest.mark.parametrize("method", sorted(REFERENCE_LR))
def test_lr_applied_each_epoch_is_the_reference_schedule(method):
    cfg = LongtailConfig.from_dict({"data": "cifar100:/x", "method": method, "imbalance": 100})
    assert cfg.epochs == 200
    x = RNG.integers(0, 256, (8, 2, 2, 1), dtype=np.uint8)
    y = np.arange(8) % 2
    tc = TrainConfig(epochs=cfg.epochs, lr=cfg.lr, batch_size=8, momentum=cfg.momentum, nesterov=cfg.nesterov,
                     weight_decay=cfg.weight_decay, warmup_epochs=cfg.warmup_epochs, warmup_start=cfg.warmup_start,
                     schedule=cfg.schedule, lr_milestones=cfg.lr_milestones, lr_factors=cfg.lr_factors,
                     count_flops=False)
    res = Trainer(_Tiny(), tc).fit(x, y)
    applied = [h["lr"] for h in res.history]  # read from the optimizer's param group
    expected = [REFERENCE_LR[method](cfg.lr, e) for e in range(cfg.epochs)]
    np.testing.assert_allclose(applied, expected, rtol=1e-12)


def test_cpu_recipe_keeps_one_cosine_per_step():
    tc = TrainConfig(epochs=3, lr=0.05, batch_size=4, count_flops=False)
    tr = Trainer(_Tiny(), tc)
    res = tr.fit(RNG.integers(0, 256, (8, 2, 2, 1), dtype=np.uint8), np.arange(8) % 2)
    total = 6
    assert [h["lr"] for h in res.history] == pytest.approx(
        [0.05 * 0.5 * (1 + math.cos(math.pi * t / total)) for t in (1, 3, 5)])


def test_bbn_cumulative_alpha_and_loss_at_an_epoch():
    epochs = 200
    for e0 in (0, 57, 199):  # the reference: l = 1 - ((epoch - 1) / div_epoch) ** 2, 1-based epoch
        assert bbn_alpha(e0, epochs) == pytest.approx(1 - ((e0 + 1 - 1) / epochs) ** 2)
    net = BBNNet(build_model("cnn28", num_classes=3, in_channels=1, width=2, seed=0))
    step = bbn_step(net, epochs)
    x, x2 = torch.randn(6, 1, 8, 8), torch.randn(6, 1, 8, 8)
    y, y2 = torch.tensor([0, 1, 2, 0, 1, 2]), torch.tensor([2, 2, 1, 1, 0, 0])
    torch.manual_seed(0)
    loss, out = step(x, y, x2, y2, 57)
    a = 1 - (57 / 200) ** 2
    torch.manual_seed(0)
    with torch.no_grad():  # the reference is a number to compare with, not something to train
        ref = net.mixed(x, x2, a)
    assert float(loss.detach()) == pytest.approx(float(a * F.cross_entropy(ref, y) + (1 - a) * F.cross_entropy(ref, y2)),
                                        rel=1e-5)


def test_bbn_reversed_sampler_draws_classes_in_proportion_to_nmax_over_n():
    seen = []

    def step(x, y, x2, y2, epoch):
        seen.append(y2.numpy().copy())
        out = model(x)
        return F.cross_entropy(out, y), out

    model = _Tiny3 = nn.Sequential(nn.Flatten(), nn.Linear(64, 3))
    p = reversed_probabilities(LABELS)
    Trainer(model, TrainConfig(epochs=40, batch_size=20, count_flops=False), step=step).fit(
        IMAGES, LABELS, second_sampler=p)
    share = np.bincount(np.concatenate(seen), minlength=3) / sum(map(len, seen))
    w = COUNTS.max() / COUNTS
    np.testing.assert_allclose(share, w / w.sum(), atol=0.03)
    del _Tiny3


def test_ib_switches_from_cross_entropy_to_the_ib_loss_at_its_epoch():
    net = build_model("cnn28", num_classes=3, in_channels=1, width=2, seed=0)
    loss = IBLoss(COUNTS, alpha=1000.0)
    step = ib_step(net, loss, start=100)
    x, y = torch.randn(6, 1, 8, 8), torch.tensor([0, 1, 2, 0, 1, 2])
    f = net.features(x)
    out = net.classifier(f)
    before, _ = step(x, y, None, None, 99)
    after, _ = step(x, y, None, None, 100)
    assert float(before) == pytest.approx(float(F.cross_entropy(out, y)), rel=1e-6)
    assert float(after) == pytest.approx(float(loss(out, y, f.abs().sum(1))), rel=1e-6)
    assert LongtailConfig.from_dict({"data": "cifar10:/x", "method": "ib", "imbalance": 100}
                                    ).method_options.ib_epoch == 100  # and the lr drops there (test above)


def test_tde_uses_the_options_alpha_at_eval_and_zero_in_training():
    run = fit_predict("tde", TRAIN, IMAGES[:9], epochs=1, batch_size=20, seed=0, options={"alpha": 0.7})
    net = run.model
    assert net.alpha == 0.7
    tr_norm = run.train_results[0].normaliser
    x = (torch.from_numpy(IMAGES[:9]).permute(0, 3, 1, 2).float() / 255 - torch.tensor(tr_norm["mean"]).view(1, -1, 1, 1)) \
        / torch.tensor(tr_norm["std"]).view(1, -1, 1, 1)
    net.eval()
    with torch.no_grad():
        f = net.backbone.features(x)
        expect = tde_counterfactual(f, net.weight, net.mean_feature, num_heads=2, tau=16.0, gamma=0.03125, alpha=0.7)
    np.testing.assert_allclose(run.logits, expect.numpy(), rtol=1e-4, atol=1e-4)
    assert not np.allclose(run.logits, net.logits(f, 0.0).detach().numpy(), atol=1e-3)


def _ctx(model, **cfg):
    return MethodContext(train=TRAIN, counts=COUNTS, model=model,
                         cfg=TrainConfig(**{"epochs": 1, "batch_size": 20, "lr": 0.1, "count_flops": False, **cfg}))


def _fit_first_stage(ctx):
    Trainer(ctx.model, ctx.cfg).fit(TRAIN.images, TRAIN.labels)  # sets BN statistics away from their init


def test_gcl_classifier_stage_freezes_features_and_follows_the_reference_lr():
    model = build_model("cnn28", num_classes=3, in_channels=1, width=2, seed=0)
    model.classifier = NormedLinear(model.feature_dim, 3)
    ctx = _ctx(model)
    _fit_first_stage(ctx)
    frozen = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith("classifier")}
    head = model.classifier.weight.detach().clone()
    opt = GCLOptions.from_dict({"cls_epochs": 4, "cls_lr_factor": 0.02, "cls_schedule": "cosine_epoch",
                                "mixup": True})
    res = gcl_classifier_stage(ctx, opt)
    for k, v in model.state_dict().items():  # features and BN statistics untouched (model.eval())
        if not k.startswith("classifier"):
            assert torch.equal(v, frozen[k]), k
    assert not torch.equal(model.classifier.weight, head)
    # cifar_train_classifier.py: lr = 0.1 * lr_max * (1 + cos(pi e / E)), group 0 gets 0.1 * lr
    assert [h["lr"] for h in res.history] == pytest.approx(
        [0.1 * (0.1 * 0.1 * (1 + math.cos(e / 4 * math.pi))) for e in range(4)])
    assert res.config["sampler"] == "class_balanced"


@pytest.mark.parametrize("bn_mode", ["train", "eval"])
def test_crt_reinitialises_the_head_and_keeps_the_features_with_the_chosen_bn_mode(bn_mode):
    model = build_model("cnn28", num_classes=3, in_channels=1, width=2, seed=0)
    ctx = _ctx(model)
    _fit_first_stage(ctx)
    before = copy.deepcopy(model.state_dict())
    fresh = copy.deepcopy(model.classifier)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(ctx.cfg.seed + 1)
        fresh.reset_parameters()
    opt = CRTOptions.from_dict({"crt_epochs": 1, "crt_lr": 1e-12, "crt_weight_decay": 0.0, "crt_batch_size": 20,
                                "crt_sampler": "class_aware", "crt_bn_mode": bn_mode, "crt_schedule": "cosine"})
    res = retrain_classifier(ctx, opt)
    # the head restarted from the seeded re-initialisation (a 1e-12 lr leaves it there)
    torch.testing.assert_close(model.classifier.weight, fresh.weight, atol=1e-9, rtol=0)
    assert not torch.allclose(model.classifier.weight, before["classifier.weight"])
    for k, v in model.state_dict().items():
        if k.startswith("classifier"):
            continue
        if ("running" in k or "num_batches" in k) and bn_mode == "train":
            continue
        assert torch.equal(v, before[k]), k  # weights frozen; BN statistics fixed in eval mode
    moved = any(not torch.equal(v, before[k]) for k, v in model.state_dict().items() if "running_mean" in k)
    assert moved == (bn_mode == "train")  # the reference's model.train(): running averages follow the batches
    assert res.config["trainable"] == "classifier" and res.config["frozen_mode"] == bn_mode
    assert res.config["sampler"] == "class_aware"


def test_class_aware_sampler_cycles_classes_four_at_a_time():
    s = ClassAwareSampler(4)
    order = s(LABELS, np.random.default_rng(0))
    assert len(order) == 40 * 3  # max class size x classes, as the reference's num_samples
    runs = LABELS[order].reshape(-1, 4)
    assert (runs == runs[:, :1]).all()  # each visit: 4 images of one class
    visits = runs[:, 0].reshape(-1, 3)
    assert all(sorted(v) == [0, 1, 2] for v in visits)  # classes in cycles
    tail = order[LABELS[order] == 2]  # the 5 tail images, cycled through
    assert sorted(np.bincount(tail, minlength=60)[LABELS == 2]) == [8, 8, 8, 8, 8]


def test_reference_crt_recipe():
    cfg = LongtailConfig.from_dict({"data": "cifar100:/x", "method": "crt", "imbalance": 100})
    o = cfg.method_options
    assert (o.crt_epochs, o.crt_lr, o.crt_sampler, o.crt_per_class, o.crt_bn_mode, o.crt_schedule) == \
        (10, 0.2, "class_aware", 4, "train", "cosine_epoch")
    # classifier-balancing's CosineAnnealingLR is stepped before each 1-based epoch
    tc = TrainConfig(epochs=10, lr=0.2, schedule="cosine_epoch", schedule_offset=1, batch_size=8, count_flops=False)
    res = Trainer(_Tiny(), tc).fit(RNG.integers(0, 256, (8, 2, 2, 1), dtype=np.uint8), np.arange(8) % 2)
    assert [h["lr"] for h in res.history] == pytest.approx(
        [0.2 * (1 + math.cos(math.pi * (e + 1) / 10)) / 2 for e in range(10)])
    assert tc.to_dict()["schedule"] == "cosine_epoch"
