"""Each loss against a hand-written numpy reference on random tensors."""

import numpy as np
import pytest
import torch
from scipy.special import log_softmax

from vistabench.errors import InputError
from vistabench.learners.losses import (BalancedSoftmaxLoss, CrossEntropyLoss, FocalLoss, LDAMLoss,
                                        class_balanced_weights, ldam_margins, logit_adjust)

RNG = np.random.default_rng(0)
Z = RNG.normal(size=(12, 5)) * 3
Y = RNG.integers(0, 5, 12)
COUNTS = np.array([500, 120, 40, 9, 2])


def loss_of(module, z=Z, y=Y):
    return float(module(torch.tensor(z, dtype=torch.float64), torch.tensor(y)))


def ref_ce(z, y, weight=None):
    lp = log_softmax(z, axis=1)
    nll = -np.array([lp[i, y[i]] for i in range(len(y))])
    if weight is None:
        return nll.mean()
    w = np.array([weight[t] for t in y])
    return (w * nll).sum() / w.sum()


def test_cross_entropy_and_label_smoothing():
    assert loss_of(CrossEntropyLoss()) == pytest.approx(ref_ce(Z, Y), rel=1e-10)
    eps = 0.1
    lp = log_softmax(Z, axis=1)
    smooth = np.mean([-(1 - eps) * lp[i, Y[i]] - eps * lp[i].mean() for i in range(len(Y))])
    assert loss_of(CrossEntropyLoss(label_smoothing=eps)) == pytest.approx(smooth, rel=1e-10)


@pytest.mark.parametrize("gamma", [0.0, 0.5, 2.0, 5.0])
def test_focal_loss(gamma):
    p = np.exp(log_softmax(Z, axis=1))
    ref = np.mean([-(1 - p[i, Y[i]]) ** gamma * np.log(p[i, Y[i]]) for i in range(len(Y))])
    assert loss_of(FocalLoss(gamma=gamma)) == pytest.approx(ref, rel=1e-10)
    if gamma == 0.0:
        assert loss_of(FocalLoss(gamma=0.0)) == pytest.approx(ref_ce(Z, Y), rel=1e-10)


def test_ldam_margins_and_loss_before_and_after_drw():
    m = ldam_margins(COUNTS, max_margin=0.5)
    ref_m = COUNTS ** -0.25
    ref_m = ref_m * 0.5 / ref_m.max()
    np.testing.assert_allclose(m, ref_m, rtol=1e-12)
    assert m[-1] == pytest.approx(0.5) and np.all(np.diff(m) > 0)
    cos = np.tanh(Z)  # cosine logits lie in [-1, 1]
    loss = LDAMLoss(COUNTS, max_margin=0.5, scale=30.0, drw_epoch=3, beta=0.9999)
    adj = cos.copy()
    for i, t in enumerate(Y):
        adj[i, t] -= ref_m[t]
    plain = ref_ce(30.0 * adj, Y)
    w = (1 - 0.9999) / (1 - 0.9999 ** COUNTS.astype(float))
    w = w / w.sum() * len(COUNTS)
    weighted = ref_ce(30.0 * adj, Y, weight=w)
    for epoch, expected in [(0, plain), (2, plain), (3, weighted), (7, weighted)]:
        loss.set_epoch(epoch)
        assert loss_of(loss, cos) == pytest.approx(expected, rel=1e-5), epoch
    never = LDAMLoss(COUNTS, drw_epoch=None)
    never.set_epoch(100)
    assert loss_of(never, cos) == pytest.approx(plain, rel=1e-5)


def test_class_balanced_weights_hand_example():
    # beta = 0.5: effective numbers 1 - 0.5^n = 0.5, 0.75 -> raw weights 1, 2/3 -> scaled to sum 2
    np.testing.assert_allclose(class_balanced_weights([1, 2], beta=0.5), [1.2, 0.8], rtol=1e-12)
    # beta = 0: every class weight 1
    np.testing.assert_allclose(class_balanced_weights([5, 500, 1], beta=0.0), [1, 1, 1])
    with pytest.raises(InputError, match="beta"):
        class_balanced_weights([1, 2], beta=1.0)


def test_balanced_softmax():
    prior = COUNTS / COUNTS.sum()
    assert loss_of(BalancedSoftmaxLoss(COUNTS)) == pytest.approx(ref_ce(Z + np.log(prior), Y), rel=1e-6)
    # balanced classes: the same as cross-entropy
    assert loss_of(BalancedSoftmaxLoss([3, 3, 3, 3, 3])) == pytest.approx(ref_ce(Z, Y), rel=1e-6)


def test_logit_adjust():
    prior = COUNTS / COUNTS.sum()
    for tau in (0.0, 0.5, 1.0, 2.0):
        np.testing.assert_allclose(logit_adjust(Z, prior, tau=tau), Z - tau * np.log(prior)[None], rtol=1e-12)
    # hand example: equal logits, prior 0.9 / 0.1 -> the rare class wins after adjustment
    out = logit_adjust(np.zeros((1, 2)), [0.9, 0.1])
    assert out.argmax() == 1 and out[0, 1] - out[0, 0] == pytest.approx(np.log(9))
    assert logit_adjust(np.zeros((0, 2)), [0.5, 0.5]).shape == (0, 2)


def test_edge_cases_raise():
    with pytest.raises(InputError, match="classes \\[1\\]"):
        LDAMLoss([5, 0, 3])
    with pytest.raises(InputError, match="class_counts"):
        BalancedSoftmaxLoss([])
    with pytest.raises(InputError, match="class_prior"):
        logit_adjust(Z, [0.5, 0.5, 0, 0, 0])
    with pytest.raises(InputError, match="logits"):
        logit_adjust(Z, [0.5, 0.5])
    with pytest.raises(InputError, match="logits"):
        logit_adjust(np.full((2, 2), np.nan), [0.5, 0.5])
    with pytest.raises(InputError, match="gamma"):
        FocalLoss(gamma=-1)


def test_single_class_losses_are_zero_or_finite():
    z = torch.randn(4, 1)
    y = torch.zeros(4, dtype=torch.long)
    assert float(CrossEntropyLoss()(z, y)) == pytest.approx(0.0, abs=1e-7)
    assert float(BalancedSoftmaxLoss([7])(z, y)) == pytest.approx(0.0, abs=1e-7)
    assert np.isfinite(float(LDAMLoss([7])(torch.tanh(z), y)))
