"""TIDE's error labels (Bolya et al., ECCV 2020): what went wrong with each detection and ground truth.

At one IoU threshold (``pos_iou``, TIDE's 0.5) the detections of each image are matched greedily by
descending score to the still unmatched ground truth of their category; every detection that is not
a true positive — a false positive, or one that an ignore region / an unlabelled category makes AP
ignore — gets exactly one error type, tested in TIDE's order:

1. ``Loc``  — the best IoU with ground truth of its own class is in [``bg_iou``, ``pos_iou``];
2. ``Cls``  — IoU >= ``pos_iou`` with ground truth of another class;
3. ``Dupe`` — IoU >= ``pos_iou`` with an already matched ground truth of its class;
4. ``Bkg``  — IoU <= ``bg_iou`` with every ground truth (or the image has none);
5. ``Both`` — anything else (wrong class and badly placed).

A ground truth that is neither matched nor the target of a ``Cls``/``Loc`` error whose ground truth
was unmatched is ``Miss``. Of the ``Cls``/``Loc`` errors aimed at one unmatched ground truth, the
highest-scored (the first on ties) is the one that fixing turns into a true positive
(``fixes``); the others are then dropped, as TIDE's ``BestGTMatch``.

Two matching conventions (``rules``): ``"tide"`` as tidecv 1.0.1 (the first ground truth wins ties in
IoU; a detection is ignored when its crowd IoU with an ignore region of its class is *above*
``pos_iou``), ``"official"`` as lvis-api / pycocotools (the later ground truth wins ties; ignored
ground truth is matched at IoU >= ``pos_iou`` when no other is). The ΔAP of fixing each type is in
:mod:`.error_fixes`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ...errors import InputError
from .data import Detections, GroundTruth
from .masks import to_rle
from .match import box_iou_pairs

ERROR_TYPES: tuple[str, ...] = ("Cls", "Loc", "Both", "Dupe", "Bkg", "Miss")
SPECIAL_ERROR_TYPES: tuple[str, ...] = ("FalsePos", "FalseNeg")
CLS, LOC, BOTH, DUPE, BKG = range(5)
FALSE_POSITIVE, TRUE_POSITIVE, IGNORED = 0, 1, 2
MatchRules = Literal["tide", "official"]


@dataclass
class ErrorLabels:
    """Result of :func:`classify_errors`.

    Attributes
    ----------
    det : (n,) int64 positions into the Detections that were classified (image, then descending score).
    state : (n,) int8 ``FALSE_POSITIVE`` (0), ``TRUE_POSITIVE`` (1) or ``IGNORED`` (2): what AP counts.
    error : (n,) int8 index into ``ERROR_TYPES`` (Cls, Loc, Both, Dupe, Bkg); -1 for true positives.
    target : (n,) int64 ground-truth index a ``Cls``/``Loc`` error points at (-1 otherwise).
    fixes : (n,) bool — fixing this error's type makes this detection a true positive of the
        target's category (the best-scored ``Cls``/``Loc`` error of an unmatched ground truth).
    matched : (n,) int64 ground-truth index of a true positive (-1 otherwise).
    gt_counted : (G,) bool ground truth AP counts (not an ignore region).
    gt_used : (G,) bool matched by a true positive.
    gt_missed : (G,) bool ``Miss``: counted, unmatched, and no ``Cls``/``Loc`` error can recover it.
    """

    det: np.ndarray
    state: np.ndarray
    error: np.ndarray
    target: np.ndarray
    fixes: np.ndarray
    matched: np.ndarray
    gt_counted: np.ndarray
    gt_used: np.ndarray
    gt_missed: np.ndarray

    def counts(self) -> dict[str, int]:
        """Number of errors of each type (``Miss``: ground truths)."""
        out = {t: int(np.count_nonzero(self.error == i)) for i, t in enumerate(ERROR_TYPES[:5])}
        out["Miss"] = int(np.count_nonzero(self.gt_missed))
        return out


def _iou_matrix(d: np.ndarray, g: np.ndarray, crowd: np.ndarray) -> np.ndarray:
    """(D, G) IoU as pycocotools' ``iou`` of box lists (``crowd``: (G,) bool, union = detection area)."""
    D, G = len(d), len(g)
    if D == 0 or G == 0:
        return np.zeros((D, G))
    return box_iou_pairs(np.repeat(d, G, axis=0), np.tile(g, (D, 1)), np.tile(crowd, D)).reshape(D, G)


