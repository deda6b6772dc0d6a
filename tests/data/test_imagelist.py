"""imagelist:DIR: the list-file layouts (train.txt, ImageNet-LT, Places-LT, iNaturalist 2018's JSON),
lazy decoding of ImageFiles, and one-line errors naming the list file and line."""

import json

import numpy as np
import pytest
from PIL import Image

from vistabench.data import load_dataset
from vistabench.data.image_files import ImageFiles
from vistabench.data.imagelist import read_image_list
from vistabench.errors import InputError


def _img(path, value, size=(10, 12), mode="RGB"):
    path.parent.mkdir(parents=True, exist_ok=True)
    shape = size if mode == "L" else (*size, 3)
    Image.fromarray(np.full(shape, value, np.uint8), mode=None).save(path)


def _write_list(root, name, items):
    (root / name).write_text("".join(f"{p} {y}\n" for p, y in items))


@pytest.fixture
def plain(tmp_path):
    items = {"train": [(f"tr/c{i % 3}/{i}.png", i % 3) for i in range(9)],
             "test": [(f"te/{i}.jpg", i % 3) for i in range(6)], "val": [("va/0.png", 2)]}
    for part, rows in items.items():
        for k, (p, y) in enumerate(rows):
            _img(tmp_path / p, 10 * k + y)
        _write_list(tmp_path, f"{part}.txt", rows)
    return tmp_path


def test_plain_layout_reads_paths_and_labels_without_decoding(plain, monkeypatch):
    calls = []
    import vistabench.data.image_files as F
    real = F.decode_image
    monkeypatch.setattr(F, "decode_image", lambda *a: calls.append(a) or real(*a))
    s = load_dataset(f"imagelist:{plain}")
    assert calls == []  # reading the lists decodes nothing
    assert isinstance(s.train.images, ImageFiles) and s.train.images.shape == (9, 10, 12, 3)
    assert s.train.labels.tolist() == [i % 3 for i in range(9)] and s.train.class_names == ["0", "1", "2"]
    assert len(s.test) == 6 and s.val is not None and s.val.labels.tolist() == [2]
    batch = s.train.images[np.array([4, 1])]
    assert batch.shape == (2, 10, 12, 3) and batch.dtype == np.uint8 and len(calls) == 2
    assert int(batch[0, 0, 0, 0]) == 10 * 4 + 1  # the pixels of image 4, label 1 (PNG: lossless)
    sub = s.train.subset(np.array([0, 3]))
    assert isinstance(sub.images, ImageFiles) and sub.images.shape[0] == 2 and len(calls) == 2
    assert np.array_equal(sub.images[0:2], s.train.images[np.array([0, 3])])


def test_images_are_resized_to_the_first_images_size(tmp_path):
    _img(tmp_path / "a.png", 50, size=(8, 8))
    _img(tmp_path / "b.png", 90, size=(16, 32))  # shorter side to 8, centre crop 8 x 8
    _img(tmp_path / "g.png", 70, size=(8, 8), mode="L")  # greyscale decoded as RGB
    _img(tmp_path / "t.png", 50, size=(8, 8))
    _write_list(tmp_path, "train.txt", [("a.png", 0), ("b.png", 1), ("g.png", 1)])
    _write_list(tmp_path, "test.txt", [("t.png", 0)])
    s = read_image_list(tmp_path)
    x = s.train.images[:]
    assert x.shape == (3, 8, 8, 3) and np.all(x[1] == 90) and np.all(x[2] == 70)
    assert read_image_list(tmp_path, size=(4, 6)).train.images[0:1].shape == (1, 4, 6, 3)


def test_imagenet_lt_and_places_lt_names(tmp_path):
    for prefix, lead in (("ImageNet_LT", ""), ("Places_LT", "/")):
        root = tmp_path / prefix
        for part in ("train", "val", "test"):
            rows = [(f"{lead}{part}/n0/{i}.jpg", i % 2) for i in range(4)]
            for p, _ in rows:
                _img(root / p.lstrip("/"), 100)
            _write_list(root, f"{prefix}_{part}.txt", rows)
        s = load_dataset(f"imagelist:{root}")
        assert s.train.images.shape == (4, 224, 224, 3) and s.train.meta["layout"] == prefix.lower()
        assert len(s.test) == 4 and len(s.val) == 4 and s.train.class_names == ["0", "1"]
        assert s.test.images[0].shape == (224, 224, 3)


