import numpy as np
import pytest

from vistabench.data import Dataset
from vistabench.errors import InputError
from vistabench.learners.longtail import fit_predict, lt_methods

RNG = np.random.default_rng(0)
LABELS = np.r_[np.zeros(40, int), np.ones(15, int), np.full(5, 2)]
# class-dependent brightness so there is something to learn
IMAGES = np.clip(RNG.normal(60 + 60 * LABELS[:, None, None, None], 30, (60, 8, 8, 1)), 0, 255).astype(np.uint8)
TRAIN = Dataset(IMAGES, LABELS, ["head", "mid", "tail"], name="toy-lt")
TEST = IMAGES[::4]


@pytest.mark.parametrize("method", lt_methods.names())
def test_each_method_runs_one_epoch(method):
    run = fit_predict(method, TRAIN, TEST, epochs=1, batch_size=16, seed=0)
    assert run.method == method
    assert run.logits.shape == (len(TEST), 3) and run.logits.dtype == np.float32
    assert np.all(np.isfinite(run.logits))
    assert run.flops == sum(r.flops for r in run.train_results) > 0
    assert run.settings["method"] == method and run.settings["train_counts"] == [40, 15, 5]
    assert run.seconds > 0
    from vistabench.jsonutil import dumps
    dumps(run.to_dict())  # JSON-serialisable


@pytest.mark.parametrize("method", lt_methods.names())
def test_each_method_is_deterministic_given_its_seed(method):
    # whatever the global RNG holds before (it differs between processes), the seed decides
    import torch

    torch.manual_seed(123)
    a = fit_predict(method, TRAIN, TEST, epochs=2, batch_size=16, seed=5)
    torch.manual_seed(456)
    b = fit_predict(method, TRAIN, TEST, epochs=2, batch_size=16, seed=5)
    np.testing.assert_array_equal(a.logits, b.logits)


def test_logit_adjust_is_ce_minus_tau_log_prior():
    ce = fit_predict("ce", TRAIN, TEST, epochs=1, batch_size=16, seed=3)
    la = fit_predict("logit_adjust", TRAIN, TEST, epochs=1, batch_size=16, seed=3, options={"tau": 0.5})
    prior = np.array([40, 15, 5]) / 60
    np.testing.assert_allclose(la.logits, ce.logits - 0.5 * np.log(prior), rtol=1e-5, atol=1e-5)
    assert la.settings["options"] == {"tau": 0.5}


def test_crt_second_stage_is_classifier_only_with_balanced_sampling():
    run = fit_predict("crt", TRAIN, TEST, epochs=2, batch_size=16, seed=0)
    first, second = run.train_results
    assert first.config["trainable"] == "all" and first.config["sampler"] == "uniform"
    assert second.config["trainable"] == "classifier" and second.config["sampler"] == "class_balanced"
    assert run.settings["options"]["crt_epochs"] == 1
    assert second.flops < first.flops  # frozen features: no backward through the backbone


def test_ldam_uses_cosine_head_and_defers_reweighting():
    run = fit_predict("ldam_drw", TRAIN, TEST, epochs=5, batch_size=16, seed=0)
    assert run.settings["options"]["drw_epoch"] == 4
    assert np.abs(run.logits).max() <= 30.0 + 1e-4  # scale x cosine


def test_bad_options_and_counts():
    with pytest.raises(InputError, match="method_options.gama: unknown option; did you mean gamma"):
        fit_predict("focal", TRAIN, TEST, epochs=1, batch_size=16, options={"gama": 1})
    with pytest.raises(InputError, match="did you mean 'focal'"):
        fit_predict("focall", TRAIN, TEST, epochs=1, batch_size=16)
    empty_class = Dataset(IMAGES, LABELS, ["head", "mid", "tail", "absent"])
    with pytest.raises(InputError, match="classes \\[3\\] have none"):
        fit_predict("ce", empty_class, TEST, epochs=1, batch_size=16)
    with pytest.raises(InputError, match="test_images"):
        fit_predict("ce", TRAIN, np.zeros((3, 8, 8, 3), np.uint8), epochs=1, batch_size=16)
    with pytest.raises(InputError, match="batch_size"):
        fit_predict("ce", TRAIN, TEST, epochs=1, batch_size=100)
