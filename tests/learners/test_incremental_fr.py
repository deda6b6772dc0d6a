"""Feature rectification (paper 003): each loss against a numpy re-derivation, the module's shapes,
the ViT's intermediate features, and the learner end to end on a tiny problem."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.spatial.distance import cdist

from vistabench.data import load_dataset
from vistabench.errors import InputError
from vistabench.learners.incremental import IncrementalContext, incremental_methods
from vistabench.learners.incremental.fr import (
    FeatureRectify,
    FRLearner,
    cos_loss,
    cr_loss,
    ir_loss,
    pairwise_distances,
)
from vistabench.learners.incremental.options import FROptions, script_layers
from vistabench.learners.models import build_model
from vistabench.learners.recipe import Recipe


def smooth_l1(a: np.ndarray, b: np.ndarray) -> float:
    d = np.abs(a - b)
    return float(np.mean(np.where(d < 1, 0.5 * d ** 2, d - 0.5)))


def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture
def feats() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    rect = rng.normal(size=(12, 8))
    inter = rng.normal(scale=0.3, size=(12, 8))  # distances of both sizes: both smooth-L1 branches
    protos = rng.normal(size=(5, 8))
    labels = np.array([0, 0, 1, 1, 1, 2, 2, 3, 4, 4, 4, 4])
    return rect, inter, protos, labels


def t(x: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(x, dtype=torch.float64)


# -------------------------------------------------------------------------------------- losses
def test_pairwise_distances_match_scipy(feats) -> None:
    rect = feats[0]
    d = pairwise_distances(t(rect)).numpy()
    assert np.allclose(d, cdist(rect, rect), atol=1e-6)
    assert np.all(np.diag(d) == 0)
    # equal rows: finite distance and a finite gradient (the clamp before the square root)
    x = t(np.vstack([rect[:1], rect[:1]])).requires_grad_(True)
    pairwise_distances(x).sum().backward()
    assert torch.isfinite(x.grad).all()


def test_ir_loss_all_pairs_is_eq8(feats) -> None:
    rect, inter = feats[0], feats[1]
    want = smooth_l1(cdist(rect, rect), cdist(inter, inter))
    assert float(ir_loss(t(rect), t(inter))) == pytest.approx(want, rel=1e-9)


def test_ir_loss_intra_inter_split_as_the_authors(feats) -> None:
    rect, inter, _, labels = feats
    dr, di = cdist(rect, rect), cdist(inter, inter)
    same = labels[:, None] == labels[None, :]  # the diagonal counts as a same-class pair
    want = 0.7 * smooth_l1(dr[same], di[same]) + 2.0 * smooth_l1(dr[~same], di[~same])
    got = ir_loss(t(rect), t(inter), torch.as_tensor(labels), intra_weight=0.7, inter_weight=2.0)
    assert float(got) == pytest.approx(want, rel=1e-9)
    # one class only: no different-class pairs, that group contributes nothing
    one = ir_loss(t(rect), t(inter), torch.zeros(12, dtype=torch.long))
    assert float(one) == pytest.approx(smooth_l1(dr, di), rel=1e-9)
    # identical geometry -> zero loss; only the rectified side gets a gradient
    assert float(ir_loss(t(inter), t(inter), torch.as_tensor(labels))) == pytest.approx(0, abs=1e-9)
    r, i = t(rect).requires_grad_(True), t(inter).requires_grad_(True)
    ir_loss(r, i, torch.as_tensor(labels)).backward()
    assert r.grad is not None and i.grad is None


def test_cr_loss_is_kl_of_prototype_softmaxes(feats) -> None:
    rect, inter, protos, _ = feats
    tau = 16.0
    q_r = softmax(tau * unit(rect) @ unit(protos).T)
    q_i = softmax(tau * unit(inter) @ unit(protos).T)
    want = np.mean(np.sum(q_i * (np.log(q_i) - np.log(q_r)), axis=1))  # KL(q_I || q_FR), per sample
    assert float(cr_loss(t(rect), t(inter), t(protos), temperature=tau)) == pytest.approx(want, rel=1e-8)
    # scale-invariant (L2-normalised features) and zero when the directions agree
    assert float(cr_loss(t(3 * rect), t(inter), t(protos))) == pytest.approx(want, rel=1e-8)
    assert float(cr_loss(t(2 * inter), t(inter), t(protos))) == pytest.approx(0, abs=1e-12)
    want1 = np.mean(np.sum(softmax(unit(inter) @ unit(protos).T) * (
        np.log(softmax(unit(inter) @ unit(protos).T)) - np.log(softmax(unit(rect) @ unit(protos).T))), axis=1))
    assert float(cr_loss(t(rect), t(inter), t(protos), temperature=1.0)) == pytest.approx(want1, rel=1e-8)


def test_cos_loss(feats) -> None:
    rect, inter = feats[0], feats[1]
    want = np.mean(1 - np.sum(unit(rect) * unit(inter), axis=1))
    assert float(cos_loss(t(rect), t(inter))) == pytest.approx(want, rel=1e-9)


# -------------------------------------------------------------------------------------- module
def test_feature_rectify_shapes_and_parameters() -> None:
    d, h = 16, 32
    m = FeatureRectify(d, hidden=h)
    out = m(torch.randn(7, d), torch.randn(7, d))
    assert out.shape == (7, d)
    # M_F, M_I: d -> h -> d with a LayerNorm on h; M_m: 2d -> 2d -> d with a LayerNorm on 2d
    mlp = lambda a, b, c: a * b + b + 2 * b + b * c + c  # noqa: E731
    assert sum(p.numel() for p in m.parameters()) == 2 * mlp(d, h, d) + mlp(2 * d, 2 * d, d)
    # the output depends on both inputs
    x_f, x_i = torch.randn(3, d), torch.randn(3, d)
    assert not torch.allclose(m(x_f, x_i), m(x_f, torch.randn(3, d)))
    assert not torch.allclose(m(x_f, x_i), m(torch.randn(3, d), x_i))


def test_vit_block_features() -> None:
    model = build_model("vit_small", num_classes=3, in_channels=1, image_size=8, seed=0, dim=16, depth=4, heads=2)
    model.eval()
    x = torch.randn(5, 1, 8, 8)
    final, inter = model.block_features(x, [1, 3])
    assert final.shape == (5, 16) and [i.shape for i in inter] == [(5, 16), (5, 16)]
    assert torch.allclose(final, model.features(x), atol=1e-6)
    assert torch.allclose(inter[1], final, atol=1e-6)  # the last block's token is the final feature
    assert not torch.allclose(inter[0], final)
    with pytest.raises(InputError, match="blocks"):
        model.block_features(x, [4])


def test_default_layers_and_options_validation() -> None:
    assert script_layers("mini_imagenet", 12) == (8, 9, 10)  # the authors' -output_blocks 8 9 10
    assert script_layers("cifar100", 12) == (7, 8, 9)
    assert script_layers("mini_imagenet", 6) == (2, 3, 4)  # counted from the last block
    assert script_layers("mini_imagenet", 2) == (0,)
    with pytest.raises(InputError, match="^epochs_fr: expected a number >= 1"):
        FROptions.from_dict({"epochs_fr": 0})
    with pytest.raises(InputError, match="ensemble"):
        FROptions.from_dict({"ensemble": "vote"})
    with pytest.raises(InputError, match="layers"):
        FROptions.from_dict({"layers": []})
    with pytest.raises(InputError, match="layers: expected intermediate blocks 0..4 of a 6-block ViT"):
        FROptions.from_dict({"depth": 6, "layers": [3, 5]})
    with pytest.raises(InputError, match="^lr_factors_fr: expected one factor per milestone"):
        FROptions.from_dict({"milestones_fr": [5, 8], "lr_factors_fr": [0.1]})
    with pytest.raises(InputError, match="^milestones_fr: expected increasing epochs"):
        FROptions.from_dict({"milestones_fr": [8, 5], "lr_factors_fr": [0.1, 0.1]})
    with pytest.raises(InputError, match=r"^milestones_fr: expected epochs <= epochs_fr=5, got \[8\]"):
        FROptions.from_dict({"epochs_fr": 5, "milestones_fr": [2, 8], "lr_factors_fr": [0.1, 0.1]})


def test_older_option_names_are_read_as_the_fr_names() -> None:
    """A stored config from before the rename (FR's training fields under the recipe's names) reads as
    the ``_fr`` names; the same option under both names with two values is one error naming both."""
    stored = {"script": "mini_imagenet", "recipe": "cpu", "depth": 6, "layers": [2, 3, 4], "epochs": 3, "lr": 0.05,
              "momentum": 0.8, "dampening": 0.9, "lr_milestones": [2, 3], "lr_factors": [0.1, 0.01], "p": 16,
              "k": 16, "batch_size": 7, "samples_per_class": 100}
    old = FROptions.from_dict(stored)
    assert (old.epochs_fr, old.lr_fr, old.momentum_fr, old.milestones_fr, old.lr_factors_fr, old.batch_size_fr) == (
        3, 0.05, 0.8, (2, 3), (0.1, 0.01), 7)
    new = FROptions.from_dict({"script": "mini_imagenet", "recipe": "cpu", "depth": 6, "layers": [2, 3, 4],
                               "epochs_fr": 3, "lr_fr": 0.05, "momentum_fr": 0.8, "milestones_fr": [2, 3],
                               "lr_factors_fr": [0.1, 0.01], "batch_size_fr": 7})
    assert old.to_dict() == new.to_dict() and "epochs" not in old.to_dict()
    assert FROptions.from_dict({"epochs": 3}).given() == {"epochs_fr": 3}  # the old name only
    assert FROptions.from_dict({"lr-factors": [0.1], "lr_milestones": [2], "epochs": 4}).lr_factors_fr == (0.1,)
    assert FROptions.from_dict({"epochs": "3", "epochs_fr": 3}).epochs_fr == 3  # both names, one value: fine
    with pytest.raises(InputError, match=r"^method_options\.epochs_fr: given as epochs_fr=4 and under its older "
                                         r"name epochs=3; keep one$"):
        FROptions.from_dict({"epochs_fr": 4, "epochs": 3}, prefix="method_options.")
    with pytest.raises(InputError, match=r"^milestones_fr: given as milestones_fr=\[2\] and under its older name "
                                         r"lr_milestones=\[3\]"):
        FROptions.from_dict({"milestones_fr": [2], "lr_milestones": [3], "epochs_fr": 4})
    with pytest.raises(InputError, match="^lr_factors: given twice"):
        FROptions.from_dict({"lr_factors": [0.1], "lr-factors": [0.1]})
    with pytest.raises(InputError, match="^kl: unknown option"):  # other names as before
        FROptions.from_dict({"kl": 1, "epochs": 3})


# ------------------------------------------------------------------------------------- learner
def _digits_sessions():
    data = load_dataset("digits")
    tr, te = data.train, data.test
    return data, tr, te


def _learner(**fr) -> FRLearner:
    opts = FROptions.from_dict({"depth": 3, "epochs_fr": 3, "p": 4, "k": 4, "batch_size_fr": 64,
                                "samples_per_class": 20, **fr})
    ctx = IncrementalContext(model="vit_small", model_options={"dim": 16, "depth": 3, "heads": 2}, epochs=2,
                             lr=0.05, batch_size=64, seed=0, method_options=opts, in_channels=1, image_size=8)
    return incremental_methods.get("fr").load()(ctx)


def test_learner_runs_sessions_and_is_seeded() -> None:
    data, tr, te = _digits_sessions()
    base = np.flatnonzero(tr.labels < 5)
    nov = np.flatnonzero(tr.labels == 5)[:3]
    test = np.flatnonzero(te.labels <= 5)

    def go(**fr):
        lr = _learner(**fr)
        lr.learn(tr.images[base], tr.labels[base], list(range(5)), session=1)
        s1, c1 = lr.scores(te.images[test[te.labels[test] < 5]])
        lr.learn(tr.images[nov], tr.labels[nov], [5], session=2)
        s2, c2 = lr.scores(te.images[test])
        return lr, s1, c1, s2, c2

    lr, s1, c1, s2, c2 = go()
    assert s1.shape[1] == 5 and c1.tolist() == [0, 1, 2, 3, 4]
    assert s2.shape == (len(test), 6) and c2.tolist() == [0, 1, 2, 3, 4, 5]
    assert np.all(np.abs(s2) <= 1 + 1e-5)  # averaged cosine logits
    assert lr.layers == (0, 1) and lr.prototypes.shape == (6, 16)
    assert set(lr.dists) == set(range(6)) and set(lr.dists[5]) == {"final", "layer0", "layer1"}
    assert all(np.isfinite(list(h.values())).all() for h in lr.loss_history)
    assert any(h["ce_novel"] > 0 for h in lr.loss_history) and lr.settings()["fr"]["layers"] == [0, 1]
    _, _, _, again, _ = go()
    assert np.array_equal(s2, again)  # seeded: the same run gives the same scores
    _, _, _, soft, _ = go(ensemble="softmax")
    assert np.allclose(soft.sum(axis=1), 1, atol=1e-5)


def test_learner_needs_a_vit() -> None:
    data, tr, _ = _digits_sessions()
    ctx = IncrementalContext(model="cnn28", epochs=1, batch_size=64, method_options=FROptions.from_dict({"epochs_fr": 1}),
                             in_channels=1, image_size=8)
    with pytest.raises(InputError, match="needs a ViT"):
        incremental_methods.get("fr").load()(ctx)
    base = np.flatnonzero(tr.labels < 5)
    with pytest.raises(InputError, match="layers"):
        # options placed for a deeper ViT: block 2 of a 3-block ViT is the final feature, not an intermediate one
        opts = FROptions.from_dict({"depth": 12, "layers": [2], "epochs_fr": 1, "p": 4, "k": 4})
        bad = incremental_methods.get("fr").load()(IncrementalContext(
            model="vit_small", model_options={"dim": 16, "depth": 3, "heads": 2}, epochs=1, batch_size=64,
            method_options=opts, in_channels=1, image_size=8))
        bad.learn(tr.images[base], tr.labels[base], list(range(5)), session=1)


def test_fr_lr_schedule_applied_equals_the_options() -> None:
    """The FR modules' lr read from the optimiser at each epoch is lr_fr x lr_factors_fr[i] from milestones_fr[i] on."""
    _, tr, _ = _digits_sessions()
    base = np.flatnonzero(tr.labels < 5)
    nov = np.flatnonzero(tr.labels == 5)[:3]
    lr = _learner(epochs_fr=5, lr_fr=0.2, milestones_fr=[2, 4], lr_factors_fr=[0.5, 0.05])
    lr.learn(tr.images[base], tr.labels[base], list(range(5)), session=1)
    lr.learn(tr.images[nov], tr.labels[nov], [5], session=2)
    want = [0.2, 0.2, 0.1, 0.1, 0.01]
    for session in (1, 2):
        got = [x for s, _, x in lr.lr_history if s == session]
        assert got == pytest.approx(want)
    # the cpu recipe's default: the scripts' milestones 60/70/80/90 of 100 epochs, scaled to its 20 epochs
    cpu = FROptions.from_dict({"script": "cifar100"})
    assert (cpu.epochs_fr, cpu.milestones_fr, cpu.lr_factors_fr) == (20, (12, 14, 16, 18), (0.1, 0.01, 0.001, 0.0001))


def test_fr_options_take_values_a_recipe_refuses() -> None:
    """Why FROptions is not a Recipe, and why its training fields carry the authors' ``_fr`` names
    rather than the recipe's (tests/learners/test_recipe_declared_once.py): FR's batch of sampled
    features may be 1, and its default milestones (the scripts' 60..90 % of the epochs) land on the
    last epoch for a small budget; a Recipe refuses both."""
    small = FROptions.from_dict({"epochs_fr": 3, "batch_size_fr": 1})
    assert (small.batch_size_fr, small.milestones_fr, small.lr_factors_fr) == (1, (2, 3), (0.1, 0.01))
    with pytest.raises(InputError, match="^batch_size: expected a number >= 2"):
        Recipe(batch_size=1)
    with pytest.raises(InputError, match="^lr_milestones: expected 0-based epochs before epochs=3"):
        Recipe(epochs=3, schedule="step", lr_milestones=small.milestones_fr, lr_factors=small.lr_factors_fr)
