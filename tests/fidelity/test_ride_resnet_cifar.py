"""RIDE's ``model/ldam_drw_resnets/ride_resnet_cifar.py`` (3 experts owning stages 2–3 at widths 24/48,
cosine heads, s = 30), ``configs/config_imbalance_cifar100_ride.json`` and ``train.py``'s
``CustomLR`` run beside vistabench's ``ride`` (``ExpertNet`` on ``resnet32``) under ``recipe: reference``.

The reference registers the shared stem and stage 1, then every expert's stage 2, every expert's
stage 3 and the heads; ours registers each expert's stages together: entries are mapped by name."""

import ast
import importlib.util
import json
from pathlib import Path

import pytest
import torch

from vistabench.learners.longtail.checkpoints import fan_in_init
from vistabench.learners.longtail.nets import ExpertNet
from vistabench.learners.models import build_model

_spec = importlib.util.spec_from_file_location("_fidelity_longtail", Path(__file__).with_name("_longtail.py"))
lt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lt)
cmp = lt.compare_module()
E, C = 3, 100


def _reference(load_reference):
    mod = load_reference("ride", "model/ldam_drw_resnets/ride_resnet_cifar.py")
    return mod.ResNet_s(mod.BasicBlock, [5, 5, 5], num_experts=E, num_classes=C, reduce_dimension=True,
                        use_norm=True, s=30)


def _ours(seed: int = 0) -> ExpertNet:
    """As fit_predict builds ride under init fan_in."""
    net = build_model("resnet32", num_classes=C, in_channels=3, image_size=32, seed=seed)
    fan_in_init(net, seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ExpertNet(net, E, scale=30.0, init="fan_in")


def _ref_key(key: str) -> str:
    """Our state-dict key -> the reference's."""
    part, rest = key.split(".", 1)
    if part == "trunk":
        i, tail = rest.split(".", 1)
        i = int(i)
        return {0: "conv1.", 1: "bn1."}.get(i, f"layer1.{i - 3}.") + tail
    if part == "blocks":
        e, b, tail = rest.split(".", 2)
        b = int(b)
        return f"layer2s.{e}.{b}.{tail}" if b < 5 else f"layer3s.{e}.{b - 5}.{tail}"
    e, tail = rest.split(".", 1)  # heads.e.weight
    return f"linears.{e}.{tail}"


def test_parameter_shapes_and_counts(load_reference):
    ref, ours = _reference(load_reference), _ours()
    theirs = dict(ref.named_parameters())
    mine = dict(ours.named_parameters())
    assert {_ref_key(k) for k in mine} == set(theirs)
    for k, p in mine.items():
        want = tuple(theirs[_ref_key(k)].shape)
        assert tuple(p.shape) == (want[::-1] if k.startswith("heads.") else want), k
    assert sum(p.numel() for p in mine.values()) == sum(p.numel() for p in theirs.values())


def test_initial_weight_statistics_per_layer(load_reference):
    ref = _reference(load_reference)
    train = lt.toy_train(num_classes=C // 10)
    used = lt.fit_predict("ride", train, train.images[:2], epochs=1, batch_size=256, lr=1e-12, init="fan_in",
                          model="resnet32").model
    # per layer in the reference's order (the classes only change the heads)
    theirs = {k: v for k, v in ref.state_dict().items() if v.dim() == 4 and v.numel() >= 256}
    mine = {_ref_key(k): v for k, v in used.state_dict().items() if v.dim() == 4 and v.numel() >= 256}
    assert set(mine) == set(theirs)
    order = list(theirs)
    stats = [[(float(d[k].double().mean()), float(d[k].double().std())) for k in order] for d in (mine, theirs)]
    cmp.assert_same_init(*stats)
    for h in used.heads:
        torch.testing.assert_close(h.weight.detach().norm(dim=1), torch.ones(C // 10), rtol=1e-5, atol=0)
    for h in ref.linears:
        torch.testing.assert_close(h.weight.detach().norm(dim=0), torch.ones(C), rtol=1e-5, atol=0)


def test_one_forward_after_copying_the_weights(load_reference):
    ref, ours = _reference(load_reference).eval(), _ours().eval()
    theirs = ref.state_dict()
    with torch.no_grad():
        for k, v in ours.state_dict().items():
            if k == "weights":
                continue
            src = theirs[_ref_key(k)]
            v.copy_(src.t() if k.startswith("heads.") else src)
        x = torch.randn(4, 3, 32, 32)
        torch.testing.assert_close(ours(x), ref(x), rtol=1e-4, atol=1e-4)


def test_first_optimiser_step(load_reference):
    load_reference("ride", "model/ldam_drw_resnets/ride_resnet_cifar.py")
    root = lt.fidelity_root("ride")
    config = json.loads((root / "configs/config_imbalance_cifar100_ride.json").read_text())
    o, s = config["optimizer"]["args"], config["lr_scheduler"]["args"]
    fn = next(n for n in ast.walk(ast.parse((root / "train.py").read_text()))
              if isinstance(n, ast.FunctionDef) and n.name == "lr_lambda")
    ns = {"lr_scheduler_args": s, "gamma": s["gamma"]}
    exec(compile(ast.Module([fn], []), "train.py", "exec"), ns)  # the authors' CustomLR lambda
    kw = lt.reference_kwargs("ride")
    groups = lt.first_step_groups("ride", lt.toy_train(), **kw, model="resnet32")
    for g in groups:
        assert g["lr"] == pytest.approx(o["lr"] * ns["lr_lambda"](0), rel=1e-12)
        assert g["momentum"] == o["momentum"] and g["weight_decay"] == o["weight_decay"]
        assert g["nesterov"] is o["nesterov"]
    assert kw["lr_milestones"] == (s["step1"], s["step2"]) and kw["warmup_epochs"] == s["warmup_epoch"]
    assert kw["lr_factors"] == pytest.approx((s["gamma"], s["gamma"] ** 2))
