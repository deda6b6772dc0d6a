"""BBN's ``lib/backbone/resnet_cifar.py`` (``BBN_ResNet_Cifar``: ResNet-32 whose last block is the two
branches ``cb_block`` / ``rb_block``), ``lib/utils/lr_scheduler.py``, ``lib/utils/utils.py`` and
``configs/cifar100.yaml`` run beside vistabench's ``bbn`` (``BBNNet`` on ``resnet32``) under
``recipe: reference``. The reference's network pools the concatenated branch maps before its
``nn.Linear`` head (``lib/net/network.py``); the check compares the pooled features."""

import ast
import importlib.util
from pathlib import Path

import pytest
import torch
import yaml

from vistabench.learners.longtail.checkpoints import fan_in_init
from vistabench.learners.longtail.nets import BBNNet
from vistabench.learners.models import build_model

_spec = importlib.util.spec_from_file_location("_fidelity_longtail", Path(__file__).with_name("_longtail.py"))
lt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lt)
cmp = lt.compare_module()


def _reference(load_reference):
    mod = load_reference("bbn", "lib/backbone/resnet_cifar.py")
    return mod.BBN_ResNet_Cifar(mod.BasicBlock, [5, 5, 5])


def _ours(num_classes: int = 10, seed: int = 0) -> BBNNet:
    """As fit_predict builds bbn under init fan_in: backbone, fan_in_init, then the branches."""
    net = build_model("resnet32", num_classes=num_classes, in_channels=3, image_size=32, seed=seed)
    fan_in_init(net, seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return BBNNet(net, init="fan_in")


def test_parameter_shapes_and_counts(load_reference):
    ref, ours = _reference(load_reference), _ours()
    body = [p for n, p in ours.named_parameters() if not n.startswith("head.")]
    assert [tuple(p.shape) for p in body] == cmp.shapes(ref)
    assert tuple(ours.head.weight.shape) == (10, 128)  # the reference's classifier: nn.Linear(128, C)


def test_initial_weight_statistics_per_layer(load_reference):
    ref = _reference(load_reference)
    train = lt.toy_train()
    used = lt.fit_predict("bbn", train, train.images[:2], epochs=1, batch_size=256, lr=1e-12, init="fan_in",
                          model="resnet32").model  # the network fit_predict trained
    cmp.assert_same_init(cmp.conv_weight_stats(used, min_size=256), cmp.conv_weight_stats(ref, min_size=256))


def test_one_forward_after_copying_the_weights(load_reference):
    ref, ours = _reference(load_reference).eval(), _ours().eval()
    body = [v for k, v in ours.state_dict().items() if not k.startswith("head.") and not k.endswith("num_batches_tracked")]
    src = [v for k, v in ref.state_dict().items() if not k.endswith("num_batches_tracked")]
    assert len(body) == len(src)
    with torch.no_grad():
        for a, b in zip(src, body):
            b.copy_(a)
        x = torch.randn(4, 3, 32, 32)
        f = ours.trunk(x)
        mine = torch.cat([ours.conventional(f), ours.rebalancing(f)], dim=1)
        theirs = ref(x).mean(dim=(2, 3))
    torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-5)


def test_first_optimiser_step(load_reference):
    sched = load_reference("bbn", "lib/utils/lr_scheduler.py")
    root = lt.fidelity_root("bbn")
    cfg = yaml.safe_load((root / "configs/cifar100.yaml").read_text())["TRAIN"]
    o, s = cfg["OPTIMIZER"], cfg["LR_SCHEDULER"]
    sgd = next(n for n in ast.walk(ast.parse((root / "lib/utils/utils.py").read_text()))
               if isinstance(n, ast.Call) and ast.unparse(n.func) == "torch.optim.SGD")
    nesterov = {k.arg: ast.literal_eval(k.value) for k in sgd.keywords if k.arg == "nesterov"}["nesterov"]
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=float(o["BASE_LR"]))
    scheduler = sched.WarmupMultiStepLR(opt, s["LR_STEP"], gamma=s["LR_FACTOR"], warmup_epochs=s["WARM_EPOCH"])
    scheduler.step()  # main/train.py steps the scheduler before each (1-based) epoch
    groups = lt.first_step_groups("bbn", lt.toy_train(), **lt.reference_kwargs("bbn"), model="resnet32")
    for g in groups:
        assert g["lr"] == pytest.approx(opt.param_groups[0]["lr"], rel=1e-12)
        assert g["momentum"] == o["MOMENTUM"] and g["weight_decay"] == pytest.approx(float(o["WEIGHT_DECAY"]))
        assert g["nesterov"] is nesterov is True
