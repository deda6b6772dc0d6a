"""gem's AuxiLearn (``pipelines/auxilearn/``) executed beside ours (``learners/smalldata/auxilearn.py``)
on WRN-16-8: the primary network and the label generator (layout, initialisation, forwards), the
loss combiner's start, and both optimisers' parameter groups. The generator's mode per epoch lives in
gem's CUDA-only training loop and is checked by reading (tests/smalldata/test_gem_fidelity_items.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

_spec = importlib.util.spec_from_file_location("_fidelity_compare", Path(__file__).with_name("_compare.py"))
C = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(C)

K, CLASSES = 5, 4


def _gem(load_reference):
    aux = load_reference("gem", "gem/pipelines/auxilearn/auxilearn_classifier.py")
    models = load_reference("gem", "gem/pipelines/auxilearn/models.py")
    hyper = load_reference("gem", "gem/pipelines/auxilearn/hypernet.py")
    wrn = load_reference("gem", "gem/architectures/wrn_cifar.py")
    # AuxiLearnClassifier.create_model, with the architecture built directly (gem's InstanceLoader walks
    # its package folders): both networks with a 1000-d output, the linear combiner with a skip connection
    main = wrn.WideResNet.build_architecture("wrn-16-8", 1000, 3)
    gen = wrn.WideResNet.build_architecture("wrn-16-8", 1000, 3)
    comb = hyper.MonoLinearHyperNet(input_dim=2, main_task=0, weight_normalization=False, skip_connection=True)
    model = models.WrapperModel(main, gen, comb, [K] * CLASSES, CLASSES)
    method = aux.AuxiLearnClassifier(lr=0.05, weight_decay=1e-3, num_aux_classes=K)
    return method, model


def _ours(**options):
    from vistabench.learners.smalldata.build import build_method
    from vistabench.learners.recipe import Recipe

    cfg = {"aux_scale": 0.25, "auxgrad_every": 15, **options}
    return build_method("auxilearn", Recipe(model="wrn16_8"), cfg, num_classes=CLASSES, in_channels=3, image_size=32, seed=0)


def _primary(net):
    # our backbones keep their own C-way classifier, unused here (the 1000-d fc replaces it): left out
    e = C.entries(net)
    return [(k, v) for k, v in e if k.startswith("base.") and not k.startswith("base.classifier.")] + \
        [(k, v) for k, v in e if k.startswith(("fc.", "classifier.", "aux_head."))]


def _generator(gen):
    e = C.entries(gen)
    return [(k, v) for k, v in e if k.startswith("base.") and not k.startswith("base.classifier.")] + \
        [(k, v) for k, v in e if k.startswith(("fc.", "head."))]


def test_auxilearn_networks_init_and_forwards(load_reference):
    _, ref = _gem(load_reference)
    net, loss = _ours()
    for ours, theirs in ((_primary(net), C.entries(ref.main_net)), (_generator(loss.generator), C.entries(ref.gen_net))):
        assert [tuple(v.shape) for _, v in ours] == [tuple(v.shape) for _, v in theirs]
        # both networks drawn as the architecture draws them (gem: create_model twice)
        C.assert_same_init(C.entry_conv_stats(ours), C.entry_conv_stats(theirs))
        with torch.no_grad():
            for (_, w), (_, v) in zip(ours, theirs):
                w.copy_(v)
    # the combiner starts at weight 1 per loss, plus the main loss (skip connection)
    losses = torch.rand(6, 2)
    expected = ref.comb_net(losses)
    got = (losses @ loss.combine).mean() + losses[:, 0].mean()
    torch.testing.assert_close(got, expected)
    x, y = torch.randn(3, 3, 32, 32), torch.tensor([0, 3, 1])
    for train in (True, False):
        ref.train(train)
        net.train(train)
        loss.generator.train(train)
        p1, p2 = ref.main_net(x)
        logits, aux = net.both(x)
        torch.testing.assert_close(logits, p1, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(aux, p2, rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(loss.generator(x, y), ref.gen_net(x, y), rtol=1e-4, atol=1e-6)


def test_auxilearn_optimiser_groups(load_reference, monkeypatch):
    method, ref = _gem(load_reference)
    wrap, _ = method.get_optimizer(ref, 1, 10)
    net, loss = _ours()
    made = C.our_optimizers(net, lr=0.05, weight_decay=1e-3, loss_fn=loss, size=32, num_classes=CLASSES, n=80,
                            monkeypatch=monkeypatch)
    primary, meta = made[0], made[1]
    assert C.group_settings(primary) == C.group_settings(wrap.optimizer)
    assert C.group_settings(meta) == C.group_settings(wrap.meta_optimizer.meta_optimizer)
    assert wrap.meta_optimizer.hypergrad.truncate_iter == loss.terms
    assert wrap.meta_optimizer.max_grad_norm == loss.max_grad_norm
