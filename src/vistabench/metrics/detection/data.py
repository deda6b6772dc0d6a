"""Array containers for detection ground truth and detections (numpy only).

Both hold *indices* into the ground truth's sorted image and category id lists, so evaluation never
looks up dictionaries. The JSON readers live in :mod:`vistabench.data.coco`; these classes can also
be built directly from arrays (:meth:`GroundTruth.from_arrays`, :meth:`Detections.from_ids`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..._validation import check_array
from ...errors import InputError
from .masks import check_segmentations
from .sort import sorted_unique

GtFormat = Literal["lvis", "coco"]
FREQUENCIES: tuple[str, ...] = ("r", "c", "f")


def _ids(x: Any, name: str) -> np.ndarray:
    return check_array(x, name, ndim=1, kind="integer").astype(np.int64, copy=False)


def _boxes(x: Any, name: str, n: int) -> np.ndarray:
    a = check_array(np.asarray(x, dtype=np.float64).reshape(-1, 4) if n == 0 else x, name, ndim=2,
                    kind="float")
    if a.shape != (n, 4):
        raise InputError(f"{name}: expected shape ({n}, 4) [x, y, w, h], got {a.shape}")
    neg = np.flatnonzero((a[:, 2] < 0) | (a[:, 3] < 0))
    if neg.size:
        raise InputError(f"{name}: box {int(neg[0])} has a negative width or height ({a[neg[0]].tolist()})")
    return a


def _keypoints(x: Any, name: str, n: int, what: str = "annotation") -> np.ndarray:
    """(n, K, 3) float64 keypoints from an array or n flat lists (validated, one line on error)."""
    from .oks import keypoint_array

    if isinstance(x, np.ndarray) and x.ndim == 3:
        a = check_array(x, name, ndim=3, kind="float").astype(np.float64, copy=False)
        if a.shape[0] != n or a.shape[2] != 3:
            raise InputError(f"{name}: expected shape ({n}, K, 3), got {a.shape}")
        return a
    a = keypoint_array(list(x), name, what)
    if len(a) != n:
        raise InputError(f"{name}: expected {n} keypoint lists, got {len(a)}")
    return a


def _index_of(ids: np.ndarray, sorted_ids: np.ndarray, name: str, what: str) -> np.ndarray:
    """Positions of ``ids`` in ``sorted_ids``; unknown ids raise naming the first one."""
    if len(ids) > 4 * len(sorted_ids) and len(sorted_ids) and 0 <= sorted_ids[0] and sorted_ids[-1] < 4 * len(ids):
        # small non-negative ids (the usual case): one table look-up per entry instead of a binary search
        table = np.full(int(sorted_ids[-1]) + 2, -1, np.int64)
        table[sorted_ids] = np.arange(len(sorted_ids))
        pos = table[np.clip(ids, -1, int(sorted_ids[-1]) + 1)]
        if np.all(pos >= 0):
            return pos
    pos = np.searchsorted(sorted_ids, ids)
    pos_c = np.minimum(pos, max(len(sorted_ids) - 1, 0))
    bad = (pos >= len(sorted_ids)) | (sorted_ids[pos_c] != ids) if len(sorted_ids) else np.ones(len(ids), bool)
    if np.any(bad):
        nbad = int(np.count_nonzero(bad))
        first = int(ids[np.flatnonzero(bad)[0]])
        raise InputError(f"{name}: {nbad} of {len(ids)} entries have {what} ids not in the ground truth "
                         f"(first: {first}); is this the right ground-truth file?")
    return pos.astype(np.int64)


@dataclass
class GroundTruth:
    """COCO- or LVIS-style ground truth as arrays.

    Attributes
    ----------
    format : "lvis" or "coco"
        Selects lvis-api semantics (federated negatives, not-exhaustive lists, ``ignore`` flags,
        r/c/f frequencies, 300 detections per image) or pycocotools semantics (``iscrowd``,
        maxDets 1/10/100 per image and category).
    image_ids, category_ids : (I,), (K,) int64, sorted ascending, unique.
    frequency : (K,) str array of "r"/"c"/"f" (LVIS) or None (COCO).
    image, category : (G,) int64 indices into ``image_ids`` / ``category_ids`` per annotation.
    bbox : (G, 4) float64 ``[x, y, w, h]``;  area : (G,) float64 (the file's ``area`` field).
    ignore : (G,) bool; LVIS: the optional ``ignore`` field; COCO: ``iscrowd`` (as pycocotools).
    crowd : (G,) bool; COCO ``iscrowd`` (crowd regions may be matched many times; IoU over the
        detection's area). Always False for LVIS.
    ann_id : (G,) int64 annotation ids (kept for reference; evaluation does not use them).
    negative, not_exhaustive : sorted int64 keys ``image * K + category`` (LVIS only; empty for COCO).
    segmentation : list of G RLE dicts (only when read for ``segm``), else None.
    keypoints : (G, K, 3) float64 ``(x, y, v)`` per keypoint (only when read for ``keypoints``), else None.
    num_keypoints : (G,) int64 the file's ``num_keypoints`` (0: ignored by OKS evaluation), else None.
    image_size : (I, 2) int64 (height, width) or None.
    """

    format: GtFormat
    image_ids: np.ndarray
    category_ids: np.ndarray
    frequency: np.ndarray | None
    image: np.ndarray
    category: np.ndarray
    bbox: np.ndarray
    area: np.ndarray
    ignore: np.ndarray
    crowd: np.ndarray
    ann_id: np.ndarray
    negative: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    not_exhaustive: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    segmentation: list | None = None
    image_size: np.ndarray | None = None
    category_names: list[str] | None = None
    keypoints: np.ndarray | None = None
    num_keypoints: np.ndarray | None = None

    @property
    def num_images(self) -> int:
        return len(self.image_ids)

    @property
    def num_categories(self) -> int:
        return len(self.category_ids)

    def __len__(self) -> int:
        return len(self.image)

    def subset(self, keep: np.ndarray) -> GroundTruth:
        """The same images and categories with only the annotations where ``keep`` (bool, (G,))."""
        return self.take(np.flatnonzero(keep))

    def take(self, idx: np.ndarray) -> GroundTruth:
        """The same images and categories with the annotations at positions ``idx``, in that order."""
        from dataclasses import replace

        seg = None if self.segmentation is None else [self.segmentation[i] for i in idx]
        return replace(self, image=self.image[idx], category=self.category[idx], bbox=self.bbox[idx],
                       area=self.area[idx], ignore=self.ignore[idx], crowd=self.crowd[idx],
                       ann_id=self.ann_id[idx], segmentation=seg,
                       keypoints=None if self.keypoints is None else self.keypoints[idx],
                       num_keypoints=None if self.num_keypoints is None else self.num_keypoints[idx])

    @classmethod
    def from_arrays(
        cls,
        *,
        format: GtFormat,
        image_ids: Sequence[int] | np.ndarray,
        category_ids: Sequence[int] | np.ndarray,
        image_id: Sequence[int] | np.ndarray,
        category_id: Sequence[int] | np.ndarray,
        bbox: Any,
        area: Any | None = None,
        ignore: Any | None = None,
        iscrowd: Any | None = None,
        ann_id: Any | None = None,
        frequency: Sequence[str] | None = None,
        negative: dict[int, Sequence[int]] | None = None,
        not_exhaustive: dict[int, Sequence[int]] | None = None,
        segmentation: list | None = None,
        image_size: Any | None = None,
        category_names: list[str] | None = None,
        keypoints: Any | None = None,
        num_keypoints: Any | None = None,
    ) -> GroundTruth:
        """Build and validate ground truth from per-annotation arrays keyed by the dataset's ids.

        ``negative`` / ``not_exhaustive`` map an image id to category ids (LVIS
        ``neg_category_ids`` / ``not_exhaustive_category_ids``). ``area`` defaults to ``w * h``.
        ``keypoints``: (G, K, 3) or G flat ``[x1, y1, v1, ...]`` lists; ``num_keypoints`` defaults
        to the number of visible (v > 0) keypoints.
        """
        if format not in ("lvis", "coco"):
            raise InputError(f"format: expected 'lvis' or 'coco', got {format!r}")
        img_ids = _ids(image_ids, "image_ids")
        cat_ids = _ids(category_ids, "category_ids")
        order_i, order_c = np.argsort(img_ids, kind="stable"), np.argsort(cat_ids, kind="stable")
        if len(sorted_unique(img_ids)) != len(img_ids):
            raise InputError("image_ids: duplicate image ids in the ground truth")
        if len(sorted_unique(cat_ids)) != len(cat_ids):
            raise InputError("category_ids: duplicate category ids in the ground truth")
        img_sorted, cat_sorted = img_ids[order_i], cat_ids[order_c]
        iid, cid = _ids(image_id, "annotations.image_id"), _ids(category_id, "annotations.category_id")
        n = len(iid)
        if len(cid) != n:
            raise InputError(f"annotations: {n} image ids but {len(cid)} category ids")
        img = _index_of(iid, img_sorted, "annotations", "image")
        cat = _index_of(cid, cat_sorted, "annotations", "category")
        box = _boxes(bbox, "annotations.bbox", n)
        ar = box[:, 2] * box[:, 3] if area is None else check_array(area, "annotations.area", ndim=1, kind="float")
        if len(ar) != n:
            raise InputError(f"annotations.area: expected {n} values, got {len(ar)}")
        crowd = np.zeros(n, bool) if iscrowd is None else check_array(iscrowd, "annotations.iscrowd", ndim=1).astype(bool)
        ign = np.zeros(n, bool) if ignore is None else check_array(ignore, "annotations.ignore", ndim=1).astype(bool)
        if format == "coco":
            ign = crowd.copy()  # pycocotools: gt['ignore'] = 'iscrowd' in gt and gt['iscrowd']
        else:
            crowd = np.zeros(n, bool)  # lvis-api passes iscrowd=False to the IoU
        aid = np.arange(1, n + 1, dtype=np.int64) if ann_id is None else _ids(ann_id, "annotations.id")
        freq = _frequencies(frequency, len(cat_ids))[order_c] if format == "lvis" else None
        size = None
        if image_size is not None:
            size = check_array(image_size, "image_size", ndim=2, kind="integer")[order_i].astype(np.int64)
        if segmentation is not None:
            if len(segmentation) != n:
                raise InputError(f"annotations.segmentation: expected {n} masks, got {len(segmentation)}")
            if size is None:
                raise InputError("image_size: masks need each image's (height, width)")
            check_segmentations(segmentation, what="annotation", sizes=size[img], image_ids=iid)
        names = None if category_names is None else [category_names[i] for i in order_c]
        kp, nk = (None, None) if keypoints is None else _keypoint_columns(keypoints, num_keypoints, n)
        return cls(format=format, image_ids=img_sorted, category_ids=cat_sorted, frequency=freq,
                   image=img, category=cat, bbox=box, area=ar.astype(np.float64), ignore=ign, crowd=crowd,
                   ann_id=aid, negative=_pair_keys(negative, img_sorted, cat_sorted, "neg_category_ids"),
                   not_exhaustive=_pair_keys(not_exhaustive, img_sorted, cat_sorted, "not_exhaustive_category_ids"),
                   segmentation=segmentation, image_size=size, category_names=names, keypoints=kp,
                   num_keypoints=nk)


def _frequencies(frequency: Sequence[str] | None, num_categories: int) -> np.ndarray:
    """LVIS's frequency group (r/c/f) of each category, in the category list's order, checked."""
    if frequency is None:
        raise InputError("categories: LVIS ground truth needs a 'frequency' (r/c/f) per category")
    freq = np.asarray(list(frequency), dtype="<U1")
    if len(freq) != num_categories:
        raise InputError(f"categories.frequency: expected {num_categories} values, got {len(freq)}")
    bad = ~np.isin(freq, FREQUENCIES)
    if np.any(bad):
        raise InputError(f"categories.frequency: expected 'r', 'c' or 'f', got {freq[bad][0]!r}")
    return freq


def _pair_keys(m: dict[int, Sequence[int]] | None, img_sorted: np.ndarray, cat_sorted: np.ndarray,
               what: str) -> np.ndarray:
    """Sorted ``image index * K + category index`` of an image id -> category ids mapping (LVIS's
    ``neg_category_ids`` / ``not_exhaustive_category_ids``); an unknown image id is an error, a
    category absent from the category list is dropped (it cannot be detected)."""
    if not m:
        return np.zeros(0, np.int64)
    ii, cc = [], []
    for k, v in m.items():
        v = list(v)
        ii.extend([k] * len(v))
        cc.extend(v)
    ii_a, cc_a = np.asarray(ii, np.int64), np.asarray(cc, np.int64)
    ii_idx = _index_of(ii_a, img_sorted, what, "image")
    K = len(cat_sorted)
    pos = np.searchsorted(cat_sorted, cc_a)
    ok = (pos < K) & (cat_sorted[np.minimum(pos, K - 1)] == cc_a) if K else np.zeros(len(cc_a), bool)
    return sorted_unique(ii_idx[ok] * K + pos[ok])


def _keypoint_columns(keypoints: Any, num_keypoints: Any | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(G, K, 3) keypoints and (G,) int64 counts of labelled ones (default: those with v > 0)."""
    kp = _keypoints(keypoints, "annotations.keypoints", n)
    nk = (np.count_nonzero(kp[:, :, 2] > 0, axis=1) if num_keypoints is None
          else check_array(num_keypoints, "annotations.num_keypoints", ndim=1, kind="integer"))
    if len(nk) != n:
        raise InputError(f"annotations.num_keypoints: expected {n} values, got {len(nk)}")
    return kp, nk.astype(np.int64)


@dataclass
class Detections:
    """Detections in file order, as indices into a :class:`GroundTruth`'s id lists.

    Attributes
    ----------
    image, category : (N,) int64 indices into ``gt.image_ids`` / ``gt.category_ids``.
    bbox : (N, 4) float64 ``[x, y, w, h]``; score : (N,) float64, finite.
    area : (N,) float64; ``w * h`` of the box when the result has a box (as both official tools do,
        even for masks), else the mask area.
    segmentation : list of N RLE dicts or None.
    keypoints : (N, K, 3) float64 ``(x, y, v)`` per keypoint, or None.
    """

    image: np.ndarray
    category: np.ndarray
    bbox: np.ndarray
    score: np.ndarray
    area: np.ndarray
    segmentation: list | None = None
    keypoints: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.score)

    def subset(self, idx: np.ndarray) -> Detections:
        """The detections at positions ``idx`` (in that order)."""
        seg = None if self.segmentation is None else [self.segmentation[i] for i in idx]
        return Detections(self.image[idx], self.category[idx], self.bbox[idx], self.score[idx],
                          self.area[idx], seg, None if self.keypoints is None else self.keypoints[idx])

    def with_scores(self, score: np.ndarray) -> Detections:
        """Same detections with new scores (validated finite, same length)."""
        s = check_array(score, "score", ndim=1, kind="float")
        if len(s) != len(self):
            raise InputError(f"score: expected {len(self)} values, got {len(s)}")
        return Detections(self.image, self.category, self.bbox, s, self.area, self.segmentation, self.keypoints)

    @classmethod
    def empty(cls) -> Detections:
        z = np.zeros(0, np.int64)
        return cls(z, z.copy(), np.zeros((0, 4)), np.zeros(0), np.zeros(0))

    @classmethod
    def from_ids(
        cls,
        gt: GroundTruth,
        *,
        image_id: Any,
        category_id: Any,
        bbox: Any,
        score: Any,
        segmentation: list | None = None,
        area: Any | None = None,
        keypoints: Any | None = None,
    ) -> Detections:
        """Validate detections given by dataset ids against ``gt`` (unknown ids are an error).
        ``keypoints``: (N, K, 3) or N flat ``[x1, y1, v1, ...]`` lists (K as the ground truth's)."""
        iid = _ids(image_id, "results.image_id")
        cid = _ids(category_id, "results.category_id")
        n = len(iid)
        if len(cid) != n:
            raise InputError(f"results: {n} image ids but {len(cid)} category ids")
        sc = check_array(score, "results.score", ndim=1, kind="float")
        if len(sc) != n:
            raise InputError(f"results.score: expected {n} values, got {len(sc)}")
        box = _boxes(bbox, "results.bbox", n)
        img = _index_of(iid, gt.image_ids, "results", "image")
        cat = _index_of(cid, gt.category_ids, "results", "category")
        if segmentation is not None:
            if len(segmentation) != n:
                raise InputError(f"results.segmentation: expected {n} masks, got {len(segmentation)}")
            has = [i for i, x in enumerate(segmentation) if x is not None]  # None: a result without a mask
            if has:
                if gt.image_size is None:
                    raise InputError("results.segmentation: masks need the ground truth's image sizes (image_size)")
                idx = np.asarray(has, np.int64)
                segs = segmentation if len(has) == n else [segmentation[i] for i in has]
                check_segmentations(segs, what="detection", sizes=gt.image_size[img[idx]], image_ids=iid[idx],
                                    positions=idx)
        ar = box[:, 2] * box[:, 3] if area is None else check_array(area, "results.area", ndim=1, kind="float")
        kp = None
        if keypoints is not None:
            kp = _keypoints(keypoints, "results.keypoints", n, what="detection")
            if gt.keypoints is not None and n and len(gt) and kp.shape[1] != gt.keypoints.shape[1]:
                raise InputError(f"results.keypoints: detections have {kp.shape[1]} keypoints each, the ground "
                                 f"truth's annotations {gt.keypoints.shape[1]}; they must be the same keypoints")
        from .box_format import warn_if_corner_boxes

        warn_if_corner_boxes(box, img, gt.bbox, gt.image, gt.image_size)
        return cls(img, cat, box, sc, ar.astype(np.float64, copy=False), segmentation, kp)

