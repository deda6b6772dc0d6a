"""Build a small-data method: the seeded backbone, then the method's changes and loss."""

from __future__ import annotations

from typing import Any, Callable

from torch import nn

from ...errors import InputError
from ..lanes import seeded
from ..models import build_model
from ..recipe import Recipe
from ...methods import get_method
from .registry import MethodContext, SmallDataMethod

__all__ = ["build_method", "reset_multiband_stem"]

_TRAINER_PARAMS = ("lr", "weight_decay", "batch_size")


def build_method(method: str | SmallDataMethod, recipe: Recipe, params: dict[str, Any], *, num_classes: int,
                 in_channels: int, image_size: int | None, seed: int,
                 model_options: dict[str, Any] | None = None,
                 stem_init: str = "kaiming") -> tuple[nn.Module, Callable | None]:
    """The backbone of the run's ``recipe`` (``recipe.model``, seeded, ``model_options`` such as
    ``small_input``) with ``method`` applied using the hyper-parameters in ``params`` (one trial's
    configuration; a method option it lacks takes its default, unless that default is a search range).
    ``recipe.pretrained``: a state dict loaded into the backbone before the method changes it
    (:func:`~..models.build_model`). The builder gets the recipe in its :class:`~.registry.MethodContext`.
    ``stem_init="default"`` (the ``gem`` recipe): an ImageNet stem on other than 3 input bands keeps
    PyTorch's default initialisation (:func:`reset_multiband_stem`)."""
    m = get_method("smalldata", method) if isinstance(method, str) else method
    defaults = {i.name: i.default for i in m.options.fields_info()}  # gem's values where fixed
    # a method option named like a common hyper-parameter (grad_l2's weight_decay) is the trainer's, not the builder's
    missing = [k for k, v in defaults.items() if k not in params and isinstance(v, dict) and k not in _TRAINER_PARAMS]
    if missing:
        raise InputError(f"params for method {m.name!r}: missing hyper-parameters {missing} (searched: give a value)")
    params = {**defaults, **params}
    base = build_model(recipe.model, num_classes=num_classes, in_channels=in_channels, image_size=image_size,
                       seed=seed, pretrained=recipe.pretrained, **(model_options or {}))
    ctx = MethodContext(recipe=recipe, num_classes=num_classes, in_channels=in_channels, image_size=image_size,
                        seed=seed)
    fn = m.build_fn()
    if fn is None:
        model, loss = base, None
    else:
        with seeded(seed + 7919):  # layers a method adds are seeded too
            model, loss = fn(base, params, ctx)
    if stem_init == "default" and recipe.pretrained is None:
        with seeded(seed + 104729):
            reset_multiband_stem(model)
    return model, loss


def reset_multiband_stem(model: nn.Module) -> bool:
    """gem's ImageNet ResNet on other than 3 bands (``architectures/rn.py``, ``build_architecture``):
    torchvision's 3-band ``conv1`` is replaced by a new 7 x 7/2 conv after the network's init, so it
    keeps PyTorch's default initialisation. Resets ``model``'s first convolution when it is such a
    stem (7 x 7, stride 2, in-channels ≠ 3); returns whether it did."""
    first = next((m for m in model.modules() if isinstance(m, nn.Conv2d)), None)
    if first is None or first.kernel_size != (7, 7) or first.stride != (2, 2) or first.in_channels == 3:
        return False
    first.reset_parameters()
    return True
