"""The survey's further long-tail methods: each defining computation against a numpy re-derivation
or hand-worked numbers (the losses follow the reference repositories named in their docstrings)."""

import numpy as np
import pytest
import torch

from vistabench.data.predictions import Predictions
from vistabench.errors import InputError
from vistabench.learners.losses import (
    GCLLoss,
    IBLoss,
    LADELoss,
    RIDELoss,
    TADELoss,
    bbn_alpha,
    inverse_prior,
    tde_counterfactual,
)
from vistabench.learners.longtail.nets import CausalNormNet, ExpertNet, reversed_probabilities
from vistabench.learners.longtail.options import TADEOptions
from vistabench.learners.longtail.survey import SelfSupervisedAggregation
from vistabench.learners.models import build_model
from vistabench.protocols.longtail.sweep import build_sweep, score_sweep

RNG = np.random.default_rng(0)
COUNTS = np.array([50, 20, 5, 1])


def _np_log_softmax(z):
    z = z - z.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))


def _np_ce(z, y, w=None):
    """per-sample (weighted, unnormalised) cross-entropy"""
    ce = -_np_log_softmax(z)[np.arange(len(y)), y]
    return ce if w is None else ce * w[y]


def _t(a):
    return torch.tensor(a, dtype=torch.float64)


def _batch(n=9, C=4):
    return RNG.normal(0, 2, (n, C)), RNG.integers(0, C, n)


def test_ib_loss_matches_numpy():
    z, y = _batch()
    feat_l1 = RNG.uniform(0.5, 3, len(y))
    p = np.exp(_np_log_softmax(z))
    grads = np.abs(p - np.eye(4)[y]).sum(1)
    w = (1 / COUNTS) / (1 / COUNTS).sum() * 4
    expect = np.mean(_np_ce(z, y, w) * 1000.0 / (grads * feat_l1 + 0.001))
    got = IBLoss(COUNTS, alpha=1000.0).double()(_t(z), torch.tensor(y), _t(feat_l1))
    assert float(got) == pytest.approx(expect, rel=1e-6)


def test_lade_loss_matches_numpy_with_an_absent_class():
    z, _ = _batch(6)
    y = np.array([0, 0, 1, 1, 1, 2])  # class 3 absent from the batch
    pi = COUNTS / COUNTS.sum()
    bsm = _np_ce(z + np.log(pi + 1e-9), y).mean()
    C, N = 4, 6
    mask = (y[None, :] == np.arange(C)[:, None]).astype(float)
    first = (z.T * mask).sum(1) / (mask.sum(1) + 1e-8)
    spread = (z - np.log(pi + 1e-9) + np.log(1 / C + 1e-9)).T
    second = np.log(np.exp(spread).sum(1)) - np.log(N)
    reg = -np.sum((first - second - 0.1 * second ** 2) * pi)
    got = LADELoss(COUNTS, lam=0.1, remine_lambda=0.1).double()(_t(z), torch.tensor(y))
    assert float(got) == pytest.approx(bsm + 0.1 * reg, rel=1e-6)


def test_gcl_cloud_sizes_and_loss_match_numpy():
    loss = GCLLoss(COUNTS, margin=0.1, scale=20.0, noise_mul=0.5, gamma=1.0).double()
    m = np.log(50) - np.log(COUNTS)
    np.testing.assert_allclose(loss.cloud.numpy(), m / m.max(), rtol=1e-6)
    assert loss.cloud[0] == 0 and loss.cloud[-1] == pytest.approx(1.0)  # head: no cloud; rarest: the largest
    cos = RNG.uniform(-1, 1, (5, 4))
    y = np.array([0, 1, 2, 3, 3])
    noise = RNG.normal(0, 1 / 3, (5, 4)).clip(-1, 1)
    expect = cos - 0.5 * np.abs(noise) * (m / m.max())[None, :] - 0.1 * np.eye(4)[y]
    np.testing.assert_allclose(loss.perturb(_t(cos), torch.tensor(y), _t(noise)).numpy(), expect, rtol=1e-6)
    # without noise the loss is deterministic: focal (γ = 1) cross-entropy of the scaled margin logits
    flat = GCLLoss(COUNTS, margin=0.1, scale=20.0, noise_mul=0.0, gamma=1.0).double()
    ce = _np_ce(20 * (cos - 0.1 * np.eye(4)[y]), y)
    assert float(flat(_t(cos), torch.tensor(y))) == pytest.approx(np.mean((1 - np.exp(-ce)) * ce), rel=1e-6)


