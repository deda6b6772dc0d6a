"""Backbones from outside the registry: ``MODULE:FUNCTION`` factories, ``timm:NAME``, pretrained files.

A model name with a colon names a factory instead of a registered backbone:

- ``MODULE:FUNCTION`` — any importable callable returning an ``nn.Module`` (a module not on the path
  is looked for in the current folder too); it is called with the
  number of classes and input channels under the names its signature uses (``num_classes`` /
  ``classes`` / ``n_classes``; ``in_chans`` / ``in_channels`` / ``channels``) and the image side if it
  takes ``img_size`` / ``image_size`` (``timm.models:resnet18`` works as it is).
- ``timm:NAME`` — short for ``timm.create_model(NAME, num_classes=..., in_chans=...)``.

The network is wrapped in :class:`ExternalBackbone`, which gives it the split every method relies on
(``features(x)`` → (N, D), ``classifier`` an ``nn.Linear(D, C)``, ``feature_dim``): with timm's
``forward_features`` + ``forward_head(pre_logits=True)`` when the network has them, otherwise by the
last ``nn.Linear`` with ``C`` outputs among its direct or nested attributes, which is taken out and
replaced by an identity so that the rest of the network computes the features. A network without
such a head is refused in one line naming the model.

:func:`load_pretrained` loads a local ``.safetensors`` or ``.pt``/``.pth`` state dict into a model,
leaving out the tensors of the classifier head (it has the data's classes).
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from .._lazy import import_named, lazy_import
from ..errors import InputError

__all__ = ["ExternalBackbone", "build_external", "is_external", "load_pretrained", "resolve_factory"]

_CLASSES = ("num_classes", "n_classes", "classes", "num_outputs")
_CHANNELS = ("in_chans", "in_channels", "channels", "in_ch", "num_channels")
_SIZE = ("img_size", "image_size", "input_size")


def is_external(name: object) -> bool:
    """Whether a model name names a factory (``MODULE:FUNCTION`` or ``timm:NAME``)."""
    return isinstance(name, str) and ":" in name


def resolve_factory(name: str) -> Callable[..., Any]:
    """The callable a ``MODULE:FUNCTION`` / ``timm:NAME`` model names; InputError in one line otherwise."""
    module, _, attr = name.partition(":")
    if not module or not attr:
        raise InputError(f"model: expected MODULE:FUNCTION or timm:NAME, got {name!r}")
    if module == "timm":
        try:
            timm = lazy_import("timm")
        except Exception as exc:  # timm missing, or its torchvision not loading against this torch
            raise InputError(f"model: {name!r} needs timm, which does not import here "
                             f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                             "pip install timm") from exc
        if attr not in timm.list_models():
            raise InputError(f"model: timm has no model {attr!r} (timm.list_models() lists them)")

        def create(num_classes: int, in_chans: int) -> nn.Module:
            return timm.create_model(attr, num_classes=num_classes, in_chans=in_chans)
        return create
    try:
        mod = _import(module)
    except Exception as exc:
        raise InputError(f"model: cannot import module {module!r} of {name!r} "
                         f"({type(exc).__name__}: {exc})") from exc
    obj: Any = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InputError(f"model: module {module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise InputError(f"model: {name!r} is a {type(obj).__name__}, not a callable that returns an nn.Module")
    return obj


def _import(module: str) -> Any:
    """Import ``module``; a module not found is looked for in the current folder too (as ``python -m``
    and ``python script.py`` would: the ``vistabench`` command's own path does not hold the folder)."""
    try:
        return import_named(module)
    except ModuleNotFoundError as exc:
        top = module.split(".")[0]
        here = str(Path.cwd())
        if exc.name != top or here in sys.path:
            raise
        sys.path.append(here)
        try:
            return import_named(module)
        except ModuleNotFoundError as again:
            if again.name == top:
                sys.path.remove(here)
            raise


def _arguments(factory: Callable[..., Any], name: str, num_classes: int, in_channels: int,
               image_size: int | None) -> dict[str, Any]:
    """The keyword arguments of ``factory`` for the classes, channels and image size, by its names."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin without a signature: the common names
        return {"num_classes": num_classes, "in_chans": in_channels}
    accepts_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    named = {k for k, p in params.items() if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                        inspect.Parameter.KEYWORD_ONLY)}
    kw: dict[str, Any] = {}
    classes = next((k for k in _CLASSES if k in named), None)
    if classes is None:
        if not accepts_kw:
            raise InputError(f"model: factory {name!r} takes no number of classes (a parameter named "
                             f"{' or '.join(_CLASSES)}); its signature is {inspect.signature(factory)}")
        classes = "num_classes"
    kw[classes] = num_classes
    channels = next((k for k in _CHANNELS if k in named), None)
    if channels is not None:
        kw[channels] = in_channels
    elif accepts_kw:
        kw["in_chans"] = in_channels
    elif in_channels != 3:
        raise InputError(f"model: factory {name!r} takes no number of input channels (a parameter named "
                         f"{' or '.join(_CHANNELS)}) and the data have {in_channels}, not 3")
    size = next((k for k in _SIZE if k in named), None)
    if size is not None and image_size is not None:
        kw[size] = image_size
    required = [k for k, p in params.items() if p.default is inspect.Parameter.empty
                and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
                and k not in kw]
    if required:
        raise InputError(f"model: factory {name!r} requires {', '.join(required)}, which vistabench cannot give "
                         f"(it passes the number of classes, input channels and image size); wrap it")
    return kw


class ExternalBackbone(nn.Module):
    """A network from a factory with the Backbone interface: ``features``, ``classifier``, ``feature_dim``.

    ``forward(x) = classifier(features(x))``. ``net`` is the wrapped network; with timm's interface
    (``forward_features``, ``forward_head``, ``get_classifier``) its head is used in place, otherwise
    the last ``nn.Linear`` with the data's number of outputs is moved to ``classifier``.
    """

    def __init__(self, net: nn.Module, *, name: str, num_classes: int, in_channels: int) -> None:
        super().__init__()
        self.name = name
        self.num_classes = int(num_classes)
        self.in_channels = int(in_channels)
        self.head_path = ""
        self._timm = all(hasattr(net, a) for a in ("forward_features", "forward_head", "get_classifier")) \
            and isinstance(net.get_classifier(), nn.Linear)
        if self._timm:
            head = net.get_classifier()
            self.net = net
            self.classifier: nn.Module = head
            # the head stays inside ``net`` too (timm's forward_head calls it); ours is the same module
        else:
            path = _last_linear(net, self.num_classes)
            if path is None:
                raise InputError(f"model: {name!r} has no final nn.Linear with {num_classes} outputs and no "
                                 "timm-style forward_features/get_classifier; the methods need a features/"
                                 "classifier split")
            parent_path, _, leaf = path.rpartition(".")
            parent = net.get_submodule(parent_path) if parent_path else net
            head = getattr(parent, leaf)
            setattr(parent, leaf, nn.Identity())
            self.head_path = f"net.{path}"  # where a state dict of the bare network keeps the head
            self.net = net
            self.classifier = head
        self.feature_dim = int(head.in_features)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        if self._timm:
            return self.net.forward_head(self.net.forward_features(x), pre_logits=True).flatten(1)
        return self.net(x).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def _last_linear(net: nn.Module, num_classes: int) -> str | None:
    """Dotted name of the last registered ``nn.Linear`` with ``num_classes`` outputs, or None."""
    found = None
    for name, m in net.named_modules():
        if isinstance(m, nn.Linear) and m.out_features == num_classes and name:
            found = name
    return found


def build_external(name: str, *, num_classes: int, in_channels: int, image_size: int | None) -> ExternalBackbone:
    """Call the factory ``name`` names and wrap what it returns (see the module docstring)."""
    factory = resolve_factory(name)
    kw = _arguments(factory, name, num_classes, in_channels, image_size)
    try:
        net = factory(**kw)
    except TypeError as exc:
        raise InputError(f"model: factory {name!r} refused {kw}: {exc}") from exc
    if not isinstance(net, nn.Module):
        raise InputError(f"model: factory {name!r} returned a {type(net).__name__}, not a torch.nn.Module")
    if image_size is not None:
        _check_output(net, f"factory {name!r}", num_classes, in_channels, image_size)
    wrapped = ExternalBackbone(net, name=name, num_classes=num_classes, in_channels=in_channels)
    if image_size is not None:  # the features/classifier split computes what the network did
        _check_output(wrapped, f"factory {name!r} (its features before the head {wrapped.head_path or 'classifier'!r})",
                      num_classes, in_channels, image_size)
    return wrapped


def _check_output(net: nn.Module, what: str, num_classes: int, in_channels: int, image_size: int) -> None:
    """Run ``net`` on one batch of two zero images (eval mode, no gradients) and refuse, in one line
    naming ``what``, an output that is not (2, num_classes) logits — before any training starts."""
    shape = (2, in_channels, image_size, image_size)
    was_training = net.training
    net.eval()
    try:
        with torch.no_grad():
            out = net(torch.zeros(shape))
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise InputError(f"model: {what} fails on a batch of shape {shape} ({type(exc).__name__}: {first})") from exc
    finally:
        net.train(was_training)
    got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
    if got != (2, num_classes):
        raise InputError(f"model: {what} returns {got} for a batch of shape {shape}; expected (2, {num_classes}): "
                         f"one column per class of the data ({num_classes} classes)")


# ------------------------------------------------------------------------------------- pretrained


def _read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    if path.suffix == ".safetensors":
        try:
            from safetensors.torch import load_file
        except ImportError as exc:
            raise InputError(f"pretrained: reading {path} needs the safetensors package "
                             "(pip install 'vistabench[train]')") from exc
        try:
            return load_file(str(path))
        except Exception as exc:
            raise InputError(f"pretrained: {path} is not a readable safetensors file ({exc})") from exc
    try:
        obj = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"pretrained: {path} is not a torch state dict readable with weights_only ({first})") from exc
    if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
        obj = obj["state_dict"]
    if not (isinstance(obj, dict) and obj and all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                                  for k, v in obj.items())):
        raise InputError(f"pretrained: {path} holds a {type(obj).__name__}, not a state dict of named tensors")
    return obj


def _head_names(model: nn.Module) -> set[str]:
    """State-dict keys of the classifier head (which the pretrained file's classes do not fit)."""
    head = getattr(model, "classifier", None)
    if not isinstance(head, nn.Module):
        return set()
    ids = {id(t) for t in head.state_dict(keep_vars=True).values()}
    return {k for k, v in model.state_dict(keep_vars=True).items() if id(v) in ids}


def _strip(keys: dict[str, torch.Tensor], target: set[str]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Match the file's names to the model's (add or remove the wrapper's ``net.`` prefix): the
    renamed state dict and each new name's name in the file."""
    if keys and not (set(keys) & target):
        with_net = {f"net.{k}": k for k in keys}
        if set(with_net) & target:
            return {n: keys[k] for n, k in with_net.items()}, with_net
        without = {k[4:]: k for k in keys if k.startswith("net.")}
        if set(without) & target:
            return {n: keys[k] for n, k in without.items()}, without
    return keys, {k: k for k in keys}


def load_pretrained(model: nn.Module, path: str | Path) -> dict[str, list[str]]:
    """Load the state dict in ``path`` into ``model``, leaving out the classifier head.

    Returns ``{"loaded": [...], "head_left_out": [...], "missing": [...]}`` (keys). A tensor whose
    shape differs from the model's, a tensor holding NaN or inf, a file with no tensor the model has,
    or keys the model does not have are InputErrors naming the file and the first offending tensor.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"pretrained: {path} does not exist or is not a file")
    state = _read_state_dict(p)
    own = model.state_dict()
    state, in_file = _strip(state, set(own))
    head = _head_names(model)
    head_path = getattr(model, "head_path", "")
    if head_path:  # the bare network's head, saved before it moved to ``classifier``
        head |= {k for k in state if k.startswith(head_path + ".")}
    body = {k: v for k, v in state.items() if k not in head}
    unexpected = [k for k in body if k not in own]
    if unexpected:
        raise InputError(f"pretrained: {path} has tensor {in_file[unexpected[0]]!r} that the model does not have "
                         f"({len(unexpected)} such; the model's first is {next(iter(own))!r})")
    for k, v in body.items():
        if tuple(v.shape) != tuple(own[k].shape):
            mine = "" if in_file[k] == k else f" ({k})"
            raise InputError(f"pretrained: tensor {in_file[k]!r} has shape {tuple(v.shape)} in {path}, the model's"
                             f"{mine} is {tuple(own[k].shape)}")
    if not body:
        raise InputError(f"pretrained: {path} has no tensor of the model besides its classifier head")
    for k, v in body.items():  # a NaN/inf weight would surface as a diverged loss, blamed on the learning rate
        if v.is_floating_point() or v.is_complex():
            bad = int((~torch.isfinite(v)).sum())
            if bad:
                raise InputError(f"pretrained: tensor {in_file[k]!r} in {path} holds {bad} non-finite value(s) "
                                 f"(NaN or inf) of {v.numel()}; the file cannot be a starting point (was it saved "
                                 "from a diverged run?)")
    missing = sorted(k for k in own if k not in body and k not in head)
    if missing:
        raise InputError(f"pretrained: {path} lacks tensor {missing[0]!r} of the model ({len(missing)} missing)")
    model.load_state_dict({**own, **body})
    return {"loaded": sorted(body), "head_left_out": sorted(k for k in state if k in head), "missing": missing}
