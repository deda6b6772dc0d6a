"""``eval_transform`` (issue 39 item 17): the images the prototype and finetune learners score and
build prototypes from, read where the learner hands them to the network; the config's key, its
refusal with ``fr``, and the protocol passing it through."""

import numpy as np
import pytest

from vistabench.errors import InputError
from vistabench.learners.incremental import IncrementalContext
from vistabench.learners.incremental.baselines import FinetuneLearner, PrototypeLearner
from vistabench.learners.tensors import resize_center_crop
from vistabench.protocols.incremental.config import IncrementalConfig

RNG = np.random.default_rng(0)
IMAGES = RNG.integers(0, 256, (24, 12, 12, 3), dtype=np.uint8)
LABELS = np.repeat(np.arange(3), 8)


def _spy(learner, seen):
    features, logits = learner.trainer.features, learner.trainer.predict_logits

    def feats(x):
        seen.append(x)
        return features(x)

    def pred(x):
        seen.append(x)
        return logits(x)
    learner.trainer.features, learner.trainer.predict_logits = feats, pred


@pytest.mark.parametrize("transform", ["none", "resize_crop"])
def test_prototype_learner_scores_and_prototypes_see_the_view(transform):
    ctx = IncrementalContext(model="cnn28", in_channels=3, image_size=12, epochs=1, batch_size=24,
                             eval_transform=transform)
    learner = PrototypeLearner(ctx)
    learner.learn(IMAGES[:16], LABELS[:16], [0, 1], session=1)
    seen: list = []
    _spy(learner, seen)
    learner.learn(IMAGES[16:], LABELS[16:], [2], session=2)
    learner.scores(IMAGES)
    want = [IMAGES[16:], IMAGES] if transform == "none" else [resize_center_crop(IMAGES[16:]),
                                                               resize_center_crop(IMAGES)]
    assert len(seen) == 2
    for got, expected in zip(seen, want):
        np.testing.assert_array_equal(got, expected)
    if transform == "resize_crop":
        assert not np.array_equal(seen[1], IMAGES)


def test_finetune_learner_scores_the_view():
    ctx = IncrementalContext(model="cnn28", in_channels=3, image_size=12, epochs=1, batch_size=24,
                             eval_transform="resize_crop")
    learner = FinetuneLearner(ctx)
    learner.learn(IMAGES[:16], LABELS[:16], [0, 1], session=1)
    seen: list = []
    _spy(learner, seen)
    learner.scores(IMAGES)
    np.testing.assert_array_equal(seen[0], resize_center_crop(IMAGES))


def test_resize_center_crop_geometry():
    # a linear ramp resized by 1.15 and centre-cropped keeps its side and stays a ramp around the centre
    ramp = np.tile(np.arange(32, dtype=np.float32)[None, :, None, None], (1, 1, 1, 1)).repeat(32, 0)
    x = np.transpose(ramp, (3, 0, 1, 2))  # (1, 32, 32, 1)
    y = resize_center_crop(x)
    assert y.shape == x.shape and y.dtype == x.dtype
    big = int(32 * 1.15)  # 36 px, crop offset 2: output column j samples input (j + 2 + 0.5) / 36·32 − 0.5
    j = np.arange(4, 28)
    np.testing.assert_allclose(y[0, 10, j, 0], (j + 2 + 0.5) * 32 / big - 0.5, atol=1e-4)
    with pytest.raises(InputError, match="^images:"):
        resize_center_crop(np.zeros((1, 4, 5, 1), np.uint8))


def test_config_default_key_and_refusal_with_fr():
    base = {"data": "digits", "base_classes": 4, "way": 2, "shot": 5, "method": "prototype"}
    assert "eval_transform" not in IncrementalConfig.from_dict(base).key_dict()
    assert IncrementalConfig.from_dict({**base, "eval_transform": "resize_crop"}).key_dict()["eval_transform"] == \
        "resize_crop"
    with pytest.raises(InputError, match="^eval_transform:"):
        IncrementalConfig.from_dict({**base, "method": "fr", "eval_transform": "resize_crop"})


def test_protocol_passes_it_to_the_learner(monkeypatch):
    from vistabench.data import load_dataset
    from vistabench.protocols.incremental import runner as proto

    seen = {}
    original = PrototypeLearner.__init__

    def init(self, ctx):
        seen["eval_transform"] = ctx.eval_transform
        original(self, ctx)
    monkeypatch.setattr(PrototypeLearner, "__init__", init)
    cfg = IncrementalConfig.from_dict({"data": "digits", "base_classes": 4, "way": 2, "shot": 2, "epochs": 1,
                                       "num_sessions": 2, "method": "prototype", "eval_transform": "resize_crop"})
    data = load_dataset("digits")
    sessions = proto.sessions_for_data(data, data_name="digits", seed=0, **cfg.layout())
    proto.run_sessions(cfg, data, sessions)
    assert seen["eval_transform"] == "resize_crop"
