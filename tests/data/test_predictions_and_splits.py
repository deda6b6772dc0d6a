import json

import numpy as np
import pytest

from vistabench.data import Predictions, load_predictions, read_split, save_predictions, write_split
from vistabench.errors import InputError


def test_roundtrip(tmp_path):
    logits = np.random.default_rng(0).normal(size=(6, 3))
    save_predictions(tmp_path / "p.npz", labels=[0, 1, 2, 0, 1, 2], logits=logits)
    p = load_predictions(tmp_path / "p.npz")
    assert p.kind == "logits" and np.array_equal(p.predicted(), logits.argmax(1))


@pytest.mark.parametrize("kw,msg", [
    ({"labels": [0, 1], "logits": np.zeros((3, 2))}, "labels has 2 entries"),
    ({"labels": [0, 1], "logits": np.zeros(2)}, "2-d"),
    ({"labels": [0, -1], "pred": [0, 1]}, ">= 0"),
    ({"labels": [0, 1], "logits": np.array([[0, np.nan], [1, 2]])}, "NaN"),
    ({"labels": [0, 1], "probs": np.array([[0.5, 0.2], [0.1, 0.9]])}, "sum to 1"),
    ({"labels": [0, 1], "probs": np.array([[1.5, -0.5], [0.1, 0.9]])}, r"\[0, 1\]"),
    ({"labels": [0, 1]}, "exactly one"),
    ({"labels": [0, 1], "pred": [0, 1], "logits": np.zeros((2, 2))}, "exactly one"),
])
def test_bad_predictions(tmp_path, kw, msg):
    with pytest.raises(InputError, match=msg):
        save_predictions(tmp_path / "p.npz", **kw)


def test_bad_predictions_files(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_predictions(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="not a .npz archive"):
        load_predictions(tmp_path / "junk.npz")
    np.savez(tmp_path / "two.npz", labels=[0], logits=[[1.0]], pred=[0])
    with pytest.raises(InputError, match="exactly one"):
        load_predictions(tmp_path / "two.npz")
    np.savez(tmp_path / "nol.npz", logits=[[1.0]])
    with pytest.raises(InputError, match="missing array 'labels'"):
        load_predictions(tmp_path / "nol.npz")


def test_classes_maps_columns():
    p = Predictions(labels=[5, 7], kind="logits", values=[[1.0, 0.0], [0.0, 1.0]], classes=[5, 7])
    assert p.predicted().tolist() == [5, 7] and p.correct().all()


def test_split_hash_and_tamper(tmp_path):
    s = write_split(tmp_path / "s.json", {"kind": "k", "seed": 1, "indices": [3, 1, 2]})
    assert read_split(tmp_path / "s.json")["sha256"] == s["sha256"]
    write_split(tmp_path / "t.json", {"kind": "k", "seed": 1, "indices": [3, 1, 2]})
    assert (tmp_path / "s.json").read_bytes() == (tmp_path / "t.json").read_bytes()
    d = json.loads((tmp_path / "s.json").read_text())
    d["indices"].append(4)
    (tmp_path / "s.json").write_text(json.dumps(d))
    with pytest.raises(InputError, match="sha256 mismatch"):
        read_split(tmp_path / "s.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        read_split(tmp_path / "bad.json")
    with pytest.raises(InputError, match="no such file"):
        read_split(tmp_path / "none.json")


def test_file_sha256_in_a_thread_is_the_file_s_sha256(tmp_path):
    import hashlib

    from vistabench.data.predictions import file_sha256, file_sha256_in_background

    p = tmp_path / "results.json"
    data = bytes(range(256)) * 40_000  # 10 MB: several blocks of the plain reading
    p.write_bytes(data)
    digest = file_sha256_in_background(p)
    assert digest() == file_sha256(p) == file_sha256(p, block_bytes=4096) == hashlib.sha256(data).hexdigest()
    missing = file_sha256_in_background(tmp_path / "gone.json")
    with pytest.raises(FileNotFoundError):
        missing()
    # the reused buffer: an empty file, a file of exactly one block, one byte more, a block of one byte
    for size in (0, 4096, 4097):
        q = tmp_path / f"f{size}"
        q.write_bytes(data[:size])
        assert file_sha256(q, block_bytes=4096) == hashlib.sha256(data[:size]).hexdigest()
    assert file_sha256(q, block_bytes=1) == hashlib.sha256(data[:4097]).hexdigest()
