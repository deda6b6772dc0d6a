"""Split files: stratified, disjoint, byte-identical for a seed, verified on read."""

import json

import numpy as np
import pytest

from vistabench.cli import main
from vistabench.data import Dataset
from vistabench.data.smalldata_splits import build_splits, read_splits, write_splits
from vistabench.errors import InputError


def pool(counts, seed=0):
    y = np.concatenate([np.full(n, c) for c, n in enumerate(counts)])
    np.random.default_rng(seed).shuffle(y)
    return Dataset(np.zeros((len(y), 2, 2, 1), np.uint8), y, [f"c{i}" for i in range(len(counts))], "toy")


def test_stratified_disjoint_and_sizes(tmp_path):
    ds = pool([70, 60, 90, 55])
    write_splits(ds, tmp_path, dataset_name="toy", per_class=50, seed=3)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(f"{k}{i}.json" for k in ("train", "val", "trainval") for i in range(3))
    for sp in read_splits(tmp_path, ds, dataset_name="toy"):
        tr, va, tv = sp.train, sp.val, sp.trainval
        assert len(np.intersect1d(tr, va)) == 0
        np.testing.assert_array_equal(np.sort(np.concatenate([tr, va])), tv)
        assert np.all(np.bincount(ds.labels[tv], minlength=4) == 50)
        assert np.all(np.bincount(ds.labels[tr], minlength=4) == 30)  # 60% of 50
        assert np.all(np.bincount(ds.labels[va], minlength=4) == 20)
        assert sp.test is None
    c = json.loads((tmp_path / "train0.json").read_text())
    assert c["class_counts"] == [30, 30, 30, 30] and c["indices"] == sorted(c["indices"])


def test_byte_identical_for_a_seed_and_different_otherwise(tmp_path):
    ds = pool([40, 40, 40])
    write_splits(ds, tmp_path / "a", dataset_name="toy", per_class=20, seed=7)
    write_splits(ds, tmp_path / "b", dataset_name="toy", per_class=20, seed=7)
    write_splits(ds, tmp_path / "c", dataset_name="toy", per_class=20, seed=8)
    for f in (tmp_path / "a").iterdir():
        assert f.read_bytes() == (tmp_path / "b" / f.name).read_bytes()
    assert (tmp_path / "a" / "trainval0.json").read_bytes() != (tmp_path / "c" / "trainval0.json").read_bytes()
    # the three sub-samples are independent draws
    a = [json.loads((tmp_path / "a" / f"trainval{i}.json").read_text())["indices"] for i in range(3)]
    assert a[0] != a[1] != a[2]


def test_all_images_mode_keeps_trainval_and_varies_train_val():
    ds = pool([31, 29, 30])
    sp = build_splits(ds.labels, num_classes=3, per_class=None, seed=0)
    assert sp[0]["trainval"]["indices"] == sp[1]["trainval"]["indices"] == list(range(90))
    assert sp[0]["train"]["indices"] != sp[1]["train"]["indices"]
    assert sp[0]["train"]["class_counts"] == [19, 17, 18]  # round(0.6 n_c)


def test_own_test_split_is_disjoint_and_capped():
    ds = pool([100, 80, 60])
    sp = build_splits(ds.labels, num_classes=3, per_class=20, seed=1, own_test=True, test_per_class=50)
    for s in sp:
        te, tv = np.asarray(s["test"]["indices"]), np.asarray(s["trainval"]["indices"])
        assert len(np.intersect1d(te, tv)) == 0
        assert s["test"]["class_counts"] == [50, 50, 40]


def test_split_errors():
    with pytest.raises(InputError, match="class 'c1' has only 10 images"):
        build_splits(pool([30, 10]).labels, num_classes=2, per_class=20, seed=0, class_names=["c0", "c1"])
    with pytest.raises(InputError, match="per_class: expected at least 2"):
        build_splits(pool([30, 10]).labels, num_classes=2, per_class=1, seed=0)
    with pytest.raises(InputError, match="class '2' has only 0 images"):
        build_splits(pool([30, 10]).labels, num_classes=3, per_class=5, seed=0)
    with pytest.raises(InputError, match="class '2' has no image"):
        build_splits(pool([30, 10]).labels, num_classes=3, per_class=None, seed=0)
    with pytest.raises(InputError, match="val_fraction"):
        build_splits(pool([30, 10]).labels, num_classes=2, per_class=5, seed=0, val_fraction=1.0)


def test_read_rejects_edits_and_other_pools(tmp_path):
    ds = pool([30, 30])
    write_splits(ds, tmp_path, dataset_name="toy", per_class=10, seed=0)
    with pytest.raises(InputError, match="made for dataset 'toy', not 'other'"):
        read_splits(tmp_path, ds, dataset_name="other")
    with pytest.raises(InputError, match="different pool"):
        read_splits(tmp_path, pool([30, 30], seed=5), dataset_name="toy")
    p = tmp_path / "val1.json"
    c = json.loads(p.read_text())
    c["indices"][0] += 1
    p.write_text(json.dumps(c))
    with pytest.raises(InputError, match="sha256 mismatch"):
        read_splits(tmp_path, ds, dataset_name="toy")


