"""Fixtures shared by the compat tests."""

from __future__ import annotations

import importlib.machinery
import sys
import types

import pytest


def _box_convert(boxes, in_fmt, out_fmt):
    """torchvision.ops.box_convert for the conversions torchmetrics makes (to "xywh")."""
    import torch

    if in_fmt == out_fmt:
        return boxes.clone()
    if in_fmt == "cxcywh":
        cx, cy, w, h = boxes.unbind(-1)
        boxes = torch.stack((cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h), dim=-1)
    x1, y1, x2, y2 = boxes.unbind(-1)
    return torch.stack((x1, y1, x2 - x1, y2 - y1), dim=-1)


@pytest.fixture
def torchmetrics_map(monkeypatch):
    """torchmetrics' ``detection.mean_ap`` module with torchvision's ``box_convert`` supplied (the only
    piece torchmetrics takes from torchvision, which does not import here)."""
    pytest.importorskip("torch")
    m = pytest.importorskip("torchmetrics.detection.mean_ap")
    tv, ops = types.ModuleType("torchvision"), types.ModuleType("torchvision.ops")
    tv.__spec__ = importlib.machinery.ModuleSpec("torchvision", None)
    ops.box_convert = _box_convert
    tv.ops = ops
    monkeypatch.setitem(sys.modules, "torchvision", tv)
    monkeypatch.setitem(sys.modules, "torchvision.ops", ops)
    monkeypatch.setattr(m, "_TORCHVISION_AVAILABLE", True)
    return m