class _Overlaps:
    """(D, G) IoU of one image's detections and ground truth: boxes, or masks through pycocotools'
    ``iou`` (RLEs converted once, as the evaluator does)."""

    def __init__(self, gt: GroundTruth, dets: Detections, segm: bool) -> None:
        self.gt, self.dets, self.segm = gt, dets, segm
        self.cache: dict[int, object] = {}
        if segm and (gt.segmentation is None or dets.segmentation is None or gt.image_size is None):
            raise InputError("iou_type='segm' needs 'segmentation' in both the ground truth and the results")

    def __call__(self, ds: np.ndarray, g: np.ndarray, crowd: np.ndarray) -> np.ndarray:
        if not self.segm:
            return _iou_matrix(self.dets.bbox[ds], self.gt.bbox[g], crowd)
        if len(ds) == 0 or len(g) == 0:
            return np.zeros((len(ds), len(g)))
        import pycocotools.mask as mask_utils

        h, w = (int(v) for v in self.gt.image_size[self.dets.image[ds[0]]])
        gr = [self.cache[i] if i in self.cache else self.cache.setdefault(i, to_rle(self.gt.segmentation[i], h, w))
              for i in g.tolist()]
        dr = [to_rle(self.dets.segmentation[i], h, w) for i in ds.tolist()]
        return np.asarray(mask_utils.iou(dr, gr, [int(c) for c in crowd]), np.float64).reshape(len(ds), len(g))


def _best(row: np.ndarray, last: bool) -> int:
    """Index of the row's maximum: the first one, or the last one on ties."""
    return len(row) - 1 - int(np.argmax(row[::-1])) if last else int(np.argmax(row))


def _check_options(pos_iou: float, bg_iou: float, rules: str, iou_type: str) -> None:
    if not 0 <= bg_iou <= pos_iou <= 1:
        raise InputError(f"bg_iou, pos_iou: expected 0 <= bg_iou <= pos_iou <= 1, got {bg_iou} and {pos_iou}")
    if rules not in ("tide", "official"):
        raise InputError(f"rules: expected 'tide' or 'official', got {rules!r}")
    if iou_type not in ("bbox", "segm"):
        raise InputError(f"iou_type: expected 'bbox' or 'segm', got {iou_type!r}")


def _greedy_matches(cls_iou: np.ndarray, pos_iou: float, last: bool) -> tuple[np.ndarray, np.ndarray]:
    """Greedy matching of one image: ``cls_iou`` (D, G) IoU of its detections (descending score) with
    its counted ground truth, 0 across classes. Each detection in turn takes the best still free
    ground truth at IoU >= ``pos_iou`` (``last``: the later one on ties). Returns the matched
    detection rows and their ground-truth columns, (M,) each."""
    rows: list[int] = []
    cols: list[int] = []
    if cls_iou.shape[1]:  # only a detection with IoU >= pos_iou somewhere can match
        free = np.ones(cls_iou.shape[1], bool)
        for k in np.flatnonzero(cls_iou.max(axis=1) >= pos_iou):
            row = np.where(free, cls_iou[k], 0.0)
            j = _best(row, last)
            if row[j] >= pos_iou:
                free[j] = False
                rows.append(int(k))
                cols.append(j)
    return np.asarray(rows, np.int64), np.asarray(cols, np.int64)


def _mark_ignored(st: np.ndarray, un: np.ndarray, r: np.ndarray, crowd: np.ndarray, pos_iou: float,
                  strict: bool) -> None:
    """Mark IGNORED (in ``st``, one image's states) the unmatched detections (``un``) that an ignore
    region of their class covers: ``r`` (D, R) their IoU with the regions (crowd IoU over the
    detection's area; 0 across classes), ``crowd`` (R,). ``strict`` (TIDE): IoU above ``pos_iou``;
    else at least ``pos_iou``, a non-crowd ignored ground truth (LVIS ``ignore``) taken once, in
    score order."""
    if strict:
        st[un & (r > pos_iou).any(axis=1)] = IGNORED
    elif crowd.all():
        st[un & (r >= pos_iou).any(axis=1)] = IGNORED
    else:
        rfree = np.ones(len(crowd), bool)
        for k in np.flatnonzero(un):
            rk = np.where(rfree | crowd, r[k], -1.0)
            if rk.max() >= pos_iou:
                st[k] = IGNORED
                j = _best(rk, True)
                rfree[j] = bool(crowd[j])


def _label_errors(err: np.ndarray, un: np.ndarray, iou: np.ndarray, same: np.ndarray, cls_iou: np.ndarray,
                  free: np.ndarray, pos_iou: float, bg_iou: float) -> tuple[np.ndarray, np.ndarray]:
    """TIDE's error type of each unmatched detection (``un``) of one image, written into ``err``:
    ``iou`` (D, G) with its counted ground truth, ``same`` (D, G) whether the classes agree,
    ``cls_iou`` = iou * same, ``free`` (G,) the ground truth left unmatched. Returns ``tj`` (D,) the
    column each ``Loc``/``Cls`` error aims at and ``hit`` (D,) which detections are such errors."""
    cmax, carg = cls_iou.max(axis=1), cls_iou.argmax(axis=1)
    other = iou * ~same
    omax, oarg = other.max(axis=1), other.argmax(axis=1)
    loc = un & (bg_iou <= cmax) & (cmax <= pos_iou)
    cls = un & ~loc & (omax >= pos_iou)
    rest = un & ~loc & ~cls
    dupe = rest & ((cls_iou * ~free).max(axis=1) >= pos_iou)
    bkg = rest & ~dupe & (iou.max(axis=1) <= bg_iou)
    err[rest] = BOTH
    err[dupe], err[bkg], err[loc], err[cls] = DUPE, BKG, LOC, CLS
    return np.where(loc, carg, oarg), loc | cls


