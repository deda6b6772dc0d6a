"""FSCIL sessions (presets, builder, index lists), scoring predictions files, reference learners."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vistabench.data import DataSplits, Dataset, load_dataset, save_predictions
from vistabench.data.predictions import Predictions
from vistabench.errors import InputError
from vistabench.protocols.incremental import runner as P
from vistabench.store import ResultsStore


def labels(num_classes: int, per_class: int) -> np.ndarray:
    return np.repeat(np.arange(num_classes), per_class)


# --------------------------------------------------------------------------------- presets
@pytest.mark.parametrize("preset,sizes,total_train", [
    ("cifar100", [60] + [5] * 8, 60 * 500 + 40 * 5),
    ("mini_imagenet", [60] + [5] * 8, 60 * 500 + 40 * 5),
    ("cub200", [100] + [10] * 10, 100 * 30 + 100 * 5),
])
def test_presets(preset: str, sizes: list[int], total_train: int) -> None:
    st = P.preset_settings(preset)
    per = 500 if st["num_classes"] == 100 else 30
    tr, te = labels(st["num_classes"], per), labels(st["num_classes"], 20)
    s = P.build_sessions(tr, te, base_classes=st["base_classes"], way=st["way"], shot=st["shot"],
                         num_sessions=st["num_sessions"], seed=1, preset=preset)
    assert [len(c) for c in s["classes"]] == sizes
    assert s["classes"][0] == list(range(sizes[0]))  # label order, base = 0..B-1
    assert s["classes"][1] == list(range(sizes[0], sizes[0] + sizes[1]))
    assert sum(len(t) for t in s["train_indices"]) == total_train
    for i in range(1, len(sizes)):  # K shots per novel class
        counts = np.bincount(tr[s["train_indices"][i]])
        assert set(counts[counts > 0]) == {st["shot"]}
        assert set(tr[s["train_indices"][i]]) == set(s["classes"][i])
    assert len(s["test_indices"]) == st["num_classes"] * 20
    pool, lab = P.session_test_pool(s, 2)
    assert len(pool) == (sizes[0] + sizes[1]) * 20 and set(lab) == set(range(sizes[0] + sizes[1]))


def test_unknown_preset_suggests() -> None:
    with pytest.raises(InputError, match="did you mean 'cifar100'"):
        P.preset_settings("cifar10O")


def test_builder_is_seeded_and_byte_identical(tmp_path) -> None:
    tr, te = labels(10, 40), labels(10, 5)
    a = P.write_sessions(tmp_path / "a.json", P.build_sessions(tr, te, base_classes=4, way=2, shot=3, seed=7))
    b = P.write_sessions(tmp_path / "b.json", P.build_sessions(tr, te, base_classes=4, way=2, shot=3, seed=7))
    c = P.build_sessions(tr, te, base_classes=4, way=2, shot=3, seed=8)
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert a["sha256"] == b["sha256"]
    assert c["train_indices"][1] != a["train_indices"][1]
    assert a["num_sessions"] == 4  # (10 - 4) / 2 + 1
    assert P.load_sessions(tmp_path / "a.json") == a


def test_tampered_sessions_file_is_rejected(tmp_path) -> None:
    path = tmp_path / "s.json"
    P.write_sessions(path, P.build_sessions(labels(6, 10), labels(6, 2), base_classes=4, way=1, shot=2, seed=0))
    content = json.loads(path.read_text())
    content["classes"][1] = [5]
    path.write_text(json.dumps(content))
    with pytest.raises(InputError, match="sha256 mismatch"):
        P.load_sessions(path)


@pytest.mark.parametrize("kwargs,match", [
    (dict(base_classes=4, way=2, shot=50), "50 shots requested but class 4 .* has only 40"),
    (dict(base_classes=4, way=4, shot=2), "do not split into sessions of way=4"),
    (dict(base_classes=4, way=2, shot=2, num_sessions=5), "need 4 \\+ 4x2 = 12 classes"),
    (dict(base_classes=12, way=2, shot=2), "only 10 classes"),
    (dict(base_classes=4, way=2, shot=0), "shot: expected an integer >= 1"),
    (dict(base_classes=4, way=2, shot=2, base_shot=41), "base_shot: 41 shots requested"),
    (dict(base_classes=4, way=2, shot=2, test_per_class=6), "test_per_class: 6 requested"),
])
def test_builder_errors(kwargs, match) -> None:
    with pytest.raises(InputError, match=match):
        P.build_sessions(labels(10, 40), labels(10, 5), seed=0, **kwargs)


def test_test_per_class_subsamples() -> None:
    s = P.build_sessions(labels(6, 10), labels(6, 8), base_classes=4, way=1, shot=2, seed=0, test_per_class=3)
    assert np.array_equal(np.bincount(s["test_labels"]), [3] * 6)


def test_hand_written_sessions_overlap_is_an_error(tmp_path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"kind": "incremental-sessions", "classes": [[0, 1, 2], [2, 3]]}))
    with pytest.raises(InputError, match="class 2 is in session 1 and session 2"):
        P.load_sessions(path)


# ------------------------------------------------------------------------------ index lists
def test_index_lists_integer(tmp_path) -> None:
    tr = labels(5, 10)  # positions 0..49, class = pos // 10
    (tmp_path / "session_1.txt").write_text("\n".join(map(str, range(0, 30))) + "\n")
    (tmp_path / "session_2.txt").write_text("31\n35\n42\n44\n")
    (tmp_path / "session_3.txt").write_text("40\n49\n")  # class 4 again -> overlap
    with pytest.raises(InputError, match="class 4 appears in session_2.txt and session_3.txt"):
        P.sessions_from_index_lists(tmp_path, train_labels=tr, test_labels=labels(5, 2))
    (tmp_path / "session_3.txt").unlink()
    s = P.sessions_from_index_lists(tmp_path, train_labels=tr, test_labels=labels(5, 2))
    assert s["classes"] == [[0, 1, 2], [3, 4]]
    assert s["train_indices"][1] == [31, 35, 42, 44]
    assert (s["base_classes"], s["way"], s["shot"]) == (3, 2, 2)
    (tmp_path / "session_4.txt").write_text("1\n")
    with pytest.raises(InputError, match="missing session_3.txt"):
        P.read_index_lists(tmp_path)


def test_index_lists_paths(tmp_path) -> None:
    from PIL import Image

    from vistabench.data import read_image_folder

    root = tmp_path / "imgs"
    for c in ("001.Albatross", "002.Auklet", "003.Blackbird"):
        (root / c).mkdir(parents=True)
        for k in range(3):
            Image.fromarray(np.full((4, 4), k * 40 + 10, dtype=np.uint8)).save(root / c / f"{c[4:]}_{k}.png")
    ds = read_image_folder(root)
    paths = P.image_folder_paths(root)
    assert len(paths) == len(ds) and paths[3] == "002.Auklet/Auklet_0.png"
    lists = tmp_path / "lists"
    lists.mkdir()
    (lists / "session_1.txt").write_text("CUB_200_2011/images/001.Albatross/Albatross_0.png\n"
                                         "CUB_200_2011/images/002.Auklet/Auklet_2.png\n")
    (lists / "session_2.txt").write_text("CUB_200_2011/images/003.Blackbird/Blackbird_1.png\n")
    s = P.sessions_from_index_lists(lists, train_labels=ds.labels, test_labels=ds.labels, train_paths=paths)
    assert s["classes"] == [[0, 1], [2]]
    assert s["train_indices"] == [[0, 5], [7]]
    with pytest.raises(InputError, match="pass train_paths"):
        P.sessions_from_index_lists(lists, train_labels=ds.labels, test_labels=ds.labels)
    (lists / "session_2.txt").write_text("x/003.Blackbird/Missing.png\n")
    with pytest.raises(InputError, match="not among the training images"):
        P.sessions_from_index_lists(lists, train_labels=ds.labels, test_labels=ds.labels, train_paths=paths)


# ------------------------------------------------------------------------ scoring predictions
def _toy_sessions() -> dict:
    return P.build_sessions(labels(5, 6), labels(5, 4), base_classes=3, way=1, shot=2, seed=0)


def test_score_prediction_files_masks_unseen_columns(tmp_path) -> None:
    s = _toy_sessions()
    rng = np.random.default_rng(0)
    paths, brute = [], []
    for i in range(1, 4):
        _, lab = P.session_test_pool(s, i)
        logits = rng.normal(size=(len(lab), 5))
        logits[:, 4] += 100.0 * (i < 3)  # an unseen class column that must be ignored before session 3
        seen = np.arange(2 + i)
        pred = seen[np.argmax(logits[:, seen], axis=1)]
        brute.append(np.mean(pred == lab))
        paths.append(tmp_path / f"s{i}.npz")
        save_predictions(paths[-1], labels=lab, logits=logits)
    res = P.score_prediction_files(paths, s)
    assert [x["aacc"] for x in res.sessions] == pytest.approx(brute)
    assert res.settings["weights"] == "samples"


def test_score_predictions_checks_the_pool() -> None:
    s = _toy_sessions()
    preds = []
    for i in range(1, 4):
        _, lab = P.session_test_pool(s, i)
        preds.append(Predictions(labels=lab, kind="pred", values=lab))
    assert P.score_predictions(preds, s).aacc == 1.0
    with pytest.raises(InputError, match="3 sessions, got 2"):
        P.score_predictions(preds[:2], s)
    short = Predictions(labels=preds[1].labels[:-1], kind="pred", values=preds[1].values[:-1])
    with pytest.raises(InputError, match="expected 16"):
        P.score_predictions([preds[0], short, preds[2]], s)
    perm = Predictions(labels=preds[1].labels[::-1], kind="pred", values=preds[1].values[::-1])
    with pytest.raises(InputError, match="keep the pool's order"):
        P.score_predictions([preds[0], perm, preds[2]], s)
    few_cols = Predictions(labels=preds[2].labels, kind="logits", values=np.zeros((len(preds[2].labels), 3)))
    with pytest.raises(InputError, match="no column for seen classes \\[3, 4\\]"):
        P.score_predictions([preds[0], preds[1], few_cols], s)


def test_predicted_over_seen_ties_and_class_columns() -> None:
    p = Predictions(labels=[0, 1], kind="logits", values=np.array([[1.0, 1.0, 5.0], [0.0, 2.0, 2.0]]),
                    classes=np.array([7, 3, 9]))
    assert P.predicted_over_seen(p, [7, 3]).tolist() == [7, 3]  # 9 unseen; tie -> first column
    assert P.predicted_over_seen(p, [7, 3, 9]).tolist() == [9, 3]


# --------------------------------------------------------------------------- reference learners
@pytest.fixture(scope="module")
def digits_small():
    d = load_dataset("digits")

    def sub(ds: Dataset, k: int) -> Dataset:
        idx = np.concatenate([np.flatnonzero(ds.labels == c)[:k] for c in range(10)])
        return ds.subset(np.sort(idx))

    return DataSplits(sub(d.train, 40), sub(d.test, 12))


def test_learner_registry_names() -> None:
    from vistabench.learners.incremental import incremental_methods

    assert incremental_methods.names() == ["finetune", "fr", "prototype"]
    with pytest.raises(InputError, match="did you mean 'prototype'"):
        incremental_methods.get("prototypes")


def _config(method: str, **fields):
    from vistabench.protocols.incremental.config import IncrementalConfig

    return IncrementalConfig.from_dict({"data": "digits", "base_classes": 6, "way": 2, "shot": 3, "method": method,
                                        "epochs": 2, "novel_epochs": 2, "batch_size": 32, **fields})


@pytest.mark.parametrize("method", ["prototype", "finetune"])
def test_run_sessions_writes_predictions_and_record(method, digits_small, tmp_path) -> None:
    s = P.build_sessions(digits_small.train.labels, digits_small.test.labels, base_classes=6, way=2, shot=3, seed=0)
    rec = P.run_sessions(_config(method), digits_small, s, work_dir=tmp_path / "pred")
    paths = sorted((tmp_path / "pred").glob("session_*.npz"))
    assert len(paths) == 3
    again = P.score_prediction_files(paths, s)  # the files written as a by-product reproduce the record
    assert rec.metrics["gacc"] == pytest.approx(again.gacc) and rec.metrics["aacc"] == pytest.approx(again.aacc)
    assert rec.method == method and rec.settings["num_sessions"] == 3 and rec.settings["session_sizes"] == [6, 2, 2]
    assert rec.split_hash is None and rec.id is None  # unsealed sessions dict, not stored
    assert rec.settings["model"] == "cnn28" and rec.settings["weight_decay"] == 5e-4
    base = [x["base_acc"] for x in rec.metrics["sessions"]]
    if method == "prototype":
        # a frozen backbone keeps base prototypes: new prototypes can only take base samples away
        assert all(b2 <= b1 + 1e-12 for b1, b2 in zip(base, base[1:]))


def test_run_from_config_stores_and_writes(tmp_path) -> None:
    cfg = _config("prototype", base_classes=8, way=1, shot=3, base_shot=20, epochs=1, test_per_class=10)
    with ResultsStore(tmp_path / "r.sqlite") as store:
        (rec,) = P.run(cfg, store=store, work_dir=tmp_path / "w")
        (stored,) = store.records(protocol="incremental")
    assert rec.id == stored.id == 1 and stored.metrics["gacc"] == pytest.approx(rec.metrics["gacc"])
    assert (tmp_path / "w" / "sessions.json").is_file() and len(list((tmp_path / "w").glob("session_*.npz"))) == 3
    assert rec.settings["test_per_class"] == 10 and rec.dataset == "digits"
    (no_files,) = P.run(cfg)  # no store, no work folder: the same record, nothing written
    assert no_files.id is None and no_files.metrics["gacc"] == pytest.approx(rec.metrics["gacc"])
    assert no_files.settings == rec.settings  # "seconds" is a metric, not a setting


def test_run_sessions_shares_the_base_session(digits_small) -> None:
    s = P.build_sessions(digits_small.train.labels, digits_small.test.labels, base_classes=8, way=1, shot=2, seed=0)
    cache: dict = {}
    P.run_sessions(_config("prototype", epochs=1), digits_small, s, base_cache=cache)
    b = P.run_sessions(_config("finetune", epochs=1, novel_epochs=1), digits_small, s, base_cache=cache)
    c = P.run_sessions(_config("finetune", epochs=1, novel_epochs=1), digits_small, s)
    assert len(cache) == 1
    assert b.metrics["matrix"] == c.metrics["matrix"]  # a cached base session gives the same model as retraining it


def test_run_errors(digits_small) -> None:
    s = {"kind": "incremental-sessions", "classes": [[0, 1], [2]]}
    with pytest.raises(InputError, match="needs train_indices"):
        P.run_sessions(_config("prototype"), digits_small, s)
    with pytest.raises(InputError, match="method: unknown incremental method 'icarl'"):
        _config("icarl")
    with pytest.raises(InputError, match="config: expected an IncrementalConfig"):
        P.run({"data": "digits"})
    with pytest.raises(InputError, match="test part"):
        P.sessions_for_data(DataSplits(digits_small.train, None), data_name="x", base_classes=2, way=1, shot=1)


def test_score_takes_objects_or_files(digits_small, tmp_path) -> None:
    s = P.build_sessions(digits_small.train.labels, digits_small.test.labels, base_classes=8, way=1, shot=2, seed=0)
    rng = np.random.default_rng(0)
    objs, files = [], []
    for i in (1, 2, 3):
        _, lab = P.session_test_pool(s, i)
        logits = rng.normal(size=(len(lab), 10))
        objs.append(Predictions(labels=lab, kind="logits", values=logits))
        files.append(tmp_path / f"s{i}.npz")
        save_predictions(files[-1], labels=lab, logits=logits)
    assert P.score(objs, s)["gacc"] == pytest.approx(P.score(files, s)["gacc"])
    with pytest.raises(InputError, match="predictions: the sessions file has 3 sessions, got 2"):
        P.score(objs[:2], s)


def test_finetune_keeps_base_normalisation_and_grows_head(digits_small) -> None:
    from vistabench.learners.incremental import IncrementalContext
    from vistabench.learners.incremental.baselines import FinetuneLearner

    tr = digits_small.train
    learner = FinetuneLearner(IncrementalContext(model="cnn28", epochs=1, novel_epochs=1, batch_size=32, in_channels=1,
                                                 image_size=8))
    base = np.flatnonzero(tr.labels < 8)
    learner.learn(tr.images[base], tr.labels[base], list(range(8)), session=1)
    norm = learner.trainer.normaliser.to_dict()
    shots = np.flatnonzero(tr.labels == 8)[:3]
    learner.learn(tr.images[shots], tr.labels[shots], [8], session=2)
    assert learner.trainer.normaliser.to_dict() == norm  # not re-fit on three images
    assert learner.train_results[-1].normaliser == norm
    scores, classes = learner.scores(digits_small.test.images[:5])
    assert scores.shape == (5, 9) and classes.tolist() == list(range(9))
    with pytest.raises(InputError, match="already learned"):
        learner.learn(tr.images[shots], tr.labels[shots], [8], session=3)
    with pytest.raises(InputError, match="no training images for classes \\[9\\]"):
        learner.learn(tr.images[shots], tr.labels[shots], [9], session=3)
    mixed = np.concatenate([shots, np.flatnonzero(tr.labels == 9)[:2]])
    with pytest.raises(InputError, match="training labels \\[8\\] are not among the session's classes"):
        learner.learn(tr.images[mixed], tr.labels[mixed], [9], session=3)


def test_score_from_a_matrix_or_predictions_refuses_mixed_inputs(tmp_path) -> None:
    m = {"matrix": [[0.9], [0.8, 0.5]]}
    scores, sessions = P.score_from(matrix=m, base_classes=6, way=2)
    assert scores.settings["session_sizes"] == [6, 2] and sessions["classes"] == [list(range(6)), [6, 7]]
    (tmp_path / "m.json").write_text(json.dumps(m))
    assert P.score_from(matrix=tmp_path / "m.json", base_classes=6, way=2)[0].gacc == scores.gacc
    for kwargs, message in [
        ({}, "matrix: give either `matrix`"),
        ({"matrix": m, "predictions": ["p.npz"]}, "matrix: give either `matrix`"),
        ({"matrix": m, "sessions": "s.json", "base_classes": 6, "way": 2}, "sessions: goes with `predictions`"),
        ({"matrix": m}, "base_classes: a `matrix` needs `base_classes` and `way`"),
        ({"predictions": ["p.npz"]}, "predictions: needs `sessions`"),
        ({"predictions": ["p.npz"], "sessions": "s.json", "way": 2}, "way: goes with `matrix`"),
        ({"matrix": tmp_path / "nope.json", "base_classes": 6, "way": 2}, "matrix '.*nope.json': no such file"),
    ]:
        with pytest.raises(InputError, match=f"^{message}"):
            P.score_from(**kwargs)
