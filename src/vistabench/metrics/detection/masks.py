"""Masks: COCO/LVIS segmentations (polygons, uncompressed or compressed RLE) turned into
pycocotools' compressed RLE, as ``LVIS.ann_to_rle`` / ``COCO.annToRLE`` do.
"""

from __future__ import annotations

from typing import Any


def to_rle(segm: Any, h: int, w: int) -> Any:
    """Polygon / uncompressed RLE / RLE -> compressed RLE (as ``LVIS.ann_to_rle``)."""
    import pycocotools.mask as mask_utils

    if isinstance(segm, list):
        return mask_utils.merge(mask_utils.frPyObjects(segm, h, w))
    if isinstance(segm.get("counts"), list):
        return mask_utils.frPyObjects(segm, h, w)
    if isinstance(segm.get("counts"), str):
        return {"size": segm["size"], "counts": segm["counts"].encode("ascii")}
    return segm
