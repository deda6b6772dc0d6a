"""Dataset readers on small data the tests make: CIFAR pickle folders, image folders, npz."""

import os
import pickle

import numpy as np
import pytest

from vistabench.data import load_dataset, read_cifar, read_image_folder, safe_unpickle
from vistabench.errors import InputError


def _write_cifar10(root, n_per_batch=6, seed=0):
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    batches = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, size=(n_per_batch, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n_per_batch).tolist()
        with open(root / name, "wb") as f:
            pickle.dump({b"batch_label": name.encode(), b"labels": labels, b"data": data,
                         b"filenames": [b"x.png"] * n_per_batch}, f, protocol=2)
        batches[name] = (data, labels)
    with open(root / "batches.meta", "wb") as f:
        pickle.dump({b"label_names": [f"c{i}".encode() for i in range(10)], b"num_vis": 3072}, f, protocol=2)
    return batches


def test_cifar10_folder(tmp_path):
    batches = _write_cifar10(tmp_path / "cifar-10-batches-py")
    ds = read_cifar(tmp_path / "cifar-10-batches-py", variant=10)
    assert ds.train.images.shape == (30, 32, 32, 3) and ds.test.images.shape == (6, 32, 32, 3)
    assert ds.train.class_names[3] == "c3"
    data, labels = batches["data_batch_1"]
    # CIFAR rows are channel-planar: R plane, G plane, B plane
    assert np.array_equal(ds.train.images[0, :, :, 0].ravel(), data[0, :1024])
    assert np.array_equal(ds.train.images[0, :, :, 2].ravel(), data[0, 2048:])
    assert ds.train.labels[:6].tolist() == labels
    # through the registry spec
    assert len(load_dataset(f"cifar10:{tmp_path / 'cifar-10-batches-py'}").train) == 30


def test_cifar100_folder(tmp_path):
    root = tmp_path / "cifar-100-python"
    root.mkdir()
    rng = np.random.default_rng(0)
    for name, n in (("train", 8), ("test", 4)):
        with open(root / name, "wb") as f:
            pickle.dump({b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                         b"fine_labels": rng.integers(0, 100, n).tolist(),
                         b"coarse_labels": rng.integers(0, 20, n).tolist()}, f, protocol=2)
    with open(root / "meta", "wb") as f:
        pickle.dump({b"fine_label_names": [f"f{i}".encode() for i in range(100)]}, f)
    ds = read_cifar(root, variant=100)
    assert len(ds.train) == 8 and len(ds.test) == 4 and ds.train.num_classes == 100


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /tmp/vistabench-pwned",))


def test_malicious_pickle_refused(tmp_path):
    p = tmp_path / "data_batch_1"
    with open(p, "wb") as f:
        pickle.dump({b"data": _Evil()}, f)
    with pytest.raises(InputError, match="refusing to load global"):
        safe_unpickle(p)
    assert not os.path.exists("/tmp/vistabench-pwned")


def test_missing_cifar_files(tmp_path):
    (tmp_path / "c").mkdir()
    with pytest.raises(InputError, match="missing files"):
        read_cifar(tmp_path / "c", variant=10)
    with pytest.raises(InputError, match="no such folder"):
        read_cifar(tmp_path / "nope", variant=10)


def test_truncated_pickle(tmp_path):
    _write_cifar10(tmp_path / "c")
    raw = (tmp_path / "c" / "data_batch_2").read_bytes()
    (tmp_path / "c" / "data_batch_2").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(InputError, match="pickle"):
        read_cifar(tmp_path / "c", variant=10)


def _write_folder(root, classes=("cat", "dog"), n=3, size=(12, 10)):
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in classes:
        (root / c).mkdir(parents=True)
        for i in range(n):
            Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8)).save(root / c / f"{i}.png")


def test_image_folder(tmp_path):
    _write_folder(tmp_path / "f")
    ds = read_image_folder(tmp_path / "f")
    assert ds.images.shape == (6, 12, 10, 3) and ds.class_names == ["cat", "dog"]
    assert ds.labels.tolist() == [0, 0, 0, 1, 1, 1]


def test_image_folder_missing_class(tmp_path):
    _write_folder(tmp_path / "f")
    with pytest.raises(InputError, match="missing class folders"):
        read_image_folder(tmp_path / "f", class_names=["cat", "dog", "bird"])


def test_folder_spec_with_train_test(tmp_path):
    _write_folder(tmp_path / "d" / "train")
    _write_folder(tmp_path / "d" / "test", n=2)
    s = load_dataset(f"folder:{tmp_path / 'd'}")
    assert len(s.train) == 6 and len(s.test) == 4


def test_npz_dataset(tmp_path):
    x = np.zeros((5, 4, 4), dtype=np.uint8)
    np.savez(tmp_path / "d.npz", images=x, labels=np.array([0, 1, 2, 1, 0]), class_names=np.array(["a", "b", "c"]))
    s = load_dataset(f"npz:{tmp_path / 'd.npz'}")
    assert s.train.images.shape == (5, 4, 4, 1) and s.train.class_names == ["a", "b", "c"] and s.test is None


def test_bundled_datasets():
    m = load_dataset("mnist5k")
    assert m.train.images.shape == (4000, 28, 28, 1) and m.test.images.shape == (1000, 28, 28, 1)
    assert np.bincount(m.test.labels).tolist() == [100] * 10
    d = load_dataset("digits")
    assert d.train.images.shape[1:] == (8, 8, 1) and np.bincount(d.test.labels).tolist() == [30] * 10


def test_unknown_dataset_suggests():
    with pytest.raises(InputError, match="did you mean 'mnist5k'"):
        load_dataset("mnist5")
    with pytest.raises(InputError, match="needs a path"):
        load_dataset("cifar10")


def test_digits_are_sklearns_load_digits_read_without_importing_sklearn():
    import subprocess
    import sys

    from sklearn.datasets import load_digits

    from vistabench.data.readers import _sklearn_digits

    images, target = _sklearn_digits()
    want = load_digits()
    assert images.dtype == want.images.dtype and np.array_equal(images, want.images)
    assert np.array_equal(target, want.target)
    code = ("import sys; from vistabench.data.readers import load_dataset; d = load_dataset('digits'); "
            "print(len(d.train), len(d.test), 'sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["1497", "300", "False"], out.stderr
