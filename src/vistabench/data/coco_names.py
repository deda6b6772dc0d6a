"""What a COCO / LVIS ground-truth file calls its data set, for naming records: its own metadata first
(``info.description``, else a top-level ``dataset`` name), the file's name only as the fallback.

Only the start of the file is read (official files begin with ``info``), so naming a 1 GB LVIS file
costs a few kilobytes of reading, never a parse of the whole file.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

__all__ = ["ground_truth_name", "record_dataset_name"]

#: how much of the file is searched for its ``info`` object
HEAD_BYTES = 1 << 16
_KEY = re.compile(r'"(info|dataset)"\s*:\s*')


def ground_truth_name(path: str | os.PathLike[str]) -> str | None:
    """The data set's name from a ground-truth JSON's own metadata, or None (unreadable, or no name).

    ``info.description`` when it is a non-empty text, else a top-level ``"dataset"`` text (or its
    ``name``), searched in the first :data:`HEAD_BYTES` bytes; surrounding spaces removed.

    >>> import json, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "gt.json")
    >>> _ = open(p, "w").write(json.dumps({"info": {"description": "COCO 2017 Dataset"}, "images": []}))
    >>> ground_truth_name(p)
    'COCO 2017 Dataset'
    """
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    decoder = json.JSONDecoder()
    found: dict[str, object] = {}
    for m in _KEY.finditer(head):
        if m.group(1) in found:
            continue
        try:
            found[m.group(1)], _ = decoder.raw_decode(head, m.end())
        except ValueError:  # cut off by the read, or not a value: not usable
            continue
    info, dataset = found.get("info"), found.get("dataset")
    for value in ((info or {}).get("description") if isinstance(info, dict) else None,
                  dataset.get("name") if isinstance(dataset, dict) else dataset):
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return None


def record_dataset_name(gt: str | os.PathLike[str]) -> str:
    """A record's default data-set name: :func:`ground_truth_name`, else the file's name without extension."""
    return ground_truth_name(gt) or Path(gt).stem