def test_inaturalist_2018_json(tmp_path):
    def doc(part, n, cats):
        images = [{"id": 100 + i, "file_name": f"train_val2018/Plantae/{cats[i % len(cats)]}/{part}{i}.jpg"}
                  for i in range(n)]
        for im in images:
            _img(tmp_path / im["file_name"], 30)
        anns = [{"id": i, "image_id": 100 + i, "category_id": cats[i % len(cats)]} for i in range(n)]
        return {"images": images, "annotations": anns,
                "categories": [{"id": c, "name": f"species{c}"} for c in (3, 7, 9)]}
    (tmp_path / "train2018.json").write_text(json.dumps(doc("t", 6, [3, 7, 9])))
    (tmp_path / "val2018.json").write_text(json.dumps(doc("v", 2, [9])))
    s = load_dataset(f"imagelist:{tmp_path}")
    assert s.train.labels.tolist() == [0, 1, 2, 0, 1, 2] and s.test.labels.tolist() == [2, 2]
    assert s.train.class_names == ["species3", "species7", "species9"] and s.val is None
    assert s.train.images.shape == (6, 224, 224, 3)
    bad = doc("t", 1, [3])
    bad["annotations"][0]["image_id"] = 5
    (tmp_path / "train2018.json").write_text(json.dumps(bad))
    with pytest.raises(InputError, match=r"train2018.json'?: annotations\[0\]: image_id 5 is not in 'images'"):
        load_dataset(f"imagelist:{tmp_path}")


@pytest.mark.parametrize("line, message", [
    ("a.png", r"train.txt:2: expected 'relative/path label', got 'a.png'"),
    ("a.png x", r"train.txt:2: label 'x' is not an integer"),
    ("a.png 1.5", r"train.txt:2: label '1.5' is not an integer"),
    ("a.png -1", r"train.txt:2: label -1 is negative"),
    ("missing.png 0", r"train.txt:2: image 'missing.png' not found under"),
    (" 0", r"train.txt:2: expected 'relative/path label'"),
])
def test_malformed_lines_name_file_and_line(tmp_path, line, message):
    _img(tmp_path / "a.png", 1)
    _img(tmp_path / "t.png", 1)
    (tmp_path / "train.txt").write_text(f"a.png 0\n{line}\n")
    _write_list(tmp_path, "test.txt", [("t.png", 0)])
    with pytest.raises(InputError, match=message) as e:
        load_dataset(f"imagelist:{tmp_path}")
    assert "\n" not in str(e.value)


def test_layout_errors(tmp_path):
    with pytest.raises(InputError, match="no list files found; expected one of: train.txt"):
        load_dataset(f"imagelist:{tmp_path}")
    _img(tmp_path / "a.png", 1)
    _write_list(tmp_path, "train.txt", [("a.png", 0)])
    with pytest.raises(InputError, match="has train.txt but no test.txt"):
        load_dataset(f"imagelist:{tmp_path}")
    with pytest.raises(InputError, match="needs a path: use imagelist:DIR"):
        load_dataset("imagelist")
    (tmp_path / "train.txt").write_text("# only a comment\n\n")
    _write_list(tmp_path, "test.txt", [("a.png", 0)])
    with pytest.raises(InputError, match="train.txt'?: no images listed"):
        load_dataset(f"imagelist:{tmp_path}")


def test_a_corrupt_image_fails_when_read_naming_it(tmp_path):
    _img(tmp_path / "a.png", 1)
    _img(tmp_path / "t.png", 1)
    (tmp_path / "bad.png").write_bytes(b"not an image")
    _write_list(tmp_path, "train.txt", [("a.png", 0), ("bad.png", 1)])
    _write_list(tmp_path, "test.txt", [("t.png", 0)])
    s = load_dataset(f"imagelist:{tmp_path}")  # existence is checked up front, decoding lazily
    with pytest.raises(InputError, match=r"image '.*bad.png': not a readable image"):
        s.train.images[np.array([0, 1])]


