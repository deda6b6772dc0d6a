"""Dataset loaders on small folders in the datasets' own layouts (created here)."""

import pickle

import numpy as np
import pytest
import tifffile
from PIL import Image

from vistabench.cli import main
from vistabench.data import load_dataset
from vistabench.data.smalldata import (CLAMM_CLASSES, EUROSAT_CLASSES, ISIC2018_CLASSES, load_smalldata,
                                       presets)
from vistabench.errors import InputError

rng = np.random.default_rng(0)


def _jpg(path, size=(20, 14), mode="RGB"):
    path.parent.mkdir(parents=True, exist_ok=True)
    shape = (size[1], size[0], 3) if mode == "RGB" else (size[1], size[0])
    Image.fromarray(rng.integers(0, 255, shape, dtype=np.uint8), mode).save(path)


def make_cub(root, classes=3, per=(2, 1)):
    root.mkdir(parents=True, exist_ok=True)
    lines, labels, split = [], [], []
    i = 0
    for c in range(1, classes + 1):
        for k in range(sum(per)):
            i += 1
            rel = f"{c:03d}.Bird_{c}/Bird_{c}_{k}.jpg"
            _jpg(root / "images" / rel, size=(20 + k, 14))
            lines.append(f"{i} {rel}")
            labels.append(f"{i} {c}")
            split.append(f"{i} {1 if k < per[0] else 0}")
    (root / "images.txt").write_text("\n".join(lines) + "\n")
    (root / "image_class_labels.txt").write_text("\n".join(labels) + "\n")
    (root / "train_test_split.txt").write_text("\n".join(split) + "\n")
    (root / "classes.txt").write_text("\n".join(f"{c} {c:03d}.Bird_{c}" for c in range(1, classes + 1)) + "\n")


def test_cub200_layout(tmp_path):
    make_cub(tmp_path / "CUB_200_2011")
    d = load_smalldata("cub200", tmp_path, image_size=16)  # finds the CUB_200_2011 sub-folder
    assert d.train.images.shape == (6, 16, 16, 3) and d.test.images.shape == (3, 16, 16, 3)
    assert d.train.class_names == ["001.Bird_1", "002.Bird_2", "003.Bird_3"]
    np.testing.assert_array_equal(d.train.labels, [0, 0, 1, 1, 2, 2])
    # a listed image that is missing is a one-line error naming it
    (tmp_path / "CUB_200_2011" / "images" / "002.Bird_2" / "Bird_2_0.jpg").unlink()
    with pytest.raises(InputError, match="Bird_2_0.jpg'?: image file listed but not found"):
        load_smalldata("cub200", tmp_path, image_size=16)


def test_cub200_missing_class_images(tmp_path):
    make_cub(tmp_path, classes=3, per=(2, 1))
    (tmp_path / "classes.txt").write_text("1 a\n2 b\n3 c\n4 d\n")
    with pytest.raises(InputError, match="no images for classes \\['d'\\]"):
        load_smalldata("cub200", tmp_path, image_size=16)


def make_eurosat(root, bands=13, per=2, band_first=False):
    for c in EUROSAT_CLASSES:
        (root / c).mkdir(parents=True)
        for k in range(per):
            arr = rng.integers(0, 4000, (bands, 8, 8) if band_first else (8, 8, bands), dtype=np.uint16)
            tifffile.imwrite(root / c / f"{c}_{k}.tif", arr)


@pytest.mark.parametrize("band_first", [False, True])
def test_eurosat_all_13_bands(tmp_path, band_first):
    make_eurosat(tmp_path / "allBands", band_first=band_first)
    d = load_smalldata("eurosat", tmp_path)
    assert d.test is None
    assert d.train.images.shape == (20, 8, 8, 13) and d.train.images.dtype == np.uint16
    assert np.bincount(d.train.labels).tolist() == [2] * 10


def test_eurosat_wrong_band_count(tmp_path):
    make_eurosat(tmp_path, bands=13)
    tifffile.imwrite(tmp_path / "Forest" / "Forest_9.tif", rng.integers(0, 255, (8, 8, 3), dtype=np.uint8))
    with pytest.raises(InputError, match="Forest_9.tif'?: expected 13 spectral bands, found 3"):
        load_smalldata("eurosat", tmp_path)


