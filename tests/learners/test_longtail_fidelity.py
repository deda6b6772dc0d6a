"""The reference recipes' values read where the training uses them (docs/fidelity.md, long-tail):
the optimizer's Nesterov flag, the number of steps an epoch takes (drop_last, cRT's class-aware
epoch), the normalisation constants applied to a batch, the initialisation's spread and the
weights ``select_checkpoint`` leaves in the network."""

import math

import numpy as np
import pytest
import torch

from vistabench.data import Dataset
from vistabench.errors import InputError
from vistabench.learners.longtail import fit_predict
from vistabench.learners.longtail.checkpoints import fan_in_init
from vistabench.learners.longtail.methods import ClassAwareSampler
from vistabench.learners.models import build_model
from vistabench.protocols.longtail.runner import run
from vistabench.protocols.longtail.config import LongtailConfig
from vistabench.protocols.longtail.recipes import CIFAR_MEAN, CIFAR_STD

RNG = np.random.default_rng(0)
LABELS = np.r_[np.zeros(40, int), np.ones(20, int), np.full(10, 2)]
IMAGES = np.clip(RNG.normal(60 + 60 * LABELS[:, None, None, None], 30, (70, 8, 8, 3)), 0, 255).astype(np.uint8)
TRAIN = Dataset(IMAGES, LABELS, ["a", "b", "c"], name="toy-rgb")


class _SGDSpy(torch.optim.SGD):
    made: list = []
    steps = 0

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        _SGDSpy.made.append(self)

    def step(self, *a, **kw):
        _SGDSpy.steps += 1
        return super().step(*a, **kw)


@pytest.fixture
def sgd(monkeypatch):
    _SGDSpy.made, _SGDSpy.steps = [], 0
    monkeypatch.setattr(torch.optim, "SGD", _SGDSpy)
    return _SGDSpy


def _npz(tmp_path, n_test=30):
    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(3), 40)
    x = np.clip(rng.normal(60 + 60 * y[:, None, None, None], 30, (120, 8, 8, 3)), 0, 255).astype(np.uint8)
    yt = np.arange(n_test) % 3
    xt = np.clip(rng.normal(60 + 60 * yt[:, None, None, None], 30, (n_test, 8, 8, 3)), 0, 255).astype(np.uint8)
    path = tmp_path / "toy.npz"
    np.savez(path, train_images=x, train_labels=y, test_images=xt, test_labels=yt)
    return f"npz:{path}"