def test_image_files_pickle_without_pixels(tmp_path):
    import pickle

    _img(tmp_path / "a.png", 7)
    files = ImageFiles([str(tmp_path / "a.png")] * 3, size=(5, 5))
    again = pickle.loads(pickle.dumps(files))
    assert len(pickle.dumps(files)) < 1000 and again.shape == (3, 5, 5, 3)
    assert np.array_equal(np.asarray(again), np.full((3, 5, 5, 3), 7, np.uint8))
    assert files.take(np.array([True, False, True])).shape == (2, 5, 5, 3)
    with pytest.raises(InputError, match="channels: expected 1 or 3"):
        ImageFiles([], size=(2, 2), channels=2)


@pytest.mark.parametrize("second, message", [
    ("train/c0/0.png 2", r"train.txt:1 and line 3: image 'train/c0/0.png' is listed with labels 0 and 2; an image "
                         r"has one label; keep one line"),
    ("train/c0/0.png 0", r"train.txt:1 and line 3: image 'train/c0/0.png' is listed twice \(label 0\); it would "
                         r"count twice in its class; keep one line"),
    ("./train/c0/../c0/0.png 1", r"train.txt:1 and line 3: image './train/c0/../c0/0.png' is listed with labels 0 "
                                 r"and 1"),
])
def test_an_image_listed_twice_names_the_list_and_both_lines(tmp_path, second, message):
    for rel in ("train/c0/0.png", "train/c1/1.png", "test/0.png"):
        _img(tmp_path / rel, 5)
    (tmp_path / "train.txt").write_text(f"train/c0/0.png 0\ntrain/c1/1.png 1\n{second}\n")
    _write_list(tmp_path, "test.txt", [("test/0.png", 0)])
    with pytest.raises(InputError, match=message) as e:
        load_dataset(f"imagelist:{tmp_path}")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("part", ["test", "val"])
def test_a_training_image_in_the_test_or_val_list_is_refused(tmp_path, part):
    for rel in ("tr/0.png", "tr/1.png", "te/0.png"):
        _img(tmp_path / rel, 5)
    _write_list(tmp_path, "train.txt", [("tr/0.png", 0), ("tr/1.png", 1)])
    _write_list(tmp_path, "test.txt", [("te/0.png", 0)] + ([("./tr/1.png", 1)] if part == "test" else []))
    if part == "val":
        _write_list(tmp_path, "val.txt", [("tr/0.png", 0)])
    with pytest.raises(InputError, match=rf"1 image\(s\) of {part}.txt are also in train.txt \(first: "
                                         rf"'tr/[01].png'\); a {part} image must not be trained on"):
        load_dataset(f"imagelist:{tmp_path}")
    (tmp_path / "val.txt").unlink(missing_ok=True)
    _write_list(tmp_path, "test.txt", [("te/0.png", 0)])
    _write_list(tmp_path, "val.txt", [("te/0.png", 0)])  # test and val may share images (none trained on)
    assert len(load_dataset(f"imagelist:{tmp_path}").val) == 1


def test_a_path_outside_the_folder_is_read_as_written(tmp_path):
    """Lists may live apart from their images: ``../images/a.png`` is read relative to DIR (decided
    and documented in docs/longtail.md), and a missing one still names the line."""
    _img(tmp_path / "outside.png", 77, size=(4, 4))
    _img(tmp_path / "lists" / "in.png", 11, size=(4, 4))
    _img(tmp_path / "lists" / "te.png", 11, size=(4, 4))
    _write_list(tmp_path / "lists", "train.txt", [("../outside.png", 1), ("in.png", 0)])
    _write_list(tmp_path / "lists", "test.txt", [("te.png", 0)])
    s = load_dataset(f"imagelist:{tmp_path / 'lists'}")
    assert s.train.labels.tolist() == [1, 0] and np.all(s.train.images[0:1] == 77)
    _write_list(tmp_path / "lists", "train.txt", [("../nowhere.png", 1)])
    with pytest.raises(InputError, match=r"train.txt:1: image '../nowhere.png' not found under"):
        load_dataset(f"imagelist:{tmp_path / 'lists'}")