def _np_ride(zs, y, reweight):
    s, C = 30.0, 4
    m = COUNTS ** -0.25
    m = m * 0.5 / m.max()
    mean = zs.mean(0)
    if reweight:
        eff = (1 - 0.9999) / (1 - 0.9999 ** COUNTS)
        w = eff / eff.sum() * C
        pi = COUNTS / COUNTS.sum()
        T = C * pi * 0.05 + 0.95
        T = (T / T.max())[None, :]
    else:
        w, T = None, np.ones((1, 1))
    total = 0.0
    for z in zs:
        ce = _np_ce(z - s * m[y][:, None] * np.eye(C)[y], y, w)
        total += ce.sum() / (w[y].sum() if w is not None else len(y))
        q = np.exp(_np_log_softmax(mean / T))
        kl = np.sum(q * (np.log(q) - _np_log_softmax(z / T))) / len(y)
        total += -0.45 * T.mean() ** 2 * kl
    return total


@pytest.mark.parametrize("epoch, reweight", [(0, False), (8, True)])
def test_ride_loss_matches_numpy(epoch, reweight):
    zs = RNG.normal(0, 5, (3, 7, 4))
    y = RNG.integers(0, 4, 7)
    loss = RIDELoss(COUNTS, diversity=-0.45, reweight_epoch=8).double()
    loss.set_epoch(epoch)
    assert loss.reweight is reweight
    assert float(loss(_t(zs), torch.tensor(y))) == pytest.approx(_np_ride(zs, y, reweight), rel=1e-6)


def test_tade_inverse_prior_and_expert_losses():
    # hand-worked: the prior's values reversed in rank order
    assert inverse_prior(torch.tensor([0.5, 0.3, 0.2])).tolist() == pytest.approx([0.2, 0.3, 0.5])
    assert inverse_prior(torch.tensor([0.2, 0.5, 0.3])).tolist() == pytest.approx([0.5, 0.2, 0.3])
    zs = RNG.normal(0, 2, (3, 6, 4))
    y = RNG.integers(0, 4, 6)
    pi = COUNTS / COUNTS.sum()
    inv = np.sort(pi)[np.argsort(np.argsort(-pi))]  # rank r (largest first) gets the r-th smallest
    lp, li = np.log(pi + 1e-9), np.log(inv + 1e-9)
    expect = _np_ce(zs[0], y).mean() + _np_ce(zs[1] + lp, y).mean() + _np_ce(zs[2] + lp - 2 * li, y).mean()
    assert float(TADELoss(COUNTS, tau=2.0).double()(_t(zs), torch.tensor(y))) == pytest.approx(expect, rel=1e-6)
    with pytest.raises(InputError, match="3 experts"):
        TADELoss(COUNTS)(torch.zeros(2, 6, 4), torch.tensor(y))


def test_bbn_cumulative_learning_and_reversed_sampler():
    assert bbn_alpha(0, 200) == 1.0 and bbn_alpha(100, 200) == 0.75 and bbn_alpha(199, 200) == pytest.approx(0.009975)
    labels = np.array([0, 0, 0, 1])  # n = (3, 1): class weights n_max/n_c = (1, 3) -> classes drawn 1/4, 3/4
    p = reversed_probabilities(labels)
    np.testing.assert_allclose(p, [1 / 12, 1 / 12, 1 / 12, 3 / 4])


