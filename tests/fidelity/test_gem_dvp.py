"""gem's DVP pre-training (``pipelines/distill_visual_priors/distill_pretraining.py``) executed beside
ours (``learners/smalldata/dvp.py``, ``moco.py``) on WRN-16-8: the teacher (MoCo's query encoder,
built by ``create_model``) and its initialisation, the split BN of both encoders, MoCo's constants."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ray")  # distill_pretraining.py imports ray.tune at module level

_spec = importlib.util.spec_from_file_location("_fidelity_compare", Path(__file__).with_name("_compare.py"))
C = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(C)


def _gem(load_reference):
    dp = load_reference("gem", "gem/pipelines/distill_visual_priors/distill_pretraining.py")
    wrn = load_reference("gem", "gem/architectures/wrn_cifar.py")
    hp = dp.DistillPreTraining.default_hparams()
    # DistillPreTraining.create_model with the architecture built directly (gem's InstanceLoader walks
    # its package folders): two encoders from create_model, MoCo with gem's constants
    q = wrn.WideResNet.build_architecture("wrn-16-8", 10, 3)
    k = wrn.WideResNet.build_architecture("wrn-16-8", 10, 3)
    return dp, hp, dp.MoCo_smallbank(q, k, dim=128, K=hp["K"], m=hp["m"], T=hp["T"], margin=hp["margin"])


def _ours(**options):
    from vistabench.learners.smalldata.build import build_method
    from vistabench.learners.recipe import Recipe

    return build_method("dvp", Recipe(model="wrn16_8"), {"distill_weight": 1e-4, **options}, num_classes=10, in_channels=3,
                        image_size=32, seed=0)


def _convs(module):
    return C.entry_conv_stats([(k, v) for k, v in C.entries(module) if "classifier" not in k and "fc" not in k])


def test_dvp_teacher_initialisation_and_moco_constants(load_reference):
    from vistabench.learners.smalldata.options import DvpOptions

    dp, hp, moco = _gem(load_reference)
    _, loss = _ours()
    teacher = loss.teacher
    C.assert_same_init(_convs(teacher), _convs(moco.encoder_q))  # both drawn as the architecture draws them
    _, old = _ours(teacher_init="default")
    with pytest.raises(AssertionError, match="std"):
        C.assert_same_init(_convs(old.teacher), _convs(moco.encoder_q))
    opts = DvpOptions.for_recipe("gem")
    assert (opts.moco_queue, opts.moco_momentum, opts.moco_temperature, opts.moco_margin) == \
        (hp["K"], hp["m"], hp["T"], hp["margin"])
    assert (moco.queue.shape[0], moco.K) == (opts.moco_dim, opts.moco_queue)
    # gem's single-GPU shuffled BN: every BatchNorm2d of both encoders split in 8
    splits = {m.num_splits for m in moco.encoder_q.modules() if isinstance(m, dp.SplitBatchNorm)}
    assert splits == {opts.moco_splits}
