"""Revisting_FSCIL's ``dataloader/cifar100/cifar.py`` test transform (``Resize(int(1.15 s))``,
``CenterCrop(s)``, ``ToTensor``, ``Normalize``; also the prototypes' transform,
``models/base/fscil_trainer.py:106,124``) run beside vistabench's ``eval_transform: resize_crop``
(:func:`~vistabench.learners.tensors.resize_center_crop`) on a fixed image.

torchvision does not import here: the transforms come from ``tests/fidelity/_torchvision.py``, whose
``Resize`` is bilinear with half-pixel centres on the float image; the reference resizes the PIL
image (also bilinear, rounded to 8 bits), ours rounds to 8 bits too: values agree within one level."""

import ast

import numpy as np
import torch

from vistabench.learners.tensors import resize_center_crop

#: the checks compare the reference with this option; vistabench's default (``none``) differs
FIDELITY_OPTION = "eval_transform: resize_crop (default none: images as stored)"
SIDE = 32
MEAN, STD = [0.507, 0.487, 0.441], [0.267, 0.256, 0.276]


def _test_transform(load_reference):
    """The ``else`` branch of ``CIFAR10.__init__`` (the test transform), built by the reference's own
    expression with ``img_size`` = 32 and the transforms module the file imports."""
    # the dataset classes' imports only (never called here): VisionDataset as a plain base class
    stubs = {"torchvision.datasets.vision": {"VisionDataset": object},
             "torchvision.datasets.utils": {"check_integrity": None, "download_and_extract_archive": None}}
    mod = load_reference("revisiting_fscil", "dataloader/cifar100/cifar.py", stubs=stubs)
    tree = ast.parse(open(mod.__file__).read())
    init = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    branch = next(n for n in ast.walk(init) if isinstance(n, ast.If) and ast.unparse(n.test) == "self.train")
    assign = next(n for n in branch.orelse if isinstance(n, ast.Assign) and "transform" in ast.unparse(n.targets[0]))
    return eval(compile(ast.Expression(assign.value), mod.__file__, "eval"),  # noqa: S307 - the authors' expression
                {"transforms": mod.transforms, "img_size": SIDE})


def test_test_and_prototype_view_of_a_fixed_image(load_reference):
    transform = _test_transform(load_reference)
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (SIDE, SIDE, 3), dtype=np.uint8)
    theirs = transform(torch.from_numpy(image).permute(2, 0, 1).contiguous()).numpy()  # uint8, as a PIL image
    view = resize_center_crop(image[None])[0]  # uint8 (32, 32, 3), what the learner is fed
    ours = ((view.astype(np.float32) - np.multiply(MEAN, 255)) / np.multiply(STD, 255)).transpose(2, 0, 1)
    assert ours.shape == theirs.shape == (3, SIDE, SIDE)
    one_level = 1 / (255 * min(STD))
    np.testing.assert_allclose(ours, theirs, atol=1.01 * one_level)  # 8-bit rounding of the two resizes
    assert np.mean(np.abs(ours - theirs) < 0.01 * one_level) > 0.7  # most values identical
    # the view is not the stored image: the check can tell the two apart
    stored = ((image.astype(np.float32) - np.multiply(MEAN, 255)) / np.multiply(STD, 255)).transpose(2, 0, 1)
    assert np.abs(stored - theirs).max() > 10 * one_level