def test_tde_counterfactual_matches_numpy():
    x, w, c = RNG.normal(size=(5, 6)), RNG.normal(size=(4, 6)), RNG.normal(size=6)
    expect = np.zeros((5, 4))
    for k in range(2):
        sl = slice(3 * k, 3 * k + 3)
        nx = x[:, sl] / np.linalg.norm(x[:, sl], axis=1, keepdims=True)
        nc = c[sl] / np.linalg.norm(c[sl])
        nw = w[:, sl] / (np.linalg.norm(w[:, sl], axis=1, keepdims=True) + 0.03125)
        cos = nx @ nc
        expect += (nx - 1.5 * cos[:, None] * nc[None, :]) * 8.0 @ nw.T
    got = tde_counterfactual(_t(x), _t(w), _t(c), num_heads=2, tau=16.0, gamma=0.03125, alpha=1.5)
    np.testing.assert_allclose(got.numpy(), expect, rtol=1e-10)
    # alpha = 0 is the training logit; the moving average is mu * c + batch mean
    net = CausalNormNet(build_model("cnn28", num_classes=4, in_channels=1, image_size=8, seed=0))
    f = torch.randn(3, net.backbone.feature_dim)
    net.update_mean(f)
    net.update_mean(2 * f)
    torch.testing.assert_close(net.mean_feature, 0.9 * f.mean(0) + 2 * f.mean(0))


def test_expert_net_output_is_the_weighted_expert_sum():
    net = ExpertNet(build_model("cnn28", num_classes=4, in_channels=1, image_size=8, seed=0), 3).eval()
    x = torch.randn(5, 1, 8, 8)
    z = net.experts(x)
    assert z.shape == (3, 5, 4) and float(z.detach().abs().max()) <= 30.0 + 1e-4  # s · cosine
    torch.testing.assert_close(net(x), z.mean(0))


def test_test_time_aggregation_favours_the_view_consistent_expert():
    N, C = 200, 5
    stable = RNG.normal(0, 3, (N, C))
    views = np.stack([np.stack([stable, RNG.normal(0, 3, (N, C)), RNG.normal(0, 3, (N, C))]) for _ in range(2)])
    clean = RNG.normal(0, 1, (3, N, C))
    agg = SelfSupervisedAggregation(clean.astype(np.float32), views.astype(np.float32),
                                    options=TADEOptions(tt_epochs=5, tt_lr=0.1, tt_min_weight=0.0))
    idx = np.arange(0, N, 2)
    out = agg(idx)
    w = np.asarray(agg.last_weights)
    assert w.sum() == pytest.approx(1.0, abs=1e-6) and w[0] > 1 / 3 > max(w[1], w[2])  # uniform start: 1/3 each
    np.testing.assert_allclose(out, np.einsum("e,enc->nc", w, clean[:, idx]), rtol=1e-5, atol=1e-5)
    # the stop rule: an epoch ending with a weight below min_weight ends the adaptation
    kw = {"clean": clean.astype(np.float32), "views": views.astype(np.float32)}
    stopped = SelfSupervisedAggregation(**kw, options=TADEOptions(tt_epochs=25, tt_lr=0.1, tt_min_weight=0.3))
    full = SelfSupervisedAggregation(**kw, options=TADEOptions(tt_epochs=25, tt_lr=0.1, tt_min_weight=0.0))
    stopped(idx)
    full(idx)
    assert min(full.last_weights) < min(stopped.last_weights) < 0.3


