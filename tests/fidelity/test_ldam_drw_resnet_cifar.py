"""LDAM-DRW's ``models/resnet_cifar.py`` (ResNet-32 with its ``NormedLinear``) and ``cifar_train.py``
(optimiser and lr at the first step) run beside vistabench's ``ldam_drw`` under ``recipe: reference``.

Our ResNet-32 names its layers differently and stores the cosine head as (C, D) (theirs (D, C)):
weights are copied entry by entry with the head transposed."""

import ast
import importlib.util
import math
import types
from pathlib import Path

import pytest
import torch

from vistabench.learners.longtail.checkpoints import fan_in_init
from vistabench.learners.models import NormedLinear, build_model

_spec = importlib.util.spec_from_file_location("_fidelity_longtail", Path(__file__).with_name("_longtail.py"))
lt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lt)
cmp = lt.compare_module()


def _ours(num_classes: int, seed: int = 0):
    """Built as fit_predict builds ldam_drw under init fan_in (models.build_model, fan_in_init, the
    unit-norm cosine head)."""
    net = build_model("resnet32", num_classes=num_classes, in_channels=3, image_size=32, seed=seed)
    fan_in_init(net, seed)
    net.classifier = NormedLinear(net.feature_dim, num_classes, init="unit")
    return net


def test_parameter_shapes_and_counts(load_reference):
    ref = load_reference("ldam_drw", "models/resnet_cifar.py").resnet32(num_classes=100, use_norm=True)
    ours = _ours(100)
    theirs = cmp.shapes(ref)
    assert cmp.shapes(ours)[:-1] == theirs[:-1]
    assert cmp.shapes(ours)[-1] == theirs[-1][::-1]  # the head, transposed
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in ref.parameters())


def test_initial_weight_statistics_per_layer(load_reference):
    ref = load_reference("ldam_drw", "models/resnet_cifar.py").resnet32(num_classes=100, use_norm=True)
    trained = lt.fit_predict("ldam_drw", lt.toy_train(), lt.toy_train().images[:2], epochs=1, batch_size=256,
                             lr=1e-12, init="fan_in", model="resnet32").model  # the network fit_predict used
    cmp.assert_same_init(cmp.conv_weight_stats(trained, min_size=256), cmp.conv_weight_stats(ref, min_size=256))
    ours_norms = trained.classifier.weight.detach().norm(dim=1)
    ref_norms = ref.linear.weight.detach().norm(dim=0)
    torch.testing.assert_close(ours_norms, torch.ones(10), rtol=1e-5, atol=0)
    torch.testing.assert_close(ref_norms, torch.ones(100), rtol=1e-5, atol=0)


def test_one_forward_after_copying_the_weights(load_reference):
    ref = load_reference("ldam_drw", "models/resnet_cifar.py").resnet32(num_classes=100, use_norm=True).eval()
    ours = _ours(100).eval()
    src = [v for k, v in ref.state_dict().items() if not k.endswith("num_batches_tracked")]
    dst = [v for k, v in ours.state_dict().items() if not k.endswith("num_batches_tracked")]
    with torch.no_grad():
        for i, (a, b) in enumerate(zip(src, dst)):
            b.copy_(a.t() if i == len(src) - 1 else a)
    x = torch.randn(4, 3, 32, 32)
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)


def _train_script(root: Path) -> tuple[dict, ast.Call, types.FunctionType]:
    """cifar_train.py's argparse defaults, its SGD call and its ``adjust_learning_rate`` (executed)."""
    tree = ast.parse((root / "cifar_train.py").read_text())
    defaults, sgd, fn = {}, None, None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            kw = {k.arg: k.value for k in node.keywords}
            if "default" in kw and isinstance(kw["default"], ast.Constant):
                defaults[next(a.value for a in node.args if a.value.startswith("--")).lstrip("-").replace("-", "_")] = kw["default"].value
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.optim.SGD":
            sgd = node
        if isinstance(node, ast.FunctionDef) and node.name == "adjust_learning_rate":
            ns: dict = {}
            exec(compile(ast.Module([node], []), "cifar_train.py", "exec"), ns)  # the authors' function
            fn = ns["adjust_learning_rate"]
    return defaults, sgd, fn


def test_first_optimiser_step(load_reference):
    load_reference("ldam_drw", "models/resnet_cifar.py")  # skips when the cache lacks the files
    root = lt.fidelity_root("ldam_drw")
    if not (root / "cifar_train.py").is_file():
        pytest.skip("cifar_train.py not in the fidelity cache")
    defaults, sgd, adjust = _train_script(root)
    assert {k.arg for k in sgd.keywords} == {"momentum", "weight_decay"}  # no nesterov: False
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], defaults["lr"])
    adjust(opt, 0, types.SimpleNamespace(lr=defaults["lr"]))  # called before epoch 0's batches
    kw = lt.reference_kwargs("ldam_drw")
    groups = lt.first_step_groups("ldam_drw", lt.toy_train(), **kw, model="resnet32")
    for g in groups:
        assert g["lr"] == pytest.approx(opt.param_groups[0]["lr"], rel=1e-12)
        assert g["momentum"] == defaults["momentum"] and g["weight_decay"] == defaults["wd"]
        assert g["nesterov"] is False and g["dampening"] == 0
    assert kw["batch_size"] == defaults["batch_size"] and kw["epochs"] == defaults["epochs"]
    assert math.isclose(kw["lr"], defaults["lr"])
