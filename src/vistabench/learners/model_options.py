"""The keyword options of the built-in backbones, checked without building a model (no torch).

A run's ``model_opt`` mapping (``--model-opt KEY=VALUE``) is checked here when the config is built,
so ``dim=abc`` or an unknown key is one message naming the option instead of an error deep inside
torch. Values given as text (a command line) are read as the option's type.

>>> check_model_options("vit_small", {"dim": "48", "depth": 6})
{'dim': 48, 'depth': 6}
>>> check_model_options("vit_small", {"dim": "abc"})
Traceback (most recent call last):
...
vistabench.errors.InputError: model_opt: dim: expected an integer >= 1, got 'abc'
"""

from __future__ import annotations

import difflib
from typing import Any, Mapping

from ..errors import InputError

__all__ = ["MODEL_OPTIONS", "check_model_name", "check_model_options", "check_patch_size"]

#: model name -> {option: (type, lowest value)}; the keyword options of its factory in :mod:`.models`.
MODEL_OPTIONS: dict[str, dict[str, tuple[type, float | None]]] = {
    "cnn28": {"width": (int, 1)},
    "resnet32": {},
    "resnet18": {"small_input": (bool, None)},
    "resnet50": {"small_input": (bool, None)},
    "cifar_resnet34": {},
    "wrn16_8": {"dropout": (float, 0.0)},
    "vit_small": {"dim": (int, 1), "depth": (int, 1), "heads": (int, 1), "patch_size": (int, 1),
                  "mlp_ratio": (float, 0.0)},
}

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _value(model: str, key: str, value: Any, tp: type, low: float | None, name: str) -> Any:
    where = f"{name}: {key}"
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise InputError(f"{where}: expected true or false, got {value!r}")
    if tp is int:
        out: Any = None
        if isinstance(value, int) and not isinstance(value, bool):
            out = value
        elif isinstance(value, float) and value.is_integer():
            out = int(value)
        elif isinstance(value, str):
            try:
                out = int(value.strip())
            except ValueError:
                out = None
        if out is None or (low is not None and out < low):
            raise InputError(f"{where}: expected an integer >= {low:g}, got {value!r}")
        return out
    try:
        out = float(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        out = None
    if out is None or out != out or (low is not None and out < low):
        raise InputError(f"{where}: expected a number >= {low:g}, got {value!r}")
    return out


def check_model_name(model: str, name: str = "model") -> None:
    """InputError naming ``name`` (with close matches) unless ``model`` is a built-in backbone or one
    registered in :data:`vistabench.learners.models.models` (a user's model is registered by importing
    its module, which imports that registry; so the check never imports torch itself)."""
    import sys

    known = set(MODEL_OPTIONS)
    registry = sys.modules.get("vistabench.learners.models")
    if registry is not None:
        known |= set(registry.models.names())
    if model in known or (isinstance(model, str) and ":" in model):  # MODULE:FUNCTION / timm:NAME: see
        return  # vistabench.learners.external (the protocols' check_backbone_fields resolves it)
    close = difflib.get_close_matches(str(model), sorted(known), n=2, cutoff=0.5)
    hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
    raise InputError(f"{name}: unknown model {model!r}{hint} (known: {', '.join(sorted(known))})")


def check_model_options(model: str, options: Mapping[str, Any] | None, *, name: str = "model_opt") -> dict[str, Any]:
    """``options`` with values of the backbone's types; InputError naming ``name`` and the key.

    Options of a model this table does not know (one registered by a user) pass unchanged; the
    model's factory checks them.
    """
    options = dict(options or {})
    known = MODEL_OPTIONS.get(model)
    if known is None:
        return options
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=2, cutoff=0.6)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            listed = ", ".join(known) if known else "none"
            raise InputError(f"{name}: {key}: not an option of model {model!r}{hint} (its options: {listed})")
        tp, low = known[key]
        out[key] = _value(model, key, value, tp, low, name)
    if model == "vit_small":
        dim, heads = out.get("dim", 384), out.get("heads", 6)
        if dim % heads:
            raise InputError(f"{name}: dim: expected a multiple of heads={heads}, got {dim}")
    return out


def check_patch_size(model: str, options: Mapping[str, Any], image_size: int, *, data: str,
                     name: str = "model_opt") -> None:
    """A ViT patch larger than the images cannot be embedded: InputError naming the option."""
    patch = options.get("patch_size")
    if model == "vit_small" and patch is not None and int(patch) > int(image_size):
        raise InputError(f"{name}: patch_size: {patch} is larger than the {image_size}-pixel images of data "
                         f"{data!r}; give a patch_size <= {image_size}")
