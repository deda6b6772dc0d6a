"""An LVIS-like synthetic detection set: ground truth and a simulated detector's results.

Long-tailed category frequencies (Zipf), federated negative and not-exhaustive lists, jittered
true positives with duplicates, false positives (background boxes, wrong-class boxes near objects,
categories neither present nor negative), and category-dependent score scales so that cross-category
calibration matters. Everything is vectorised (2,000 images x 1,000 classes x 360 detections/image
builds in seconds) and seeded: the same arguments give the same JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .._validation import check_value
from ..errors import InputError


@dataclass
class SynthSet:
    """Ground truth (COCO/LVIS dict) and results (list of dicts) as written to JSON."""

    ground_truth: dict[str, Any]
    results: Any  # list of dicts, or columns (results_as_columns=True)
    settings: dict[str, Any]


def synth_detection_set(
    *,
    num_images: int = 200,
    num_categories: int = 100,
    dets_per_image: int = 100,
    seed: int = 0,
    format: Literal["lvis", "coco"] = "lvis",
    zipf: float = 1.1,
    score_decimals: int | None = 4,
    masks: bool = False,
    image_size: tuple[int, int] = (480, 640),
    detector_seed: int | None = None,
    results_as_columns: bool = False,
) -> SynthSet:
    """Generate an LVIS-like (or COCO-like) ground truth and detector results.

    Parameters
    ----------
    num_images, num_categories, dets_per_image : sizes; detections per image is exact when the
        image has fewer true-positive candidates than that (the rest are false positives).
    seed : random seed.
    format : "lvis" (neg / not-exhaustive lists, r/c/f frequencies) or "coco" (``iscrowd``).
    zipf : exponent of the category frequency law p_k ∝ (k+1)^-zipf.
    score_decimals : round scores (ties across and within images, as real detectors produce);
        None keeps full precision.
    masks : add rectangle-polygon ground-truth masks and RLE result masks (for ``segm`` tests).
    detector_seed : seed of the category traits (frequencies, detector quality and score scale);
        defaults to ``seed``. Two sets with the same ``detector_seed`` and different ``seed`` are
        "the same detector on different images" (for calibration: fit on one, apply to the other).
    results_as_columns : return ``results`` as columns ``{"image_id", "category_id": (N,) int64,
        "bbox": (N, 4), "score": (N,)}`` instead of a list of dicts (large sets; no masks).
    """
    num_images = check_value(num_images, "num_images", type=int, low=0, low_open=True)
    K = check_value(num_categories, "num_categories", type=int, low=0, low_open=True)
    D = check_value(dets_per_image, "dets_per_image", type=int, low=0, low_open=True)
    if format not in ("lvis", "coco"):
        raise InputError(f"format: expected 'lvis' or 'coco', got {format!r}")
    if results_as_columns and masks:
        raise InputError("results_as_columns: masks are only written as a list of dicts")
    rng = np.random.default_rng(seed)
    traits = _category_traits(np.random.default_rng(seed if detector_seed is None else detector_seed), K, zipf)
    objects = _objects(rng, traits, num_images, image_size, format)
    lists = _federated_lists(rng, traits, objects, num_images)
    found = _candidate_detections(rng, traits, objects, lists, D, image_size)
    img, cat, box, score = _scored_detections(rng, traits, found, num_images, D, image_size, score_decimals)
    image_ids = np.arange(1, num_images + 1) * 3  # ids are not positions
    cat_ids = np.arange(1, K + 1)
    gt = _ground_truth_json(traits, objects, lists, image_ids, cat_ids, image_size, format, masks, seed)
    settings = {"num_images": num_images, "num_categories": K, "dets_per_image": D, "seed": seed,
                "format": format, "zipf": zipf, "score_decimals": score_decimals, "masks": masks,
                "detector_seed": seed if detector_seed is None else detector_seed}
    if results_as_columns:
        cols = {"image_id": image_ids[img], "category_id": cat_ids[cat], "bbox": box, "score": score}
        return SynthSet(gt, cols, settings)
    bl = box.tolist()
    sl = score.tolist()
    il = image_ids[img].tolist()
    cl = cat_ids[cat].tolist()
    results = [{"image_id": il[j], "category_id": cl[j], "bbox": bl[j], "score": sl[j]} for j in range(len(sl))]
    if masks:
        _add_result_masks(results, image_size)
    return SynthSet(gt, results, settings)


@dataclass(frozen=True)
class _Traits:
    """Per category (K,): frequency p (sums to 1), simulated training image count and LVIS frequency
    group (r < 10 <= c < 100 <= f), detector quality (how likely an object is found), score scale and bias."""

    p: np.ndarray
    train_counts: np.ndarray
    freq: np.ndarray
    quality: np.ndarray
    scale: np.ndarray
    bias: np.ndarray


def _category_traits(trng: np.random.Generator, K: int, zipf: float) -> _Traits:
    p = (np.arange(K) + 1.0) ** -zipf
    p = trng.permutation(p)  # category id order is not frequency order
    p /= p.sum()
    # simulated training image counts -> LVIS frequency groups (r < 10 <= c < 100 <= f)
    train_counts = np.maximum(1, np.round(p * 60 * K * np.exp(trng.normal(0, 0.3, K)))).astype(int)
    freq = np.where(train_counts < 10, "r", np.where(train_counts < 100, "c", "f"))
    # per-category detector traits: quality (how likely an object is found) and score scale
    quality = np.clip(0.35 + 0.5 * (np.log(train_counts) / np.log(train_counts.max() + 1)) +
                      trng.normal(0, 0.08, K), 0.05, 0.95)
    scale = np.exp(trng.normal(0, 0.4, K)) * np.where(freq == "f", 1.4, np.where(freq == "c", 1.0, 0.7))
    bias = trng.normal(0, 0.3, K) + np.where(freq == "f", 1.0, np.where(freq == "c", 0.0, -1.5))
    return _Traits(p, train_counts, freq, quality, scale, bias)


@dataclass(frozen=True)
class _Objects:
    """The G ground-truth objects: image position (G,), category position (G,), box (G, 4) xywh,
    area (G,) and crowd flag (G,)."""

    img: np.ndarray
    cat: np.ndarray
    box: np.ndarray
    area: np.ndarray
    crowd: np.ndarray


def _objects(rng: np.random.Generator, traits: _Traits, num_images: int, image_size: tuple[int, int],
             format: str) -> _Objects:
    """Present categories per image, instances per category, and their boxes."""
    H, W = image_size
    n_present = 1 + rng.poisson(2.5, num_images)
    gt_img, gt_cat = [], []
    for i in range(num_images):
        cats = np.unique(rng.choice(len(traits.p), size=n_present[i], p=traits.p))
        inst = 1 + rng.poisson(np.where(traits.freq[cats] == "f", 1.8, 0.6))
        gt_img.append(np.full(inst.sum(), i))
        gt_cat.append(np.repeat(cats, inst))
    img = np.concatenate(gt_img)
    cat = np.concatenate(gt_cat)
    G = len(img)
    side = np.exp(rng.uniform(np.log(8), np.log(300), G))
    aspect = np.exp(rng.normal(0, 0.4, G))
    gw = np.minimum(side * np.sqrt(aspect), W - 1)
    gh = np.minimum(side / np.sqrt(aspect), H - 1)
    gx = rng.uniform(0, W - gw)
    gy = rng.uniform(0, H - gh)
    gbox = np.round(np.stack([gx, gy, gw, gh], 1), 2)
    garea = np.round(gbox[:, 2] * gbox[:, 3] * rng.uniform(0.55, 1.0, G), 2)
    crowd = (rng.random(G) < 0.03) if format == "coco" else np.zeros(G, bool)
    return _Objects(img, cat, gbox, garea, crowd)


@dataclass(frozen=True)
class _Lists:
    """Per image: the categories present, the negative ones (verified absent) and the not-exhaustive ones."""

    present: list[set[int]]
    neg: list[list[int]]
    not_exhaustive: list[list[int]]


def _federated_lists(rng: np.random.Generator, traits: _Traits, objects: _Objects, num_images: int) -> _Lists:
    K = len(traits.p)
    present: list[set[int]] = [set() for _ in range(num_images)]
    for i, c in zip(objects.img.tolist(), objects.cat.tolist()):
        present[i].add(c)
    neg, nel = [], []
    for i in range(num_images):
        cand = rng.choice(K, size=min(K, 8), replace=False, p=traits.p)
        neg.append(sorted(int(c) for c in cand if c not in present[i])[:5])
        nel.append(sorted(c for c in present[i] if rng.random() < 0.1))
    return _Lists(present, neg, nel)


def _candidate_detections(rng: np.random.Generator, traits: _Traits, objects: _Objects, lists: _Lists, D: int,
                          image_size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(image, category, box, logit)`` of every candidate detection: jittered true positives (plus
    duplicates) of the objects found, wrong-class boxes near objects, background boxes filling each
    image up to D."""
    H, W = image_size
    K, G, num_images = len(traits.p), len(objects.img), len(lists.present)
    gbox, gt_img, gt_cat = objects.box, objects.img, objects.cat
    found = rng.random(G) < traits.quality[gt_cat]
    dup = found & (rng.random(G) < 0.3)
    src = np.r_[np.flatnonzero(found), np.flatnonzero(dup)]
    jit = np.where(np.arange(len(src)) < found.sum(), 0.08, 0.25)[:, None]
    tb = gbox[src].copy()
    tb[:, :2] += rng.normal(0, 1, (len(src), 2)) * jit * tb[:, 2:]
    tb[:, 2:] *= np.exp(rng.normal(0, 1, (len(src), 2)) * jit)
    t_img, t_cat = gt_img[src], gt_cat[src]
    t_logit = 1.2 + rng.normal(0, 1.0, len(src)) - 2.0 * (jit[:, 0] > 0.1)
    # wrong-class boxes near objects (confusions)
    conf_src = np.flatnonzero(rng.random(G) < 0.5)
    cb = gbox[conf_src] * np.exp(rng.normal(0, 0.05, (len(conf_src), 4)))
    c_img = gt_img[conf_src]
    c_cat = rng.choice(K, size=len(conf_src), p=traits.p)
    c_logit = -0.5 + rng.normal(0, 1.0, len(conf_src))
    # background false positives to fill each image up to D detections
    have = np.bincount(np.r_[t_img, c_img], minlength=num_images)
    need = np.maximum(D - have, 0)
    b_img = np.repeat(np.arange(num_images), need)
    nb = len(b_img)
    bside = np.exp(rng.uniform(np.log(6), np.log(250), nb))
    bw = np.minimum(bside * np.exp(rng.normal(0, 0.3, nb)), W - 1)
    bh = np.minimum(bside * np.exp(rng.normal(0, 0.3, nb)), H - 1)
    bb = np.stack([rng.uniform(0, W - bw), rng.uniform(0, H - bh), bw, bh], 1)
    # categories: half from the image's present/negative lists, half anywhere (often neither)
    b_cat = rng.choice(K, size=nb, p=traits.p)
    listed = [sorted(lists.present[i]) + lists.neg[i] for i in range(num_images)]
    pick = rng.random(nb) < 0.5
    for j in np.flatnonzero(pick):
        lst = listed[b_img[j]]
        if lst:
            b_cat[j] = lst[rng.integers(len(lst))]
    b_logit = -1.5 + rng.normal(0, 1.0, nb)
    return np.r_[t_img, c_img, b_img], np.r_[t_cat, c_cat, b_cat], np.r_[tb, cb, bb], np.r_[t_logit, c_logit, b_logit]