def test_score_sweep_with_per_set_predictions_hand_worked():
    labels = np.repeat([0, 1], 6)
    sweep = build_sweep(labels, np.array([10, 2]), test_imbalance=2, points=2, repeats=2, n_max=4, seed=0)
    pred = Predictions(labels=labels, kind="pred", values=labels.copy())
    # per-set predictions: point 0 all right, point 1 half of the sets' samples wrong in one set
    sets = [[labels[np.asarray(s)] for s in pt["samples"]] for pt in sweep["points"]]
    wrong = sets[1][0].copy()
    wrong[: len(wrong) // 2] = 1 - wrong[: len(wrong) // 2]
    sets[1][0] = wrong
    frac = 1 - (len(wrong) // 2) / len(wrong)
    for exact in (False, True):
        out = score_sweep(pred, sweep, set_predictions=sets, exact=exact)
        assert [p["accuracy"] for p in out["points"]] == pytest.approx([1.0, (1 + frac) / 2])
        assert out["balanced"] == 1.0  # pool-level scores come from `pred`
    with pytest.raises(InputError, match="set_predictions"):
        score_sweep(pred, sweep, set_predictions=sets[:1])


def test_resnet32_split_follows_the_references():
    from vistabench.learners.longtail.nets import BBNNet, split_backbone

    bb = build_model("resnet32", num_classes=4, in_channels=3, image_size=8, seed=0)
    trunk, make, dim = split_backbone(bb, "experts")
    # RIDE/SADE: stem + stage 1 shared (the backbone's own modules), stages 2-3 private at 24/48 channels
    assert dim == 48 and trunk[3] is bb.layers[0] and len(trunk) == 3 + 5
    private = make()
    assert [b.conv2.out_channels for b in list(private)[:-1]] == [24] * 5 + [48] * 5
    net = ExpertNet(bb, 3)
    assert net.experts(torch.randn(2, 3, 8, 8)).shape == (3, 2, 4)
    # BBN: all but the last block shared, one 64-channel block per branch, classifier on 128 features
    bbn = BBNNet(build_model("resnet32", num_classes=4, in_channels=3, image_size=8, seed=0))
    assert len(bbn.trunk) == 3 + 14 and bbn.head.in_features == 128
    assert bbn.conventional[0] is not bbn.rebalancing[0]
    x = torch.randn(2, 3, 8, 8)
    bbn.eval()
    # alpha = 1/2 mixing of the same batch is the equal-weight inference output
    torch.testing.assert_close(bbn.mixed(x, x, 0.5), bbn(x))


def test_lade_predicts_for_the_given_test_prior():
    from vistabench.data import Dataset
    from vistabench.learners.longtail import fit_predict

    labels = np.r_[np.zeros(40, int), np.ones(15, int), np.full(5, 2)]
    images = np.clip(RNG.normal(60 + 60 * labels[:, None, None, None], 30, (60, 8, 8, 1)), 0, 255).astype(np.uint8)
    TRAIN, TEST = Dataset(images, labels, ["head", "mid", "tail"]), images[::4]

    uniform = fit_predict("lade", TRAIN, TEST, epochs=1, batch_size=16, seed=2)
    q = [0.2, 0.3, 0.5]
    known = fit_predict("lade", TRAIN, TEST, epochs=1, batch_size=16, seed=2, options={"test_prior": q})
    # z − log(1/C) + log q: the same network, shifted by log q + log C per class
    np.testing.assert_allclose(known.logits - uniform.logits, np.tile(np.log(q) + np.log(3), (len(TEST), 1)),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(InputError, match="test_prior"):
        fit_predict("lade", TRAIN, TEST, epochs=1, batch_size=16, options={"test_prior": [1, 0, 1]})


def test_custom_loop_rejects_a_batch_larger_than_the_training_set():
    from vistabench.data import Dataset
    from vistabench.learners.longtail import fit_predict

    labels = np.r_[np.zeros(6, int), np.ones(3, int)]
    data = Dataset(np.full((9, 8, 8, 1), 100, np.uint8), labels, ["a", "b"])
    with pytest.raises(InputError, match="batch_size"):
        fit_predict("bbn", data, data.images, epochs=1, batch_size=16)