def test_bbn_reference_recipe_trains_with_nesterov_and_drops_the_last_batch(tmp_path, sgd):
    # the reference recipe of BBN (lib/utils/utils.py: nesterov=True; main/train.py: drop_last=True),
    # shortened to 2 epochs; what the optimizer and the loop actually did is read back
    cfg = LongtailConfig.from_dict({"data": _npz(tmp_path), "method": "bbn", "imbalance": 4, "recipe": "reference",
                                    "epochs": 2, "lr_milestones": [1], "lr_factors": [0.01], "warmup_epochs": 0,
                                    "batch_size": 16})
    assert cfg.nesterov is True and cfg.drop_last is True
    rec = run(cfg)[0]
    n = sum(rec.settings["train_counts"])
    assert n % 16  # a last incomplete batch exists, and is dropped
    assert [g["nesterov"] for o in sgd.made for g in o.param_groups] == [True]
    assert sgd.steps == 2 * (n // 16)


def test_cpu_recipe_keeps_plain_momentum_and_the_last_batch(tmp_path, sgd):
    rec = run(LongtailConfig.from_dict({"data": _npz(tmp_path), "method": "bbn", "imbalance": 4, "epochs": 2,
                                        "batch_size": 16}))[0]
    n = sum(rec.settings["train_counts"])
    assert [g["nesterov"] for o in sgd.made for g in o.param_groups] == [False]
    assert sgd.steps == 2 * math.ceil(n / 16) and rec.settings["drop_last"] is False


def test_crt_reference_epoch_is_int_n_over_batch_steps_of_the_class_aware_sampler():
    # classifier-balancing run_networks.py: epoch_steps = int(N_train / batch_size), the loop breaks there
    run_ = fit_predict("crt", TRAIN, IMAGES[:6], epochs=1, batch_size=16, seed=0,
                       options={"crt_sampler": "class_aware", "crt_epoch": "steps", "crt_batch_size": 16,
                                "crt_epochs": 3})
    second = run_.train_results[1]
    assert second.config["sampler"] == "class_aware"
    assert second.steps == 3 * (70 // 16)
    # the sampler's own epoch (max_c n_c x C = 40 x 3 images) is the named option
    own = fit_predict("crt", TRAIN, IMAGES[:6], epochs=1, batch_size=16, seed=0,
                      options={"crt_sampler": "class_aware", "crt_epoch": "sampler", "crt_batch_size": 16,
                               "crt_epochs": 1})
    assert own.train_results[1].steps == math.ceil(120 / 16)


def test_class_aware_sampler_length():
    rng = np.random.default_rng(0)
    assert len(ClassAwareSampler(4)(LABELS, rng)) == 40 * 3
    s = ClassAwareSampler(4, epoch_length=64)
    a, b = s(LABELS, rng), s(LABELS, rng)
    assert len(a) == len(b) == 64
    assert np.bincount(LABELS[a], minlength=3).tolist() == [24, 20, 20]  # classes visited in cycles of 4


def test_reference_recipe_config_lists_crt_steps_epoch():
    cfg = LongtailConfig.from_dict({"data": "cifar100:/x", "method": "crt", "imbalance": 100})
    assert cfg.method_options.crt_epoch == "steps" and cfg.method_options.crt_batch_size == 512
    assert LongtailConfig.from_dict({"data": "digits", "method": "crt", "imbalance": 10}).method_options.crt_epoch \
        == "sampler"


def test_cifar_normalisation_constants_are_applied_to_the_batches():
    res = fit_predict("ce", TRAIN, IMAGES[:6], epochs=1, batch_size=16, seed=0,
                      normalisation=(CIFAR_MEAN, CIFAR_STD))
    assert res.train_results[0].normaliser["mean"] == pytest.approx(list(CIFAR_MEAN))
    # a batch as the trainer that trained builds it: (x/255 - mean) / std with the fixed constants
    tr_model = res.model
    from vistabench.learners.trainer import Trainer, TrainConfig
    from vistabench.learners.tensors import Normaliser

    tr = Trainer(tr_model, TrainConfig(epochs=1))
    tr.normaliser = Normaliser(mean=np.array(CIFAR_MEAN), std=np.array(CIFAR_STD), dtype="uint8")
    x = tr.batch(IMAGES, slice(0, 2))
    want = (IMAGES[:2].transpose(0, 3, 1, 2) / 255.0 - np.array(CIFAR_MEAN)[None, :, None, None]) \
        / np.array(CIFAR_STD)[None, :, None, None]
    np.testing.assert_allclose(x.numpy(), want, rtol=1e-5, atol=1e-5)
    # the default measures the training images
    own = fit_predict("ce", TRAIN, IMAGES[:6], epochs=1, batch_size=16, seed=0)
    assert own.train_results[0].normaliser["mean"] == pytest.approx((IMAGES / 255.0).reshape(-1, 3).mean(0))


def test_cifar_normalisation_on_other_channel_counts_is_refused(tmp_path):
    y = np.repeat(np.arange(3), 20)
    path = tmp_path / "gray.npz"
    np.savez(path, train_images=np.zeros((60, 8, 8), np.uint8), train_labels=y,
             test_images=np.zeros((6, 8, 8), np.uint8), test_labels=np.arange(6) % 3)
    with pytest.raises(InputError, match="^normalisation: 'cifar'"):
        run(LongtailConfig.from_dict({"data": f"npz:{path}", "method": "ce", "imbalance": 2, "epochs": 1,
                                      "normalisation": "cifar"}))


def test_fan_in_init_spread_of_convolutions_and_linear_layers():
    net = build_model("resnet32", num_classes=10, in_channels=3, image_size=32, seed=0)
    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    stem = convs[0]  # 3 -> 16 channels: fan-in 27, fan-out 144
    before = float(stem.weight.detach().std())
    assert before == pytest.approx(math.sqrt(2 / 144), rel=0.25)  # the model's own: fan-out
    fan_in_init(net, seed=0)
    assert float(stem.weight.detach().std()) == pytest.approx(math.sqrt(2 / 27), rel=0.25)
    head = net.classifier
    assert float(head.weight.detach().std()) == pytest.approx(math.sqrt(2 / head.in_features), rel=0.25)
    big = max(convs, key=lambda m: m.weight.numel())
    fan_in = big.weight[0].numel()
    assert float(big.weight.detach().std()) == pytest.approx(math.sqrt(2 / fan_in), rel=0.05)


def test_fit_predict_fan_in_changes_the_start_and_is_seeded():
    a = fit_predict("ce", TRAIN, IMAGES[:6], epochs=1, batch_size=16, seed=0, lr=1e-9, init="fan_in")
    b = fit_predict("ce", TRAIN, IMAGES[:6], epochs=1, batch_size=16, seed=0, lr=1e-9)
    c = fit_predict("ce", TRAIN, IMAGES[:6], epochs=1, batch_size=16, seed=0, lr=1e-9, init="fan_in")
    np.testing.assert_array_equal(a.logits, c.logits)
    head_a, head_b = a.model.classifier.weight, b.model.classifier.weight
    # PyTorch's default linear init is U(±1/sqrt(fan_in)): std 1/sqrt(3 fan_in); fan-in Kaiming: sqrt(2/fan_in)
    assert float(head_a.detach().std()) / float(head_b.detach().std()) == pytest.approx(math.sqrt(6), rel=0.3)
    with pytest.raises(InputError, match="^init:"):
        fit_predict("ce", TRAIN, IMAGES[:6], epochs=1, batch_size=16, init="xavier")


def test_best_test_predicts_with_the_best_epoch_and_keeps_the_last_epochs_accuracy():
    test_x, test_y = IMAGES[::3], LABELS[::3]
    res = fit_predict("ce", TRAIN, test_x, epochs=4, batch_size=16, seed=0, lr=0.2,
                      select_checkpoint="best_test", selection=(test_x, test_y))
    ck = res.settings["checkpoint"]
    hist = [h["val_acc"] for h in res.train_results[0].history]
    assert ck["select"] == "best_test" and ck["selection_set"] == "test"
    assert ck["selected_acc"] == max(hist) and ck["epoch"] == 1 + hist.index(max(hist))
    assert ck["last_epoch_acc"] == hist[-1]
    # the state dict in the network is the selected epoch's: its predictions score the selected accuracy
    assert float(np.mean(res.logits.argmax(1) == test_y)) == pytest.approx(ck["selected_acc"])
    last = fit_predict("ce", TRAIN, test_x, epochs=4, batch_size=16, seed=0, lr=0.2)
    assert float(np.mean(last.logits.argmax(1) == test_y)) == pytest.approx(ck["last_epoch_acc"])
    assert "checkpoint" not in last.settings


def test_select_checkpoint_arguments_are_checked():
    with pytest.raises(InputError, match="^select_checkpoint:"):
        fit_predict("ce", TRAIN, IMAGES[:6], epochs=1, batch_size=16, select_checkpoint="best")
    with pytest.raises(InputError, match="^selection:"):
        fit_predict("ce", TRAIN, IMAGES[:6], epochs=1, batch_size=16, select_checkpoint="best_val")


def test_protocol_best_val_holds_out_a_tenth_and_best_test_records_both_numbers(tmp_path):
    data = _npz(tmp_path)
    base = {"data": data, "method": "ce", "imbalance": 4, "epochs": 2, "batch_size": 16}
    last = run(LongtailConfig.from_dict(base))[0]
    val = run(LongtailConfig.from_dict({**base, "select_checkpoint": "best_val"}))[0]
    best = run(LongtailConfig.from_dict({**base, "select_checkpoint": "best_test"}))[0]
    counts = last.settings["train_counts"]
    assert val.settings["train_counts"] == [c - int(0.1 * c) for c in counts]
    assert val.metrics["checkpoint"]["selection_set"] == "val"
    ck = best.metrics["checkpoint"]
    assert ck["selection_set"] == "test" and ck["selected_acc"] >= ck["last_epoch_acc"]
    assert "checkpoint" not in last.metrics
    # the last-epoch run scores the last epoch's accuracy (the same training, nothing selected)
    assert last.metrics["balanced"] == pytest.approx(ck["last_epoch_acc"])


def test_survey_table_shows_selected_and_last_epoch_side_by_side(tmp_path):
    from vistabench.report.longtail import survey_table
    from vistabench.store import ResultsStore

    store = ResultsStore(tmp_path / "store")
    data = _npz(tmp_path)
    base = {"data": data, "method": "ce", "imbalance": 4, "epochs": 2, "batch_size": 16}
    run(LongtailConfig.from_dict(base), store=store)
    run(LongtailConfig.from_dict({**base, "select_checkpoint": "best_test"}), store=store)
    table = survey_table(store)
    rows = {r["method"].split(" (")[0]: r for r in table.rows}
    assert set(rows) == {"ce", "ce [best_test]"}
    assert rows["ce"]["ckpt_selected"] is None
    assert rows["ce [best_test]"]["ckpt_selected"] >= rows["ce [best_test]"]["ckpt_last"]
    assert [c.key for c in table.columns][-2:] == ["ckpt_last", "ckpt_selected"]


def test_tde_and_lade_reference_epochs_are_int_n_over_batch_steps(sgd):
    # run_networks.py of the TDE and LADE code: `if step == self.epoch_steps: break`, epoch_steps = int(N / batch)
    for method in ("tde", "lade"):
        cfg = LongtailConfig.from_dict({"data": "cifar100:/x", "method": method, "imbalance": 100})
        assert cfg.drop_last is True
        sgd.steps = 0
        fit_predict(method, TRAIN, IMAGES[:6], model="cnn28", epochs=2, batch_size=16, seed=0,
                    drop_last=cfg.drop_last)
        assert sgd.steps == 2 * (70 // 16)


def _std_over_fan_in(conv: torch.nn.Conv2d) -> float:
    """The weights' std over the fan-in Kaiming std √(2 / fan_in) (1 under the references' init)."""
    w = conv.weight.detach()
    return float(w.std()) / math.sqrt(2 / w[0].numel())


def test_cosine_heads_start_at_unit_norm_under_fan_in_and_at_kaiming_uniform_otherwise():
    # issue item 14: LDAM-DRW models/resnet_cifar.py:42 (uniform(-1, 1).renorm(2, 1, 1e-5).mul(1e5))
    ref = fit_predict("ldam_drw", TRAIN, IMAGES[:6], epochs=1, batch_size=16, seed=0, lr=1e-12, init="fan_in")
    own = fit_predict("ldam_drw", TRAIN, IMAGES[:6], epochs=1, batch_size=16, seed=0, lr=1e-12)
    norms = ref.model.classifier.weight.detach().norm(dim=1)
    np.testing.assert_allclose(norms.numpy(), 1.0, rtol=1e-5)
    fan = own.model.classifier.weight.shape[1]
    # kaiming_uniform(a=√5): U(±1/√fan): the squared norm's mean is fan · 1/(3 fan) = 1/3
    assert float(own.model.classifier.weight.detach().norm(dim=1).pow(2).mean()) == pytest.approx(1 / 3, rel=0.2)
    assert fan == own.model.feature_dim


def test_ride_expert_stages_and_heads_follow_the_runs_init():
    # issue item 15: RIDE ride_resnet_cifar.py:142 applies _weights_init after building the experts
    kw = dict(epochs=1, batch_size=16, seed=0, lr=1e-12, model="resnet32",
              options={"num_experts": 2, "reweight_epoch": 1})
    ref = fit_predict("ride", TRAIN, IMAGES[:6], init="fan_in", **kw)
    own = fit_predict("ride", TRAIN, IMAGES[:6], **kw)
    for net, expected in ((ref.model, 1.0), (own.model, None)):
        for block in net.blocks:
            first_24, first_48 = block[0].conv1, block[len(block) // 2].conv1  # 16→24 and 24→48 convolutions
            for conv in (first_24, first_48):
                cout, cin = conv.weight.shape[:2]
                want = 1.0 if expected else math.sqrt(cin / cout)  # fan-out: √(2 / (cout·9))
                assert _std_over_fan_in(conv) == pytest.approx(want, rel=0.08)
    np.testing.assert_allclose(ref.model.heads[0].weight.detach().norm(dim=1).numpy(), 1.0, rtol=1e-5)


def test_bbn_branch_blocks_follow_the_runs_init():
    # issue item 15: BBN lib/backbone/resnet_cifar.py:163–166 (its branches inside the init's scope)
    kw = dict(epochs=1, batch_size=16, seed=0, lr=1e-12, model="cnn28")
    ref = fit_predict("bbn", TRAIN, IMAGES[:6], init="fan_in", **kw)
    own = fit_predict("bbn", TRAIN, IMAGES[:6], **kw)
    w_ref, w_own = ref.model.conventional.fc.weight.detach(), own.model.conventional.fc.weight.detach()
    d = w_ref.shape[1]
    assert float(w_ref.std()) == pytest.approx(math.sqrt(2 / d), rel=0.05)
    assert float(w_own.std()) == pytest.approx(math.sqrt(1 / (3 * d)), rel=0.05)


def test_crt_best_val_restores_the_second_stages_best_classifier():
    # issue item 16: classifier-balancing run_networks.py:357–363, 376 (reset_model(best_model_weights))
    test_x, test_y = IMAGES[::3], LABELS[::3]
    res = fit_predict("crt", TRAIN, test_x, epochs=3, batch_size=16, seed=0, lr=0.2, select_checkpoint="best_test",
                      selection=(test_x, test_y), options={"crt_epochs": 4, "crt_lr": 0.5})
    stages = res.settings["checkpoint"]["stages"]
    assert len(stages) == 2 and stages[1]["epochs"] == 4
    hist = [h["val_acc"] for h in res.train_results[1].history]
    assert stages[1]["selected_acc"] == max(hist) and stages[1]["epoch"] == 1 + hist.index(max(hist))
    assert float(np.mean(res.logits.argmax(1) == test_y)) == pytest.approx(stages[1]["selected_acc"])