def test_cli_splits_mnist5k(tmp_path, capsys):
    assert main(["smalldata", "splits", "--dataset", "mnist5k", "--per-class", "50", "--seed", "2",
                 "--out", str(tmp_path / "s"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["counts"]["trainval0.json"] == 500 and out["counts"]["train2.json"] == 300
    for i in range(3):
        c = json.loads((tmp_path / "s" / f"val{i}.json").read_text())
        assert c["kind"] == "smalldata-split" and c["class_counts"] == [20] * 10 and c["dataset"] == "mnist5k"


# ------------------------------------------------------------------ gem's split sizes
# Per-class counts of gem's datasets/<name>/{train0,val0}.txt (ciFAIR-10 from gem/datasets/cifair.py:
# train = first 30, val = next 20 of each class): train, val, trainval pool.
GEM_SIZES = {"cifair10": (30, 20), "eurosat": (30, 20), "clamm": (30, 20), "cub200": (20, 10), "isic2018": (50, 30)}


@pytest.mark.parametrize("name", sorted(GEM_SIZES))
def test_presets_draw_gems_train_val_sizes(name):
    from vistabench.data.smalldata import get_preset

    n_train, n_val = GEM_SIZES[name]
    # CUB: the official training part has 30 images per class, 29 for six classes (gem's val0: 9 there)
    counts = [30] * 6 + [29] * 2 if name == "cub200" else [n_train + n_val + 15] * 5
    ds = pool(counts, seed=1)
    sizes = get_preset(name).split_sizes()
    for s in build_splits(ds.labels, num_classes=len(counts), seed=0, **sizes):
        if name == "cub200":
            assert s["trainval"]["class_counts"] == counts
            assert s["val"]["class_counts"] == [10] * 6 + [9] * 2
        else:
            assert s["val"]["class_counts"] == [n_val] * 5
        assert s["train"]["class_counts"] == [n_train] * len(counts)
        assert s["train"]["train_per_class"] == n_train and s["train"]["val_fraction"] is None
    # our earlier rule (vistabench recipe) gives 18/12 on CUB and 48/32 on ISIC instead
    old = get_preset(name, recipe="vistabench").split_sizes()
    s0 = build_splits(ds.labels, num_classes=len(counts), seed=0, **old)[0]
    expect = {"cub200": 18, "isic2018": 48}.get(name, 30)
    assert s0["train"]["class_counts"][0] == expect


def test_split_sizes_overrides():
    from vistabench.data.smalldata import get_preset

    p = get_preset("mnist5k")
    assert p.split_sizes() == {"per_class": 50, "train_per_class": 30, "val_fraction": None}
    assert p.split_sizes(per_class=20) == {"per_class": 20, "train_per_class": 12, "val_fraction": None}
    assert p.split_sizes(train_per_class=40) == {"per_class": 50, "train_per_class": 40, "val_fraction": None}
    assert p.split_sizes(val_fraction=0.5) == {"per_class": 50, "train_per_class": None, "val_fraction": 0.5}


def test_fixed_train_size_keeps_the_draw_and_checks_room_for_val():
    ds = pool([60, 70, 80])
    a = build_splits(ds.labels, num_classes=3, per_class=50, seed=2)  # 60/40 of 50 = 30/20
    b = build_splits(ds.labels, num_classes=3, per_class=50, seed=2, train_per_class=30)
    for x, y in zip(a, b):  # the same images: only the recorded rule differs
        for part in ("trainval", "train", "val"):
            assert x[part]["indices"] == y[part]["indices"]
    with pytest.raises(InputError, match="train_per_class=50: class '0' has 50 trainval images, which leaves none"):
        build_splits(ds.labels, num_classes=3, per_class=50, seed=0, train_per_class=50)
    with pytest.raises(InputError, match="train_per_class"):
        build_splits(ds.labels, num_classes=3, per_class=50, seed=0, train_per_class=0)


def test_cli_splits_recipes_and_errors(tmp_path, capsys):
    assert main(["smalldata", "splits", "--dataset", "digits", "--out", str(tmp_path / "g"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["train_per_class"] == 30 and out["counts"]["val0.json"] == 200 and out["recipe"] == "gem"
    assert main(["smalldata", "splits", "--dataset", "digits", "--recipe", "vistabench", "--per-class", "30",
                 "--out", str(tmp_path / "v"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["val_fraction"] == 0.4 and out["counts"]["train0.json"] == 180  # round(0.6 · 30) per class
    rc = main(["smalldata", "splits", "--dataset", "digits", "--train-per-class", "10", "--val-fraction", "0.3",
               "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "either train_per_class or val_fraction" in err
    rc = main(["smalldata", "splits", "--dataset", "digits", "--recipe", "paper", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err  # a choice is checked by the options (the config vocabulary), not by argparse
    assert rc == 2 and err.count("\n") == 1 and "--recipe: expected one of gem, vistabench, got 'paper'" in err


def test_protocol_writes_a_datasets_splits_checked_as_a_run_config(tmp_path):
    from vistabench.protocols.smalldata.runner import catalog, write_dataset_splits

    res = write_dataset_splits("digits", tmp_path / "s", recipe="vistabench", per_class=30, seed=1)
    assert res["dataset"] == "digits" and res["recipe"] == "vistabench" and len(res["files"]) >= 9
    assert (tmp_path / "s" / "train0.json").is_file()
    with pytest.raises(InputError, match="^per_class: "):
        write_dataset_splits("digits", tmp_path / "x", per_class=0)
    with pytest.raises(InputError, match="^val_fraction: "):
        write_dataset_splits("digits", tmp_path / "x", val_fraction=1.5)
    listed = catalog("vistabench")
    assert listed["recipe"] == "vistabench" and "digits" in listed["datasets"] and "ce" in listed["methods"]
    with pytest.raises(InputError, match="^recipe: "):
        catalog("paper")
