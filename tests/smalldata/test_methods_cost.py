"""OLE, t-vMF, DVP distillation and AuxiLearn hypergradient against independent computations."""

import numpy as np
import pytest
import scipy.stats
import torch
import torch.nn.functional as F

from vistabench.learners.smalldata.build import build_method
from vistabench.learners.recipe import Recipe
from vistabench.learners.smalldata.auxilearn import hypergradient
from vistabench.learners.smalldata.dvp import DVPLoss, distillation_loss, gaussian_margin
from vistabench.learners.smalldata.options import DvpOptions
from vistabench.learners.smalldata.ole import ole_loss
from vistabench.learners.smalldata.tvmf import TvMFClassifier, tvmf_similarity
from vistabench.learners.trainer import TrainConfig, Trainer


# ------------------------------------------------------------------------------------ OLE
def _ole_numpy(x, y, delta=1.0):
    per_class = sum(max(delta, np.linalg.svd(x[y == c], compute_uv=False).sum()) for c in np.unique(y))
    return (per_class - np.linalg.svd(x, compute_uv=False).sum()) / len(x)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ole_loss_equals_numpy_svd(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(12, 5)) * rng.uniform(0.01, 2.0)
    y = rng.integers(0, 3, 12)
    got = ole_loss(torch.tensor(x), torch.tensor(y)).item()
    assert got == pytest.approx(_ole_numpy(x, y), rel=1e-9, abs=1e-12)


def test_ole_margin_clamps_small_classes():
    x = np.zeros((4, 3))
    x[:2, 0] = 0.1  # class nuclear norms 0.14, 0.28 < δ
    x[2:, 1] = 0.2
    y = np.array([0, 0, 1, 1])
    assert ole_loss(torch.tensor(x), torch.tensor(y)).item() == pytest.approx(_ole_numpy(x, y))
    assert _ole_numpy(x, y) == pytest.approx((2.0 - np.linalg.svd(x, compute_uv=False).sum()) / 4)


def test_ole_gradient_matches_finite_differences():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(10, 6)) * 2.0  # every class nuclear norm > δ: the loss is smooth here
    y = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 2])
    xt = torch.tensor(x, requires_grad=True)
    ole_loss(xt, torch.tensor(y)).backward()
    eps, fd = 1e-6, np.zeros_like(x)
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            xp, xm = x.copy(), x.copy()
            xp[i, j] += eps
            xm[i, j] -= eps
            fd[i, j] = (_ole_numpy(xp, y) - _ole_numpy(xm, y)) / (2 * eps)
    np.testing.assert_allclose(xt.grad.numpy(), fd, atol=1e-6)


# ----------------------------------------------------------------------------------- t-vMF
def test_tvmf_similarity_formula_and_kappa_zero_is_cosine():
    rng = np.random.default_rng(0)
    f, w = rng.normal(size=(5, 4)), rng.normal(size=(3, 4))
    cos = (f / np.linalg.norm(f, axis=1, keepdims=True)) @ (w / np.linalg.norm(w, axis=1, keepdims=True)).T
    head = TvMFClassifier(4, 3, kappa=16.0)
    with torch.no_grad():
        head.weight.copy_(torch.tensor(w))
    got = head.similarity(torch.tensor(f, dtype=torch.float32)).detach().numpy()
    np.testing.assert_allclose(got, (1 + cos) / (1 + 16.0 * (1 - cos)) - 1, atol=1e-6)
    head.kappa = 0.0
    np.testing.assert_allclose(head.similarity(torch.tensor(f, dtype=torch.float32)).detach().numpy(), cos, atol=1e-6)
    # hand-worked: cos = 0, κ = 1 -> 1/2 − 1; cos = 1 -> 2/1 − 1 = 1 for any κ
    assert tvmf_similarity(torch.tensor(0.0), 1.0).item() == pytest.approx(-0.5)
    assert tvmf_similarity(torch.tensor(1.0), 7.0).item() == pytest.approx(1.0)
    # logits = (1 + softplus(0)) * similarity at initialisation
    out = head(torch.tensor(f, dtype=torch.float32)).detach().numpy()
    np.testing.assert_allclose(out, (1 + np.log(2)) * cos, atol=1e-6)


