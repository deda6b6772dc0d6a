"""gem's dual selective kernel networks (``pipelines/dsk/``) executed beside ours
(``learners/smalldata/dskn.py``): WRN-16-8 layout, initial weights, forwards in both modes and one
SGD step (the branch not drawn still moves: weight decay, momentum, BN statistics)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

_spec = importlib.util.spec_from_file_location("_fidelity_compare", Path(__file__).with_name("_compare.py"))
C = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(C)


def _gem(load_reference, *, composite: bool = False, lr: float = 0.1, wd: float = 1e-3):
    dsk = load_reference("gem", "gem/pipelines/dsk/dsk_classifier.py")
    wrn = load_reference("gem", "gem/architectures/wrn_cifar.py")
    method = dsk.DSKClassifier(lr=lr, weight_decay=wd, composite_loss=composite)
    net = wrn.WideResNet(16, 10, input_channels=3, widen_factor=8, block=dsk.DSKWideBlock)
    if composite:
        net = dsk.FeatureModelWrapper(net, 10, net.fc.in_features)
    return method, net


def _ours(options: dict):
    from vistabench.learners.smalldata.build import build_method
    from vistabench.learners.recipe import Recipe

    return build_method("dskn", Recipe(model="wrn16_8"), {"loss": "ce", **options}, num_classes=10, in_channels=3,
                        image_size=32, seed=0)


def test_dskn_wrn_shapes_init_forward(load_reference):
    _, ref = _gem(load_reference)
    net, loss = _ours({})
    assert loss is None
    assert sorted(C.shapes(net)) == sorted(C.shapes(ref))
    assert sum(p.numel() for p in net.parameters()) == sum(p.numel() for p in ref.parameters())
    C.assert_same_init(C.entry_conv_stats(C.entries(net)), C.entry_conv_stats(C.reorder_dual(ref.state_dict())))
    # gem's WRN shortcut is conv + BlurPool(stride 1) where only the width changes: same buffers
    assert [tuple(b.shape) for _, b in C.reorder_dual(ref.state_dict())] == \
        [tuple(b.shape) for k, b in net.state_dict().items() if not k.endswith("num_batches_tracked")]
    C.copy_entries(C.reorder_dual(ref.state_dict()), net)
    x = torch.randn(2, 3, 32, 32)
    ref.eval()
    net.eval()
    torch.testing.assert_close(net(x), ref(x), rtol=1e-4, atol=1e-4)
    ref.train()
    net.train()
    torch.manual_seed(3)
    out_ref = ref(x)
    torch.manual_seed(3)  # the same branch draws, block by block
    torch.testing.assert_close(net(x), out_ref, rtol=1e-4, atol=1e-4)


def _one_step(model, x, y, opt):
    model.train()
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


def test_dskn_one_sgd_step_moves_both_branches(load_reference, monkeypatch):
    method, ref = _gem(load_reference, lr=0.1, wd=1e-3)
    net, _ = _ours({})
    C.copy_entries(C.reorder_dual(ref.state_dict()), net)
    ref_opt, _ = method.get_optimizer(ref, 1, 10)
    ours_opt = C.our_optimizer(_ours({})[0], lr=0.1, weight_decay=1e-3, size=32, monkeypatch=monkeypatch)
    assert C.group_settings(ours_opt) == C.group_settings(ref_opt)
    opt = torch.optim.SGD(net.parameters(), **{k: v for k, v in ours_opt.defaults.items()
                                                 if k in ("lr", "momentum", "weight_decay", "nesterov")})
    x, y = torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 3])
    torch.manual_seed(5)
    _one_step(ref, x, y, ref_opt)
    torch.manual_seed(5)
    _one_step(net, x, y, opt)
    after_ref = C.reorder_dual(ref.state_dict())
    after = [(k, v) for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")]
    for (kr, vr), (k, v) in zip(after_ref, after):
        torch.testing.assert_close(v, vr, rtol=1e-4, atol=1e-5, msg=f"{k} vs gem's {kr}")


def test_dskn_drawn_option_leaves_the_other_branch_still(load_reference):
    """``dual_forward="drawn"`` (our earlier variant): the branch not drawn gets no gradient at all."""
    net, _ = _ours({"dual_forward": "drawn"})
    block = net.stages[0]
    torch.manual_seed(0)
    net.train()
    torch.nn.functional.cross_entropy(net(torch.randn(2, 3, 32, 32)), torch.tensor([0, 1])).backward()
    grads = [p.grad is None for p in block.branch1.parameters()] + [p.grad is None for p in block.branch2.parameters()]
    assert any(grads) and not all(grads)


def test_dskn_composite_loss_and_centre_step(load_reference):
    """gem's positive-class + cosine + 0.5 x centre loss and its ``SGDWithCenterLoss`` centre step (the
    centres' gradient division loops over a generator the inner SGD already consumed: a plain step of
    0.5 x their gradient), beside ``DSKNCompositeLoss`` (its step applied at the next forward)."""
    dsk = load_reference("gem", "gem/pipelines/dsk/dsk_classifier.py")
    cl = load_reference("gem", "gem/pipelines/dsk/center_loss.py")
    from vistabench.learners.smalldata.dskn import DSKNCompositeLoss

    feats = torch.randn(6, 8, requires_grad=True)
    logits = torch.randn(6, 4, requires_grad=True)
    y = torch.tensor([0, 1, 2, 3, 1, 0])
    centre = cl.CenterLoss(4, 8, use_gpu=False)  # DSKLoss builds it with use_gpu=True (CUDA only)
    weight, centre_lr = 0.5, 0.5
    ref = dsk.PositiveClassLoss()(logits, y) + weight * centre(feats, y)

    class _Model:  # what the loss reads of the model: the projected features of the training forward
        num_classes, feature_dim, last_features = 4, 8, feats

    ours = DSKNCompositeLoss(_Model(), centre_weight=weight, centre_lr=centre_lr)
    with torch.no_grad():
        ours.centres.copy_(centre.centers)
    got = ours(logits, y)
    torch.testing.assert_close(got, ref)
    g_ref = torch.autograd.grad(ref, [logits, feats, centre.centers], retain_graph=True)
    g_ours = torch.autograd.grad(got, [logits, feats, ours.centres], retain_graph=True)
    for a, b in zip(g_ours, g_ref):
        torch.testing.assert_close(a, b)
    # one step of each optimiser on the centres
    dummy = torch.nn.Parameter(torch.zeros(1))
    opt = cl.SGDWithCenterLoss([dummy], centre.parameters(), lr=0.1, center_lr=centre_lr, center_loss_weight=weight,
                               momentum=0.9, weight_decay=1e-3)
    opt.zero_grad()
    ref.backward()
    dummy.grad = torch.zeros(1)
    opt.step()
    got.backward()
    ours(logits.detach(), y)  # the next forward applies the pending centre step
    torch.testing.assert_close(ours.centres.detach(), centre.centers.detach())


@pytest.mark.parametrize("depth", [18, 50])
def test_dskn_resnet_shapes_init_forward(load_reference, depth):
    """The ImageNet-stem ResNet-18/50 of DSK basic/bottleneck blocks (groups 32, blurred strided shortcuts)."""
    dsk = load_reference("gem", "gem/pipelines/dsk/dsk_classifier.py")
    rn = load_reference("gem", "gem/architectures/rn.py")
    block, layers = (dsk.DSKBasicBlock, [2, 2, 2, 2]) if depth == 18 else (dsk.DSKBottleneck, [3, 4, 6, 3])
    ref = rn.ResNet.build_architecture(f"rn{depth}", 10, 3,
                                       config={depth: {"block": block, "layers": layers, "groups": 32}})
    from vistabench.learners.smalldata.build import build_method
    from vistabench.learners.recipe import Recipe

    net, _ = build_method("dskn", Recipe(model=f"resnet{depth}"), {"loss": "ce"}, num_classes=10, in_channels=3, image_size=None,
                          seed=0, model_options={"small_input": False})
    theirs = C.reorder_dual(ref.state_dict())
    assert [tuple(v.shape) for _, v in C.entries(net)] == [tuple(v.shape) for _, v in theirs]
    C.assert_same_init(C.entry_conv_stats(C.entries(net)), C.entry_conv_stats(theirs))
    C.copy_entries(theirs, net)
    x = torch.randn(2, 3, 32, 32)
    for train in (True, False):
        ref.train(train)
        net.train(train)
        torch.manual_seed(3)
        out_ref = ref(x)
        torch.manual_seed(3)
        torch.testing.assert_close(net(x), out_ref, rtol=1e-4, atol=1e-4)
    # our earlier variant (no ReLU closing each branch) is what the forward check catches
    old, _ = build_method("dskn", Recipe(model=f"resnet{depth}"), {"loss": "ce", "branch_relu": False}, num_classes=10,
                          in_channels=3, image_size=None, seed=0, model_options={"small_input": False})
    C.copy_entries(theirs, old)
    old.eval()
    assert not torch.allclose(old(x), ref(x), rtol=1e-3, atol=1e-3)
