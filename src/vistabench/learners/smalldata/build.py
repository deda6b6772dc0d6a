"""Build a small-data method: the seeded backbone, then the method's changes and loss."""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

from ...errors import InputError
from ..models import build_model
from .registry import MethodContext, SmallDataMethod, get_method

__all__ = ["build_method"]

_TRAINER_PARAMS = ("lr", "weight_decay", "batch_size")


def build_method(method: str | SmallDataMethod, model_name: str, params: dict[str, Any], *, num_classes: int,
                 in_channels: int, image_size: int | None, seed: int,
                 model_options: dict[str, Any] | None = None,
                 pretrained: str | None = None) -> tuple[nn.Module, Callable | None]:
    """Backbone ``model_name`` (seeded, ``model_options`` such as ``small_input``) with ``method``
    applied using the hyper-parameters in ``params`` (one trial's configuration; a method option it
    lacks takes its default, unless that default is a search range). ``pretrained``: a state dict
    loaded into the backbone before the method changes it (:func:`~..models.build_model`)."""
    m = get_method(method) if isinstance(method, str) else method
    defaults = {i.name: i.default for i in m.options.fields_info()}  # gem's values where fixed
    # a method option named like a common hyper-parameter (grad_l2's weight_decay) is the trainer's, not the builder's
    missing = [k for k, v in defaults.items() if k not in params and isinstance(v, dict) and k not in _TRAINER_PARAMS]
    if missing:
        raise InputError(f"params for method {m.name!r}: missing hyper-parameters {missing} (searched: give a value)")
    params = {**defaults, **params}
    base = build_model(model_name, num_classes=num_classes, in_channels=in_channels, image_size=image_size,
                       seed=seed, pretrained=pretrained, **(model_options or {}))
    ctx = MethodContext(model=model_name, num_classes=num_classes, in_channels=in_channels,
                        image_size=image_size, seed=seed)
    fn = m.build_fn()
    if fn is None:
        return base, None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 7919)  # layers a method adds are seeded too
        return fn(base, params, ctx)