# ------------------------------------------------------------------------------------ DVP
def _distill_numpy(s, t, m):
    out = 0.0
    for sv, tv, mv in zip(s.ravel(), t.ravel(), np.broadcast_to(m, s.shape).ravel()):
        if tv > 0:
            out += (sv - tv) ** 2
        elif tv > mv:  # margin < t <= 0
            out += (sv - tv) ** 2 if sv > tv else 0.0
        else:  # t <= margin
            out += (sv - mv) ** 2 if sv > mv else 0.0
    return out


def test_distillation_loss_equals_formula():
    rng = np.random.default_rng(0)
    s, t = rng.normal(size=(6, 5)), rng.normal(size=(6, 5))
    m = -np.abs(rng.normal(size=5))
    got = distillation_loss(torch.tensor(s), torch.tensor(t), torch.tensor(m)).item()
    assert got == pytest.approx(_distill_numpy(s, t, m))
    # hand-worked: t = 2 > 0 -> (1−2)²; t = −3 <= m = −1, s = 0 > m -> (0+1)²; s below both -> 0
    got = distillation_loss(torch.tensor([1.0, 0.0, -5.0]), torch.tensor([2.0, -3.0, -0.5]), torch.tensor(-1.0))
    assert got.item() == pytest.approx(1.0 + 1.0 + 0.0)


def test_gaussian_margin_is_truncated_normal_mean():
    mean, std = np.array([0.5, -0.2, 1.0]), np.array([1.0, 0.3, 2.0])
    ref = [scipy.stats.truncnorm.mean(-np.inf, (0 - mu) / sd, loc=mu, scale=sd) for mu, sd in zip(mean, std)]
    np.testing.assert_allclose(gaussian_margin(mean, std), ref, rtol=1e-6)
    assert gaussian_margin(np.array([10.0]), np.array([1.0]))[0] == -3.0  # Φ(−10) ≤ 0.001