def _scored_detections(rng: np.random.Generator, traits: _Traits,
                       candidates: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], num_images: int, D: int,
                       image_size: tuple[int, int], score_decimals: int | None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(image, category, box, score)``: scores from the category's scale and bias, boxes clipped to
    the image, at most D detections per image (a random subset), in a shuffled file order."""
    H, W = image_size
    img, cat, box, logit = candidates
    score = 1.0 / (1.0 + np.exp(-(traits.scale[cat] * logit + traits.bias[cat])))
    # clip boxes to the image and keep sizes non-negative
    box[:, 0] = np.clip(box[:, 0], 0, W - 1)
    box[:, 1] = np.clip(box[:, 1], 0, H - 1)
    box[:, 2] = np.clip(box[:, 2], 0, W - box[:, 0])
    box[:, 3] = np.clip(box[:, 3], 0, H - box[:, 1])
    box = np.round(box, 2)
    if score_decimals is not None:  # keep scores inside (0, 1) after rounding
        step = 10.0 ** -score_decimals
        score = np.clip(np.round(score, score_decimals), step, 1 - step)
    # per image: keep at most D detections (random subset), then shuffle the file order
    order = rng.permutation(len(img))
    img, cat, box, score = img[order], cat[order], box[order], score[order]
    o2 = np.lexsort((np.arange(len(img)), img))
    starts = np.searchsorted(img[o2], np.arange(num_images))
    rank = np.empty(len(img), int)
    rank[o2] = np.arange(len(img)) - starts[img[o2]]
    keep = rank < D
    return img[keep], cat[keep], box[keep], score[keep]


def _ground_truth_json(traits: _Traits, objects: _Objects, lists: _Lists, image_ids: np.ndarray,
                       cat_ids: np.ndarray, image_size: tuple[int, int], format: str, masks: bool,
                       seed: int) -> dict[str, Any]:
    """The COCO/LVIS ground-truth dict (images with their federated lists, categories, annotations)."""
    H, W = image_size
    images = []
    for i in range(len(image_ids)):
        im = {"id": int(image_ids[i]), "height": H, "width": W}
        if format == "lvis":
            im["neg_category_ids"] = [int(cat_ids[c]) for c in lists.neg[i]]
            im["not_exhaustive_category_ids"] = [int(cat_ids[c]) for c in lists.not_exhaustive[i]]
        images.append(im)
    categories = []
    for k in range(len(cat_ids)):
        c = {"id": int(cat_ids[k]), "name": f"class{k:04d}"}
        if format == "lvis":
            c["frequency"] = str(traits.freq[k])
            c["image_count"] = int(traits.train_counts[k])
        categories.append(c)
    gb = objects.box.tolist()
    ga = objects.area.tolist()
    annotations = []
    for j in range(len(gb)):
        a = {"id": j + 1, "image_id": int(image_ids[objects.img[j]]), "category_id": int(cat_ids[objects.cat[j]]),
             "bbox": gb[j], "area": ga[j]}
        if format == "coco":
            a["iscrowd"] = int(objects.crowd[j])
        if masks:
            x, y, w, h = gb[j]
            a["segmentation"] = [[x, y, x + w, y, x + w, y + h, x, y + h]]
        annotations.append(a)
    return {"info": {"description": "vistabench synthetic LVIS-like set", "seed": seed},
            "images": images, "categories": categories, "annotations": annotations}


def _add_result_masks(results: list[dict[str, Any]], image_size: tuple[int, int]) -> None:
    """Each result's box as an RLE mask (``segmentation``), in place."""
    import pycocotools.mask as mask_utils

    H, W = image_size
    for r in results:
        x, y, w, h = r["bbox"]
        rle = mask_utils.merge(mask_utils.frPyObjects([[x, y, x + w, y, x + w, y + h, x, y + h]], H, W))
        r["segmentation"] = {"size": rle["size"], "counts": rle["counts"].decode("ascii")}
