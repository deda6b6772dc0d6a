"""classifier-balancing's ``data/ClassAwareSampler.py`` (the cRT stage-2 sampler, 4 images per class
visit: ``config/ImageNet_LT/cls_crt.yaml``) run beside vistabench's :class:`ClassAwareSampler` on the
same long-tailed labels: the epoch's length, the class frequencies and the within-class cycles.
The two draw from different generators (Python's ``random`` there, NumPy here), so the draws differ;
what each epoch contains does not."""

import random
import types

import numpy as np

from vistabench.learners.longtail.methods import ClassAwareSampler

LABELS = np.repeat(np.arange(6), [40, 24, 12, 8, 4, 2])  # n_max 40, a multiple of the 4 per visit


def _theirs(load_reference, epochs: int) -> list[np.ndarray]:
    mod = load_reference("classifier_balancing", "data/ClassAwareSampler.py")
    random.seed(0)
    sampler = mod.ClassAwareSampler(types.SimpleNamespace(labels=LABELS.tolist()), num_samples_cls=4)
    assert len(sampler) == 40 * 6
    return [np.fromiter(iter(sampler), dtype=np.int64) for _ in range(epochs)]


def _ours(epochs: int) -> list[np.ndarray]:
    sampler, rng = ClassAwareSampler(per_class=4), np.random.default_rng(0)
    return [sampler(LABELS, rng) for _ in range(epochs)]


def test_epoch_length_and_class_frequencies(load_reference):
    theirs, ours = _theirs(load_reference, 3), _ours(3)
    for t, o in zip(theirs, ours):
        assert len(o) == len(t)
        np.testing.assert_array_equal(np.bincount(LABELS[o], minlength=6), np.bincount(LABELS[t], minlength=6))


def test_class_visits_and_within_class_cycles(load_reference):
    for draws in (np.concatenate(_theirs(load_reference, 2)), np.concatenate(_ours(2))):
        classes = LABELS[draws]
        visits = classes.reshape(-1, 4)
        assert (visits == visits[:, :1]).all()  # each visit: 4 images of one class
        for c in range(6):  # images are drawn in shuffled cycles: counts differ by at most one
            per_image = np.bincount(draws[classes == c], minlength=len(LABELS))[LABELS == c]
            assert per_image.max() - per_image.min() <= 1