def test_eurosat_missing_class_folder(tmp_path):
    make_eurosat(tmp_path)
    for f in (tmp_path / "River").iterdir():
        f.unlink()
    (tmp_path / "River").rmdir()
    with pytest.raises(InputError, match="missing class folders \\['River'\\]"):
        load_smalldata("eurosat", tmp_path)


def test_clamm_csv_layout_and_name_variants(tmp_path):
    d = tmp_path / "images"
    train_rows, test_rows = ["FILENAME;SCRIPT_TYPE;DATE"], ["FILENAME;SCRIPT_TYPE;DATE"]
    for i, c in enumerate(CLAMM_CLASSES):
        _jpg(d / f"tr{i}.tif", mode="L")
        _jpg(d / f"te{i}.tif", mode="L")
        train_rows.append(f"tr{i}.tif;{c};1")
        variant = {"Humanistic_Cursive": "Humanistic_cursive", "Semitextualis": "Semitextualis "}.get(c, c)
        test_rows.append(f"te{i}.tif;{variant};1")
    (d / "@CLaMM-filelist.csv").write_text("\n".join(train_rows) + "\n")
    (d / "@CLaMM_task1.csv").write_text("\n".join(test_rows) + "\n")
    out = load_smalldata("clamm", tmp_path, image_size=12)
    assert out.train.images.shape == (12, 12, 12, 1) and out.test.images.shape == (12, 12, 12, 1)
    np.testing.assert_array_equal(out.test.labels, np.arange(12))
    (d / "@CLaMM_task1.csv").write_text("FILENAME;SCRIPT_TYPE\nte0.tif;Gothic\n")
    with pytest.raises(InputError, match="unknown CLaMM script class 'Gothic'"):
        load_smalldata("clamm", tmp_path, image_size=12)


def test_isic2018_layout(tmp_path):
    rows = ["image," + ",".join(ISIC2018_CLASSES)]
    for i in range(14):
        name = f"ISIC_{i:07d}"
        _jpg(tmp_path / "ISIC2018_Task3_Training_Input" / f"{name}.jpg", size=(30, 20))
        onehot = ["1.0" if k == i % 7 else "0.0" for k in range(7)]
        rows.append(name + "," + ",".join(onehot))
    (tmp_path / "ISIC2018_Task3_Training_GroundTruth.csv").write_text("\n".join(rows) + "\n")
    d = load_smalldata("isic2018", tmp_path, image_size=10)
    assert d.test is None and d.train.images.shape == (14, 10, 10, 3)
    assert np.bincount(d.train.labels).tolist() == [2] * 7
    rows[3] = rows[3].replace("1.0", "0.0")
    (tmp_path / "ISIC2018_Task3_Training_GroundTruth.csv").write_text("\n".join(rows) + "\n")
    with pytest.raises(InputError, match="line 4: expected one 1.0 among 7 columns"):
        load_smalldata("isic2018", tmp_path, image_size=10)


def _cifar_batch(path, n, seed):
    r = np.random.default_rng(seed)
    labels = (np.arange(n) % 10).tolist()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump({b"data": r.integers(0, 255, (n, 3072), dtype=np.uint8), b"labels": labels}, f)


def test_cifair10_layout(tmp_path):
    for i in range(1, 6):
        _cifar_batch(tmp_path / "cifar-10-batches-py" / f"data_batch_{i}", 20, i)
    with pytest.raises(InputError, match="ciFAIR-10/test_batch"):
        load_smalldata("cifair10", tmp_path)
    _cifar_batch(tmp_path / "ciFAIR-10" / "test_batch", 30, 9)
    d = load_smalldata("cifair10", tmp_path)
    assert d.train.images.shape == (100, 32, 32, 3) and d.test.images.shape == (30, 32, 32, 3)
    assert d.train.class_names[0] == "airplane"
    # also reachable through the shared readers registry
    assert len(load_dataset(f"cifair10:{tmp_path}").test) == 30


