"""Every protocol's learners train data-parallel: each TrainConfig they build gets devices=2, and the
fits must go through the data-parallel path and finish."""

import math

import numpy as np
import pytest

from vistabench.learners import distributed
from vistabench.learners.trainer import TrainConfig


@pytest.fixture
def two_devices(monkeypatch):
    """Every TrainConfig made (directly, or copied: a derived batch may be odd) trains on
    2 CPU processes; returns the list of data-parallel fits run."""
    post, run, fits = TrainConfig.__post_init__, distributed.run_data_parallel, []

    def post_init(self):
        self.recipe = self.recipe.replace(devices=2)
        post(self)

    def counted(trainer, fn):
        fits.append(trainer.cfg.devices)
        return run(trainer, fn)

    monkeypatch.setattr(TrainConfig, "__post_init__", post_init)
    monkeypatch.setattr(distributed, "run_data_parallel", counted)
    import vistabench.learners.trainer as trainer_module
    monkeypatch.setattr(trainer_module, "run_data_parallel", counted)
    return fits


@pytest.mark.parametrize("method", ["ce", "bbn", "crt", "ride"])  # default loss, second sampler + step,
def test_longtail_methods(method, two_devices):                    # two stages, experts
    from vistabench.data import Dataset
    from vistabench.learners.longtail import fit_predict

    rng = np.random.default_rng(0)
    labels = np.r_[np.zeros(30, int), np.ones(12, int), np.full(6, 2)]
    images = rng.integers(0, 256, (48, 8, 8, 1), dtype=np.uint8)
    run = fit_predict(method, Dataset(images, labels, ["a", "b", "c"], name="toy"), images[:8], epochs=1,
                      batch_size=16, seed=0)
    assert np.isfinite(run.logits).all() and len(two_devices) == len(run.train_results) >= 1
    assert all(r.config["devices"] == 2 for r in run.train_results)


@pytest.mark.parametrize("name", ["ce", "auxilearn", "dvp", "ole"])  # plain, auxiliary set, distillation, OLE
def test_smalldata_methods(name, two_devices):
    from vistabench.learners.smalldata.build import build_method
    from vistabench.learners.recipe import Recipe
    from vistabench.learners.trainer import Trainer

    config = {"xent_weight": 0.1, "ole_weight": 0.25, "distill_weight": 1e-4, "aux_scale": 0.25, "auxgrad_every": 2,
              "num_aux_classes": 2, "aux_set_size": 0.1}
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 256, (40, 12, 12, 1), dtype=np.uint8), np.arange(40) % 4
    model, loss = build_method(name, Recipe(model="cnn28"), config, num_classes=4, in_channels=1, image_size=12, seed=0)
    tr = Trainer(model, TrainConfig(epochs=2, lr=0.01, batch_size=10, count_flops=False), loss_fn=loss)
    res = tr.fit(x, y)
    assert all(math.isfinite(h["loss"]) for h in res.history) and tr.predict_logits(x).shape == (40, 4)
    assert 2 in two_devices


@pytest.mark.parametrize("method", ["finetune", "fr"])
def test_incremental_sessions(method, two_devices, tmp_path):
    from vistabench.data import DataSplits, load_dataset
    from vistabench.protocols.incremental import runner as P
    from vistabench.protocols.incremental.config import IncrementalConfig

    d = load_dataset("digits")
    sub = [ds.subset(np.sort(np.concatenate([np.flatnonzero(ds.labels == c)[:k] for c in range(10)])))
           for ds, k in ((d.train, 20), (d.test, 6))]
    data = DataSplits(*sub)
    s = P.build_sessions(data.train.labels, data.test.labels, base_classes=6, way=2, shot=4, seed=0)
    cfg = IncrementalConfig.from_dict({"data": "digits", "base_classes": 6, "way": 2, "shot": 4, "method": method,
                                       "epochs": 1, "novel_epochs": 1, "batch_size": 32})
    rec = P.run_sessions(cfg, data, s, work_dir=tmp_path / "pred")
    assert 0 <= rec.metrics["gacc"] <= 1 and 2 in two_devices


@pytest.mark.parametrize("name", ["indep", "bhpo"])  # the shared trainer; the search trainer's trials
def test_stream_learners(name, two_devices, tmp_path):
    from vistabench.learners.stream import make_learner
    from vistabench.protocols.stream.runner import run_stream
    from vistabench.store import ResultsStore
    from vistabench.streams import parse_stream

    from ..protocols.test_stream_runner import OPTS, TINY

    stream = parse_stream({**TINY, "tasks": TINY["tasks"][:2]})
    opts = dict(OPTS, trials=2, steps=2, seed=0) if name == "bhpo" else dict(OPTS)
    with ResultsStore(tmp_path / "r.sqlite") as store:
        res = run_stream(stream, make_learner(name, **opts), store=store, run_id=name, work_dir=tmp_path)
    assert all(0 <= e["error"] <= 1 for e in res.events) and 2 in two_devices