def classify_errors(
    gt: GroundTruth,
    dets: Detections,
    keep: np.ndarray,
    *,
    ignore_unmatched: np.ndarray | None = None,
    pos_iou: float = 0.5,
    bg_iou: float = 0.1,
    rules: MatchRules = "tide",
    iou_type: str = "bbox",
) -> ErrorLabels:
    """Match at ``pos_iou`` and label every detection in ``keep`` and every ground truth.

    Parameters
    ----------
    gt, dets : ground truth (``ignore`` marks ignore regions: COCO ``iscrowd``) and detections.
    keep : (N,) bool, the detections the AP variant evaluates (its per-image / per-class cut and, for
        LVIS, the federated selection).
    ignore_unmatched : (N,) bool or None; an unmatched detection flagged here is ignored by AP (LVIS:
        a not-exhaustively annotated category; TIDE's whole-image ignore regions). Still classified.
    pos_iou, bg_iou : TIDE's foreground and background IoU thresholds (0.5, 0.1).
    rules : "tide" or "official" matching conventions (see the module docstring).
    iou_type : "bbox" or "segm" (mask IoU; both sides need ``segmentation``, as TIDE's mask mode).
    """
    _check_options(pos_iou, bg_iou, rules, iou_type)
    overlaps = _Overlaps(gt, dets, iou_type == "segm")
    last, strict = rules == "official", rules == "tide"
    idx = np.flatnonzero(keep)
    order = np.lexsort((idx, -dets.score[idx], dets.image[idx]))  # image, descending score, file order
    det = idx[order]
    n, G = len(det), len(gt)
    state = np.full(n, FALSE_POSITIVE, np.int8)
    error = np.full(n, -1, np.int8)
    target = np.full(n, -1, np.int64)
    matched = np.full(n, -1, np.int64)
    fixes = np.zeros(n, bool)
    counted = ~gt.ignore
    used = np.zeros(G, bool)
    usable = np.zeros(G, bool)
    flag = np.zeros(len(dets), bool) if ignore_unmatched is None else np.asarray(ignore_unmatched, bool)
    if len(flag) != len(dets) or len(keep) != len(dets):
        raise InputError(f"keep, ignore_unmatched: expected {len(dets)} values each (one per detection)")
    g_order = np.argsort(gt.image, kind="stable")
    g_lo = np.searchsorted(gt.image[g_order], np.arange(gt.num_images), "left")
    g_hi = np.searchsorted(gt.image[g_order], np.arange(gt.num_images), "right")
    d_img = dets.image[det]
    starts = np.flatnonzero(np.r_[True, d_img[1:] != d_img[:-1]]) if n else np.zeros(0, np.int64)
    for s, e in zip(starts, np.r_[starts[1:], n]):
        im = int(d_img[s])
        gall = g_order[g_lo[im]:g_hi[im]]
        gi = gall[counted[gall]]  # this image's counted ground truth, file order
        gr = gall[~counted[gall]]  # its ignore regions
        ds = det[s:e]
        st = state[s:e]  # views: written in place
        dcls = dets.category[ds]
        iou = overlaps(ds, gi, np.zeros(len(gi), bool))
        same = dcls[:, None] == gt.category[gi][None, :]
        cls_iou = iou * same
        rows, cols = _greedy_matches(cls_iou, pos_iou, last)
        st[rows], matched[s + rows] = TRUE_POSITIVE, gi[cols]
        free = np.ones(len(gi), bool)
        free[cols] = False
        un = st != TRUE_POSITIVE
        if len(gr):  # ignore regions of the detection's class (crowd IoU over the detection's area)
            r = overlaps(ds, gr, gt.crowd[gr]) * (dcls[:, None] == gt.category[gr][None, :])
            _mark_ignored(st, un, r, gt.crowd[gr], pos_iou, strict)
        st[un & (st != IGNORED) & flag[ds]] = IGNORED
        used[gi[~free]] = True
        err = error[s:e]
        if not len(gi):
            err[un] = BKG
            continue
        tj, hit = _label_errors(err, un, iou, same, cls_iou, free, pos_iou, bg_iou)
        aimed = np.flatnonzero(hit & free[tj])  # at an unmatched ground truth: it can be recovered
        target[s:e][hit] = gi[tj[hit]]
        if len(aimed):
            usable[gi[tj[aimed]]] = True
            # per target, the highest score wins; on ties the first in this (descending score) order
            o = aimed[np.lexsort((aimed, -dets.score[ds[aimed]], tj[aimed]))]
            first = np.r_[True, tj[o][1:] != tj[o][:-1]]
            fixes[s + o[first]] = True
    # ground truth of images without any kept detection is simply unmatched
    missed = counted & ~used & ~usable
    return ErrorLabels(det=det, state=state, error=error, target=target, fixes=fixes, matched=matched,
                       gt_counted=counted, gt_used=used, gt_missed=missed)