def test_folder_with_missing_test_class(tmp_path):
    for c in ("cat", "dog"):
        for k in range(3):
            _jpg(tmp_path / "train" / c / f"{k}.png")
    _jpg(tmp_path / "test" / "cat" / "0.png")
    with pytest.raises(InputError, match="missing class folders \\['dog'\\]"):
        load_smalldata("folder", tmp_path, image_size=8)
    _jpg(tmp_path / "test" / "dog" / "0.png")
    d = load_smalldata("folder", tmp_path, image_size=8)
    assert d.train.images.shape == (6, 8, 8, 3) and len(d.test) == 2


@pytest.mark.parametrize("name", presets.names())
def test_every_preset_needs_its_root_or_none(name, tmp_path):
    p = presets.get(name)
    if p.needs_root:
        with pytest.raises(InputError, match="^root: "):  # the API names its parameter, the CLI its flag
            load_smalldata(name, None)
        with pytest.raises(InputError, match="no such folder"):
            load_smalldata(name, tmp_path / "absent")
    else:
        with pytest.raises(InputError, match="takes no root"):
            load_smalldata(name, tmp_path)
    assert p.batch_sizes and p.trials > 0 and p.grace_period <= p.recipe_changes["epochs"]


def test_cli_bad_names_one_line(capsys, tmp_path):
    assert main(["smalldata", "splits", "--dataset", "eurosa", "--root", str(tmp_path), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'eurosat'" in err
    make_eurosat(tmp_path / "e", bands=4)
    assert main(["smalldata", "splits", "--dataset", "eurosat", "--root", str(tmp_path / "e"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "expected 13 spectral bands, found 4" in err


# ------------------------------------------------------------------ augmentation (gem's per dataset)
torch = pytest.importorskip("torch")
from vistabench.data.augment import (NO_AUGMENTATION, PAD_CROP_FLIP, Augmentation,  # noqa: E402
                                     crop_and_resize, resized_crop_boxes)
from vistabench.data.smalldata import get_preset  # noqa: E402

# gem's bash_scripts/bench_*.sh on top of its defaults (hflip on, vflip off, no shift, scale 1):
# --rand-shift without --target-size = RandomCrop(size, padding=shift, padding_mode="reflect");
# --min-scale with --target-size = RandomResizedCrop(size, scale=(min_scale, 1)).
GEM_AUG = {"cifair10": ("shift", 4, 1.0, True, False), "eurosat": ("shift", 8, 1.0, True, True),
           "clamm": ("resized", 0, 0.2, False, False), "cub200": ("resized", 0, 0.4, True, False),
           "isic2018": ("resized", 0, 0.4, True, True)}


def test_presets_carry_gems_augmentation():
    for name, (crop, shift, scale, hflip, vflip) in GEM_AUG.items():
        a = get_preset(name).augmentation
        assert (a.crop, a.shift, a.min_scale, a.hflip, a.vflip) == (crop, shift, scale, hflip, vflip), name
        if crop == "shift":
            assert a.pad_mode == "reflect"
        assert get_preset(name, recipe="vistabench").augmentation == PAD_CROP_FLIP
    for name in ("mnist5k", "digits"):  # digits are not flip-invariant: no augmentation in either recipe
        assert get_preset(name).augmentation == NO_AUGMENTATION == get_preset(name, recipe="vistabench").augmentation
        assert not NO_AUGMENTATION


@pytest.mark.parametrize("mode,np_mode", [("reflect", "reflect"), ("zeros", "constant")])
def test_shift_is_a_window_of_the_padded_image(mode, np_mode):
    x = torch.rand(300, 2, 6, 7)
    y = Augmentation(crop="shift", shift=2, pad_mode=mode)(x, torch.Generator().manual_seed(0)).numpy()
    offsets = set()
    for i in range(len(x)):
        padded = np.pad(x[i].numpy(), ((0, 0), (2, 2), (2, 2)), mode=np_mode)
        hits = [(oy, ox) for oy in range(5) for ox in range(5)
                if np.array_equal(padded[:, oy:oy + 6, ox:ox + 7], y[i])]
        assert hits, i
        offsets.add(hits[0])
    assert offsets == {(oy, ox) for oy in range(5) for ox in range(5)}  # every shift −2..+2 occurs


def _np_crop_resize(img, top, left, bh, bw, h, w):
    """Cut out the box, then bilinear resize to (h, w) with half-pixel centres, edges clamped."""
    crop = img[:, top:top + bh, left:left + bw]

    def axis(n_out, n_in):
        src = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
        i0 = np.floor(src).astype(int)
        return i0, np.minimum(i0 + 1, n_in - 1), src - i0

    y0, y1, wy = axis(h, bh)
    x0, x1, wx = axis(w, bw)
    top_row = crop[:, y0][:, :, x0] * (1 - wx) + crop[:, y0][:, :, x1] * wx
    bot_row = crop[:, y1][:, :, x0] * (1 - wx) + crop[:, y1][:, :, x1] * wx
    return top_row * (1 - wy)[:, None] + bot_row * wy[:, None]


def test_resized_crop_boxes_and_resampling():
    n, h, w = 400, 24, 20
    top, left, bh, bw = resized_crop_boxes(n, h, w, 0.4, torch.Generator().manual_seed(1))
    area = (bh * bw).double() / (h * w)
    ratio = bw.double() / bh.double()
    assert torch.all((top >= 0) & (left >= 0) & (top + bh <= h) & (left + bw <= w))
    assert area.min() >= 0.4 - 0.06 and area.max() <= 1.0  # s ~ U(0.4, 1) up to rounding of the sides
    assert ratio.min() >= 0.75 - 0.06 and ratio.max() <= 4 / 3 + 0.08
    assert area.min() < 0.5 and area.max() > 0.9  # the whole range is drawn
    x = torch.rand(6, 3, h, w)
    y = crop_and_resize(x, top[:6], left[:6], bh[:6], bw[:6]).numpy()
    for i in range(6):
        ref = _np_crop_resize(x[i].numpy().astype(np.float64), int(top[i]), int(left[i]), int(bh[i]), int(bw[i]), h, w)
        np.testing.assert_allclose(y[i], ref, atol=1e-5)
    # scale 1 on a square image leaves only the whole image (as torchvision's RandomResizedCrop)
    sq = torch.rand(50, 1, 16, 16)
    np.testing.assert_allclose(Augmentation(crop="resized", min_scale=1.0)(sq, torch.Generator().manual_seed(2)),
                               sq, atol=1e-6)


@pytest.mark.parametrize("hflip,vflip", [(True, False), (False, True), (False, False)])
def test_flips_only_on_their_axis(hflip, vflip):
    x = torch.rand(400, 1, 5, 5)
    y = Augmentation(hflip=hflip, vflip=vflip)(x, torch.Generator().manual_seed(3))
    same = torch.all((y == x).flatten(1), 1)
    flipped = torch.all((y == x.flip(3 if hflip else 2)).flatten(1), 1)
    assert torch.all(same | flipped)
    if hflip or vflip:
        assert 0.4 < flipped.float().mean() < 0.6
    else:
        assert torch.all(same)


def test_trainer_applies_the_presets_augmentation():
    from vistabench.learners.models import build_model
    from vistabench.learners.trainer import TrainConfig, Trainer

    seen = []

    class Spy(Augmentation):
        def __call__(self, x, generator):
            seen.append(tuple(x.shape))
            return super().__call__(x, generator)

    imgs = np.random.default_rng(0).integers(0, 255, (20, 8, 8, 1), dtype=np.uint8)
    model = build_model("cnn28", num_classes=2, in_channels=1, image_size=8, seed=0)
    cfg = TrainConfig(epochs=1, batch_size=10, augment=Spy(vflip=True), count_flops=False)
    Trainer(model, cfg).fit(imgs, np.arange(20) % 2)
    assert seen == [(10, 1, 8, 8)] * 2
    with pytest.raises(InputError, match="min_scale"):
        Augmentation(crop="resized", min_scale=0)
