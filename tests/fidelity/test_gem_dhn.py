"""gem's deep hybrid networks (``pipelines/scattering.py``, ``pipelines/common.py``) executed beside
ours (``learners/smalldata/dhn.py``; the transforms: ``data/augment.py``): WRN-16-8 layout, initial
weights, forwards; the training and evaluation transforms of an integer ``target_size`` with
``rand_shift`` on a fixed image (torchvision's ``Resize``/``RandomCrop``/``CenterCrop``/``ToTensor``
are the stand-ins of ``_torchvision.py``: what is compared is which transforms gem composes, in which
order and at which sizes)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("kymatio")

_spec = importlib.util.spec_from_file_location("_fidelity_compare", Path(__file__).with_name("_compare.py"))
C = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(C)


def _gem_model(load_reference, J: int = 2):
    scat = load_reference("gem", "gem/pipelines/scattering.py")
    wrn = load_reference("gem", "gem/architectures/wrn_cifar.py")
    base = wrn.WideResNet.build_architecture("wrn-16-8", 10, 3)
    return scat, scat.ScatteringModel(base, "wrn-16-8", 32, J, 3)


def _ours(J: int = 2, **options):
    from vistabench.learners.smalldata.build import build_method
    from vistabench.learners.recipe import Recipe

    net, _ = build_method("dhn", Recipe(model="wrn16_8"), {"scattering_J": J, **options}, num_classes=10, in_channels=3,
                          image_size=32, seed=0)
    return net


def _ref_entries(model):
    # gem's own load_weights leaves the scattering filters ('tensor' buffers) out of a state dict
    return [(k, v) for k, v in C.entries(model) if "tensor" not in k]


def _our_entries(net):
    # ours registers the final BN (``post``, the WRN's own) first; gem's sits after the blocks
    e = C.entries(net)
    post = [kv for kv in e if kv[0].startswith("post.")]
    rest = [kv for kv in e if not kv[0].startswith("post.")]
    head = [i for i, (k, _) in enumerate(rest) if k.startswith("classifier.")][0]
    return rest[:head] + post + rest[head:]


def test_dhn_wrn_shapes_init_forward(load_reference):
    _, ref = _gem_model(load_reference)
    net = _ours()
    assert sorted(C.shapes(net)) == sorted(C.shapes(ref))
    assert sum(p.numel() for p in net.parameters()) == sum(p.numel() for p in ref.parameters())
    ours = _our_entries(net)
    assert [tuple(v.shape) for _, v in ours] == [tuple(v.shape) for _, v in _ref_entries(ref)]
    C.assert_same_init(C.entry_conv_stats(ours), C.entry_conv_stats(_ref_entries(ref)))
    with torch.no_grad():
        for (_, v), (_, w) in zip(_ref_entries(ref), ours):
            w.copy_(v)
    x = torch.randn(2, 3, 32, 32)
    for train in (True, False):  # a train forward first: the BN statistics move the same way
        ref.train(train)
        net.train(train)
        torch.testing.assert_close(net(x), ref(x), rtol=1e-4, atol=1e-4)


class _Images:
    """The smallest dataset gem's ``get_data_transforms`` reads: items (H x W x C uint8 image, label)."""

    def __init__(self, image):
        self.image = image

    def __getitem__(self, i):
        return self.image, 0


def _gem_transforms(load_reference, *, size: int, shift: int):
    scat = load_reference("gem", "gem/pipelines/scattering.py")
    method = scat.ScatteringClassifier(target_size=size, rand_shift=shift, hflip=False, vflip=False, normalize=False)
    image = np.random.default_rng(0).integers(0, 256, (size, size, 3), dtype=np.uint8)
    train_tf, test_tf = method.get_data_transforms(_Images(image))
    return image, train_tf, test_tf


@pytest.mark.parametrize("size,shift", [(32, 4), (64, 8)])  # ciFAIR-10, EuroSAT
def test_dhn_transforms_on_a_fixed_image(load_reference, size, shift):
    from vistabench.data.augment import Augmentation, resize_center_crop
    from vistabench.data.smalldata_presets import get_preset
    from vistabench.protocols.smalldata.core import method_inputs

    image, train_tf, test_tf = _gem_transforms(load_reference, size=size, shift=shift)
    x = torch.from_numpy(image).permute(2, 0, 1)[None].float() / 255
    # evaluation: gem's Resize(s + 2p) + CenterCrop(s) = ours
    torch.testing.assert_close(resize_center_crop(x, shift)[0], test_tf(image), rtol=1e-6, atol=1e-6)
    # training: ours under the gem recipe (the preset's shift p) is gem's Resize(s + 2p) + RandomCrop(s):
    # every output is one of the (2p + 1)^2 windows gem's RandomCrop draws from
    preset = get_preset("cifair10" if size == 32 else "eurosat")
    aug, eval_shift = method_inputs("dhn", {"input_crop": "gem"}, preset.augmentation)
    assert (aug.crop, aug.shift, eval_shift) == ("resize", shift, shift)
    aug = Augmentation(crop=aug.crop, shift=aug.shift)  # flips off, as in gem's call above
    big = torch.nn.functional.interpolate(x, size=(size + 2 * shift,) * 2, mode="bilinear", align_corners=False)[0]
    windows = {(i, j): big[:, i:i + size, j:j + size] for i in range(2 * shift + 1) for j in range(2 * shift + 1)}
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        ours, theirs = aug(x, g)[0], train_tf(image)
        assert any(torch.allclose(ours, w, atol=1e-6) for w in windows.values())
        assert any(torch.allclose(theirs, w, atol=1e-6) for w in windows.values())
