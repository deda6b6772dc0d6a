"""Small-data methods: parametrised over the registry, plus checks of each loss/block by hand."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from vistabench.learners.smalldata.basic import CosineLoss
from vistabench.learners.smalldata.build import build_method
from vistabench.learners.recipe import Recipe
from vistabench.learners.smalldata.harmonic import HarmonicConv2d, dct_filters, harmonize
from vistabench.learners.smalldata.registry import methods
from vistabench.learners.trainer import TrainConfig, Trainer
from vistabench.errors import InputError

CONFIG = {"xent_weight": 0.1, "dct_level": 5, "grad_l2": 0.1, "scattering_J": 1, "ole_weight": 0.25, "distill_weight": 1e-4,
          "aux_scale": 0.25, "auxgrad_every": 2, "num_aux_classes": 2, "aux_set_size": 0.1, "kappa": 16.0}


@pytest.mark.parametrize("name", methods.names())
def test_every_method_trains_and_predicts(name):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (40, 12, 12, 1), dtype=np.uint8)
    y = np.arange(40) % 4
    model, loss = build_method(name, Recipe(model="cnn28"), CONFIG, num_classes=4, in_channels=1, image_size=12, seed=0)
    tr = Trainer(model, TrainConfig(epochs=2, lr=0.01, batch_size=10, count_flops=False), loss_fn=loss)
    res = tr.fit(x, y)
    assert all(math.isfinite(h["loss"]) for h in res.history)
    assert tr.predict_logits(x).shape == (40, 4)
    m = methods.get(name)
    searched = {i.name for i in m.options.fields_info() if isinstance(i.default, dict)} - {"weight_decay"}
    assert searched <= set(CONFIG) and m.title  # weight_decay (grad_l2's) goes to the trainer


def test_methods_are_seeded():
    a, _ = build_method("cosine_ce", Recipe(model="cnn28"), CONFIG, num_classes=3, in_channels=1, image_size=8, seed=4)
    b, _ = build_method("cosine_ce", Recipe(model="cnn28"), CONFIG, num_classes=3, in_channels=1, image_size=8, seed=4)
    for pa, pb in zip(a.state_dict().values(), b.state_dict().values()):
        assert torch.equal(pa, pb)


def test_missing_method_hyper_parameter():
    with pytest.raises(InputError, match="missing hyper-parameters \\['grad_l2'\\]"):
        build_method("grad_l2", Recipe(model="cnn28"), {}, num_classes=3, in_channels=1, image_size=8, seed=0)
    with pytest.raises(InputError, match="did you mean 'cosine'"):
        methods.get("cosin")


def test_dct_basis_is_orthonormal_and_complete():
    for k in (3, 5):
        b = dct_filters(k).reshape(k * k, -1).double()
        assert torch.allclose(b @ b.T, torch.eye(k * k, dtype=torch.float64), atol=1e-6)
    assert dct_filters(3, level=3).shape == (6, 3, 3)  # u + v < 3
    assert torch.allclose(dct_filters(3)[0], torch.full((3, 3), 1 / 3))  # DC filter


def test_harmonic_block_reproduces_any_conv():
    """With all DCT filters kept, mixing weights W_mix = W · B^T reproduce a plain conv exactly."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(2, 3, 3, padding=1, bias=False)
    hb = HarmonicConv2d(2, 3, 3, padding=1)
    basis = dct_filters(3).reshape(9, 9)  # (m, k*k)
    w = conv.weight.detach().reshape(3, 2, 9)  # (cout, cin, k*k)
    mix = torch.einsum("oik,mk->oim", w, basis).reshape(3, 18, 1, 1)  # channel order: cin-major
    with torch.no_grad():
        hb.mix.weight.copy_(mix)
    x = torch.randn(2, 2, 7, 7)
    assert torch.allclose(hb(x), conv(x), atol=1e-5)


def test_harmonize_replaces_kxk_convs_only():
    from vistabench.learners.models import build_model

    m = build_model("resnet18", num_classes=5, in_channels=3, image_size=32, seed=0)
    n3 = sum(isinstance(c, torch.nn.Conv2d) and c.kernel_size[0] > 1 for c in m.modules())
    n1 = sum(isinstance(c, torch.nn.Conv2d) and c.kernel_size[0] == 1 for c in m.modules())
    assert harmonize(m, level=5) == n3
    assert sum(isinstance(c, HarmonicConv2d) for c in m.modules()) == n3
    # the 1x1 convs left, plus one 1x1 mix per harmonic block
    assert sum(isinstance(c, torch.nn.Conv2d) and c.kernel_size[0] == 1 for c in m.modules()) == n1 + n3
    assert m(torch.randn(2, 3, 32, 32)).shape == (2, 5)


def test_cosine_loss_by_hand():
    z = torch.tensor([[3.0, 4.0], [1.0, 0.0]])
    y = torch.tensor([0, 1])
    # cos to e_0 of (3,4) = 0.6; cos to e_1 of (1,0) = 0
    assert CosineLoss()(z, y).item() == pytest.approx(((1 - 0.6) + (1 - 0.0)) / 2)
    assert CosineLoss()(5 * z, y).item() == pytest.approx(CosineLoss()(z, y).item())  # scale-invariant


def test_grad_l2_penalty_matches_finite_differences():
    model, loss = build_method("grad_l2", Recipe(model="cnn28"), {"grad_l2": 0.5}, num_classes=3, in_channels=1, image_size=6,
                               seed=0)
    model = model.double().train()
    for mod in model.modules():  # batch norm in eval mode so per-sample losses are independent
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.eval()
    x = torch.randn(2, 1, 6, 6, dtype=torch.float64)
    y = torch.tensor([0, 2])
    total = loss(model(x), y).item()
    ce = F.cross_entropy(model.base(x), y).item()
    # finite-difference input gradient of each sample's loss
    pen = 0.0
    for i in range(2):
        g = torch.zeros_like(x[i])
        for idx in np.ndindex(*x[i].shape):
            e = torch.zeros_like(x[i])
            e[idx] = 1e-5
            up = F.cross_entropy(model.base((x[i] + e)[None]), y[i:i + 1]).item()
            dn = F.cross_entropy(model.base((x[i] - e)[None]), y[i:i + 1]).item()
            g[idx] = (up - dn) / 2e-5
        pen += float((g ** 2).sum())
    assert total == pytest.approx(ce + 0.5 * pen / 2, rel=1e-5)
    assert methods.get("grad_l2").fixed == {}


def test_grad_l2_weight_decay_is_searched_under_gem_and_off_under_vistabench():
    # gem scripts/full_train.py searches 'decay' ~ logU(1e-5, 0.1) for every method, gradl2 included
    from vistabench.data.smalldata import get_preset
    from vistabench.protocols.smalldata.core import method_space
    from vistabench.tuning import Fixed, LogUniform

    gem = method_space("grad_l2", get_preset("digits", recipe="gem"))
    assert isinstance(gem["weight_decay"], LogUniform) and (gem["weight_decay"].low, gem["weight_decay"].high) \
        == (1e-5, 0.1)
    ours = method_space("grad_l2", get_preset("digits", recipe="vistabench"))
    assert ours["weight_decay"] == Fixed(0.0)
