import numpy as np
import pytest

from vistabench.errors import InputError
from vistabench.protocols.longtail.runner import build_training_split


def test_training_split_counts_and_determinism():
    labels = np.repeat(np.arange(10), 400)
    s = build_training_split(labels, imbalance=100, seed=3)
    assert s["counts"] == [400, 239, 143, 86, 51, 30, 18, 11, 6, 4]
    idx = np.array(s["indices"])
    assert np.bincount(labels[idx], minlength=10).tolist() == s["counts"]
    assert len(np.unique(idx)) == len(idx)
    assert build_training_split(labels, imbalance=100, seed=3) == s
    assert build_training_split(labels, imbalance=100, seed=4)["indices"] != s["indices"]


def test_validation_holdout():
    labels = np.repeat(np.arange(3), 100)
    s = build_training_split(labels, imbalance=10, val_fraction=0.1, seed=0)
    tr, va = np.array(s["indices"]), np.array(s["val_indices"])
    assert not set(tr) & set(va)
    assert np.bincount(labels[va], minlength=3).tolist() == [10, 3, 1]
    assert s["counts"] == np.bincount(labels[tr], minlength=3).tolist()


def test_n_max_too_large():
    with pytest.raises(InputError, match="lower n_max"):
        build_training_split(np.repeat(np.arange(3), 10), imbalance=10, n_max=50)
