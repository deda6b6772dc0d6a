"""A warning for results whose boxes look like corners ``[x1, y1, x2, y2]`` instead of COCO's
``[x, y, width, height]``: such boxes are scored (never converted by guess), but read as COCO boxes
they reach past the right or bottom edge of their image far more often than the ground truth's do.

>>> import numpy as np
>>> size = np.array([[100, 100]])
>>> outside_fraction(np.array([[60.0, 60.0, 90.0, 95.0]]), np.array([0]), size)
1.0
"""

from __future__ import annotations

import warnings

import numpy as np

#: pixels a box may reach past its image's edge before it counts as outside (rounding, padding)
EDGE_SLACK = 1.0
#: at least this many boxes with a known image size before the comparison means anything
MIN_BOXES = 10


def outside_fraction(box: np.ndarray, image_row: np.ndarray, image_size: np.ndarray) -> float:
    """Fraction of boxes (N, 4) ``[x, y, w, h]`` whose right or bottom edge lies more than
    :data:`EDGE_SLACK` px past their image (``image_size[image_row]``: (height, width)); images of
    unknown size (0) are left out; NaN when none is known."""
    # per image first (few), then one gather per box: no (N, 2) size rows, no copy of the boxes
    h, w = image_size[:, 0], image_size[:, 1]
    known_image = (h > 0) & (w > 0)
    if not known_image.any():
        return float("nan")
    right, bottom = w + EDGE_SLACK, h + EDGE_SLACK
    out = (box[:, 0] + box[:, 2] > right[image_row]) | (box[:, 1] + box[:, 3] > bottom[image_row])
    if not known_image.all():
        out = out[known_image[image_row]]
    return float(out.mean()) if out.size else float("nan")


def warn_if_corner_boxes(det_box: np.ndarray, det_image: np.ndarray, gt_box: np.ndarray, gt_image: np.ndarray,
                         image_size: np.ndarray | None) -> None:
    """Warn (``UserWarning``, once) when at least a quarter of the detections' boxes reach past their
    image and that share is more than three times the ground truth's plus 0.1: the results were
    probably written as corners. The message says how to convert; nothing is changed."""
    if image_size is None or len(det_box) < MIN_BOXES:
        return
    det = outside_fraction(det_box, det_image, image_size)
    if not det >= 0.25:  # NaN (no size known) stays quiet
        return
    gt = outside_fraction(gt_box, gt_image, image_size) if len(gt_box) else 0.0
    gt = 0.0 if np.isnan(gt) else gt
    if det > 3 * gt + 0.1:
        warnings.warn(f"results.bbox: {100 * det:.0f}% of the boxes reach past their image's right or bottom edge "
                      f"(ground truth: {100 * gt:.0f}%); are they corners [x1, y1, x2, y2]? COCO boxes are [x, y, "
                      f"width, height]: convert with w = x2 - x1, h = y2 - y1 (scored as given)", UserWarning,
                      stacklevel=4)
