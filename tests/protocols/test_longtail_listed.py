"""`longtail run --imbalance listed`: an already long-tailed list (ImageNet-LT's layout, tail classes
of 2-5 images) is trained as it is, and the record stores the list's own ρ, n_max and n_min."""

import json

import numpy as np
import pytest
from PIL import Image

from vistabench.cli import main
from vistabench.errors import InputError
from vistabench.protocols.longtail.runner import listed_training_split
from vistabench.protocols.longtail.config import LongtailConfig
from vistabench.store import ResultsStore

TRAIN = [12, 5, 3, 2]  # ImageNet-LT-like: a head class, tail classes of 2-5 images


def _imagenet_lt(root, train=TRAIN, test_per_class=3):
    """ImageNet_LT_train.txt / ImageNet_LT_test.txt of tiny JPEGs whose brightness follows the class."""
    rng = np.random.default_rng(0)
    lines = {"train": [], "test": []}
    for c, n in enumerate(train):
        for part, k in (("train", n), ("test", test_per_class)):
            for i in range(k):
                rel = f"{part}/n{c:04d}/{i}.JPEG"
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                px = np.clip(rng.normal(60 * c, 20, (12, 12, 3)), 0, 255).astype(np.uint8)
                Image.fromarray(px).save(root / rel, format="jpeg")
                lines[part].append(f"{rel} {c}")
    for part, rows in lines.items():
        (root / f"ImageNet_LT_{part}.txt").write_text("\n".join(rows) + "\n")
    return root


RUN = ["--method", "ce", "--model", "cnn28", "--epochs", "1", "--batch-size", "8", "--points", "2", "--repeats", "1"]


def test_an_imagenet_lt_list_is_trained_as_it_is_and_its_ratio_stored(tmp_path, capsys):
    data = _imagenet_lt(tmp_path / "lt")
    store = tmp_path / "r.sqlite"
    # the drawn split needs every class at the profile's count: this list is refused that way
    assert main(["longtail", "run", "--data", f"imagelist:{data}", "--imbalance", "2", "--n-max", "12", *RUN,
                 "--no-store"]) == 2
    assert "n-max=12: classes [1, 2, 3] have only" in capsys.readouterr().err
    rc = main(["longtail", "run", "--data", f"imagelist:{data}", "--imbalance", "listed", *RUN, "--store", str(store)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "trained on the list as it is: imbalance 6 (n_max 12, n_min 2); test imbalance 6" in out
    (rec,) = ResultsStore(store).records(protocol="longtail")
    st = rec.settings
    assert st["profile"] == "listed" and st["imbalance"] == 6.0 and st["n_max"] == 12 and st["n_min"] == 2
    assert st["train_counts"] == TRAIN and st["test_imbalance"] == 6.0
    assert st["config"]["imbalance"] == "listed"
    assert 0 <= rec.metrics["avg"] <= 1


def test_listed_run_json_and_a_given_test_imbalance(tmp_path, capsys):
    data = _imagenet_lt(tmp_path / "lt")
    rc = main(["longtail", "run", "--data", f"imagelist:{data}", "--imbalance", "listed", "--test-imbalance", "2",
               *RUN, "--no-store", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    st = json.loads(out)["settings"]
    assert st["imbalance"] == 6.0 and st["test_imbalance"] == 2.0 and st["n_min"] == 2


def test_listed_split_keeps_every_image_and_holds_out_per_class():
    labels = np.array([0] * 20 + [1] * 3 + [2] * 10)
    s = listed_training_split(labels, num_classes=3, seed=1, dataset="x")
    assert sorted(s["indices"]) == list(range(33)) and s["val_indices"] == []
    assert s["counts"] == [20, 3, 10] and (s["imbalance"], s["n_max"], s["n_min"]) == (20 / 3, 20, 3)
    v = listed_training_split(labels, num_classes=3, seed=1, val_fraction=0.1)
    held = np.asarray(v["val_indices"])
    assert np.bincount(labels[held], minlength=3).tolist() == [2, 0, 1] and v["counts"] == [18, 3, 9]
    assert sorted(v["indices"] + v["val_indices"]) == list(range(33))
    assert v["n_max"] == 20 and v["n_min"] == 3  # the list's own, before the hold-out
    assert listed_training_split(labels, num_classes=3, seed=1, val_fraction=0.1)["sha256"] == v["sha256"]
    with pytest.raises(InputError, match=r"classes \[3\] have no training image"):
        listed_training_split(labels, num_classes=4)


def test_config_listed_keys_print_and_errors(capsys):
    c = LongtailConfig.from_dict({"data": "digits", "method": "ce", "imbalance": "listed"})
    assert c.imbalance == "listed" and c.test_imbalance is None and c.key_dict()["imbalance"] == "listed"
    again = LongtailConfig.from_dict(c.to_dict())  # a printed config reads back
    assert again.key_dict() == c.key_dict()
    # a numeric imbalance keeps its key (a float, as before the word existed)
    assert LongtailConfig.from_dict({"data": "digits", "method": "ce", "imbalance": "10"}).key_dict()["imbalance"] == 10.0
    assert main(["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "listed",
                 "--print-config"]) == 0
    assert "imbalance: listed" in capsys.readouterr().out
    for bad, words in ((["--imbalance", "Listed"], "did you mean 'listed'"),
                       (["--imbalance", "listed", "--n-max", "5"], "drop n_max")):
        assert main(["longtail", "run", "--data", "digits", "--method", "ce", *bad, "--no-store"]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1, err
