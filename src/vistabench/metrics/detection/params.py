"""The official tools' evaluation parameters (lvis-api 0.5.3 / pycocotools), shared by every phase.

* ``IOU_THRESHOLDS`` — 0.50:0.05:0.95 (T = 10), computed as both tools do (``np.linspace``);
* ``RECALL_THRESHOLDS`` — 0:0.01:1 (R = 101);
* ``AREA_RANGES`` / ``AREA_LABELS`` — all, small (< 32²), medium (32²..96²), large (> 96²);
* ``COCO_MAX_DETS`` — pycocotools' maxDets 1/10/100 per image *and category*;
* ``LVIS_MAX_DETS`` — lvis-api's 300 detections per image;
* ``KEYPOINT_AREA_RANGES`` / ``KEYPOINT_AREA_LABELS`` / ``KEYPOINT_MAX_DETS`` — pycocotools'
  keypoint parameters (``setKpParams``): all, medium, large; 20 detections per image and category;
* ``IouType`` — "bbox", "segm" or "keypoints" (OKS, :mod:`.oks`).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

IOU_THRESHOLDS = np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1, endpoint=True)
RECALL_THRESHOLDS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1, endpoint=True)
AREA_RANGES = np.array([[0 ** 2, 1e5 ** 2], [0 ** 2, 32 ** 2], [32 ** 2, 96 ** 2], [96 ** 2, 1e5 ** 2]], float)
AREA_LABELS: tuple[str, ...] = ("all", "small", "medium", "large")
COCO_MAX_DETS: tuple[int, ...] = (1, 10, 100)
LVIS_MAX_DETS = 300
KEYPOINT_AREA_RANGES = np.array([[0 ** 2, 1e5 ** 2], [32 ** 2, 96 ** 2], [96 ** 2, 1e5 ** 2]], float)
KEYPOINT_AREA_LABELS: tuple[str, ...] = ("all", "medium", "large")
KEYPOINT_MAX_DETS: tuple[int, ...] = (20,)
IouType = Literal["bbox", "segm", "keypoints"]