def test_dvp_two_stage_pipeline_pretrains_the_teacher_then_distils():
    """Our earlier variant (--recipe vistabench): pooled features, eval-mode teacher, margins fitted."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (40, 8, 8, 1), dtype=np.uint8)
    y = np.arange(40) % 4
    opts = {**DvpOptions.VISTABENCH, "distill_weight": 0.1, "ce_only_epochs": 0}
    model, loss = build_method("dvp", Recipe(model="cnn28"), opts, num_classes=4, in_channels=1, image_size=8, seed=0)
    assert isinstance(loss, DVPLoss)
    before = [p.detach().clone() for p in loss.teacher.parameters()]
    tr = Trainer(model, TrainConfig(epochs=2, lr=0.01, batch_size=10, count_flops=False), loss_fn=loss)
    tr.fit(x, y)
    assert len(loss.pretrain_history) == 2 and all(np.isfinite(loss.pretrain_history))
    assert any(not torch.equal(a, b) for a, b in zip(before, loss.teacher.parameters()))  # stage 1 trained it
    assert not any(p.requires_grad for p in loss.teacher.parameters())  # frozen for stage 2
    assert torch.all(loss.margin0 <= 0)
    # stage 2: the loss on a training batch is CE + λ · distillation / N, recomputed here
    model.train()
    xb = tr.batch(x, np.arange(10))
    logits = model(xb)
    _, (s,) = model.last
    with torch.no_grad():
        t = loss.teacher.eval().features(xb)
    want = F.cross_entropy(logits, torch.tensor(y[:10])) + 0.1 * _distill_numpy(
        s.detach().numpy(), t.numpy(), loss.margin0.numpy()) / 10
    assert loss(logits, torch.tensor(y[:10])).item() == pytest.approx(float(want.detach()), rel=1e-5)


# ------------------------------------------------------------------------------ AuxiLearn
def test_hypergradient_matches_finite_differences_on_a_quadratic():
    """L_T(w, φ) = ½ wᵀA w − φᵀ B w (optimum w* = A⁻¹Bᵀφ), L_V(w) = ½‖w − t‖²."""
    rng = np.random.default_rng(0)
    q = rng.normal(size=(4, 4))
    A = q @ q.T / 4 + np.eye(4)
    B, t, phi0 = rng.normal(size=(2, 4)), rng.normal(size=4), rng.normal(size=2)

    def lv_at_opt(phi):
        w = np.linalg.solve(A, B.T @ phi)
        return 0.5 * np.sum((w - t) ** 2)

    eps = 1e-6
    fd = np.array([(lv_at_opt(phi0 + eps * e) - lv_at_opt(phi0 - eps * e)) / (2 * eps) for e in np.eye(2)])
    w = torch.tensor(np.linalg.solve(A, B.T @ phi0), requires_grad=True)
    phi = torch.tensor(phi0, requires_grad=True)
    At, Bt, tt = torch.tensor(A), torch.tensor(B), torch.tensor(t)
    lt = 0.5 * w @ At @ w - phi @ Bt @ w
    lval = 0.5 * ((w - tt) ** 2).sum()
    lr = 0.9 / np.linalg.eigvalsh(A).max()
    (g,) = hypergradient(lval, lt, [phi], [w], lr=float(lr), terms=400)
    np.testing.assert_allclose(g.detach().numpy(), fd, rtol=1e-5, atol=1e-8)
    # truncation (few Neumann terms) gives a different, damped estimate
    lt = 0.5 * w @ At @ w - phi @ Bt @ w
    lval = 0.5 * ((w - tt) ** 2).sum()
    (g3,) = hypergradient(lval, lt, [phi], [w], lr=float(lr), terms=0)
    assert not np.allclose(g3.detach().numpy(), fd, rtol=1e-3)


def test_auxilearn_updates_auxiliary_parameters_only_on_schedule():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (40, 8, 8, 1), dtype=np.uint8)
    y = np.arange(40) % 4
    cfg = {"aux_scale": 0.5, "auxgrad_every": 2, "num_aux_classes": 3, "aux_set_size": 0.2}
    model, loss = build_method("auxilearn", Recipe(model="cnn28"), cfg, num_classes=4, in_channels=1, image_size=8, seed=0)
    gen0 = [p.detach().clone() for p in loss.generator.parameters()]
    tr = Trainer(model, TrainConfig(epochs=1, lr=0.05, batch_size=8, count_flops=False), loss_fn=loss)
    res = tr.fit(x, y)
    assert len(loss._aux_idx) == 8  # 2 per class = ceil(0.2 · 40 / 4), held out of the primary training:
    assert res.steps == loss._step == 4  # 32 images / batch 8, not 40 / 8
    assert any(not torch.equal(a, b) for a, b in zip(gen0, loss.generator.parameters()))
    assert not torch.equal(loss.combine.detach(), torch.ones(2))  # the combiner learned too
    # the primary loss: mean(w · [main, aux_scale · aux]) + mean(main), focal losses, recomputed here
    model.train()
    xb = tr.batch(x, np.arange(8))
    yb = torch.tensor(y[:8])
    logits = model(xb)
    with torch.no_grad():
        p, aux = torch.softmax(logits, 1), model.last[1]
        main = (-(F.one_hot(yb, 4)) * (1 - p) ** 2 * torch.log(p + 1e-12)).sum(1)
        t = loss.generator(xb, yb)
        # soft labels: all the mass on the true class's K = 3 sub-classes
        torch.testing.assert_close(t.reshape(8, 4, 3).sum(-1), F.one_hot(yb, 4).float(), atol=1e-5, rtol=0)
        auxl = (-t * (1 - aux) ** 2 * torch.log(aux + 1e-12)).sum(1) * 0.5
        w = loss.combine
        want = (w[0] * main + w[1] * auxl).mean() + main.mean()
    loss._step, loss._pending = 0, False  # the next call is step 1: no meta step (every 2), none due
    assert loss(logits, yb).item() == pytest.approx(want.item(), rel=1e-5)
    assert not any(p is q for p in model.parameters() for q in loss.generator.parameters())
