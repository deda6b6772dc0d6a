"""The model registry (no torch): each backbone's entry, :class:`ModelSpec`, holds its factory and the
typed :class:`~vistabench.config.Options` class of its keyword options, checked without building a model.

:data:`models` holds every model a config may name: the built-ins (``cnn28``: :class:`CNN28Options`
and the factory in :mod:`.models`, imported on first use; ...) and those of :func:`register_model`.
A factory is ``factory(num_classes, in_channels, image_size=None, **options) -> Backbone``
(:class:`~vistabench.learners.models.Backbone`: ``features`` then a fresh linear ``classifier``);
:func:`~vistabench.learners.models.build_model` calls it. A run's ``model_opt`` mapping (``--model-opt KEY=VALUE``) is
checked by that class when the config is built (:func:`check_model_options`), so ``dim=abc`` or an
unknown key is one message naming the option instead of an error deep inside torch. Values given as
text (a command line) are read as the option's type.

>>> check_model_options("vit_small", {"dim": "48", "depth": 6})
{'dim': 48, 'depth': 6}
>>> check_model_options("vit_small", {"dim": "abc"})
Traceback (most recent call last):
...
vistabench.errors.InputError: model_opt: dim: expected an integer, got 'abc'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..config import Options, option
from ..errors import InputError
from ..registry import Registry, did_you_mean, resolve_ref

__all__ = ["ModelOptions", "CNN28Options", "ResNetOptions", "WRNOptions", "ViTOptions", "NoModelOptions",
           "ModelSpec", "models", "register_model", "BUILTIN_MODELS", "check_model_name", "model_options_class",
           "check_model_options", "check_patch_size", "SMALL_STEM_MAX", "small_stem"]

#: the largest image side a ResNet built with ``small_input=None`` gets the small-input stem for
SMALL_STEM_MAX = 64


def small_stem(image_size: int | None, small_input: bool | None = None) -> bool:
    """Whether a ResNet gets the small-input stem (3x3/1 convolution, no max-pool): ``small_input``
    when given, else whether the images it is built for are at most :data:`SMALL_STEM_MAX` pixels.

    >>> small_stem(32), small_stem(224), small_stem(224, True)
    (True, False, True)
    """
    if small_input is not None:
        return bool(small_input)
    return image_size is not None and image_size <= SMALL_STEM_MAX


@dataclass(frozen=True, kw_only=True)
class ModelOptions(Options):
    """Base class of a backbone factory's keyword options."""


@dataclass(frozen=True, kw_only=True)
class NoModelOptions(ModelOptions):
    """A backbone without keyword options (``resnet32``, ``cifar_resnet34``)."""


@dataclass(frozen=True, kw_only=True)
class CNN28Options(ModelOptions):
    width: int = option(16, low=1, help="channels of the first convolution (doubled per stage)")


@dataclass(frozen=True, kw_only=True)
class ResNetOptions(ModelOptions):
    small_input: bool | None = option(None, help="the small-input stem (3x3 convolution, no max-pool); "
                                                 "None: when the images are at most 64 pixels")


@dataclass(frozen=True, kw_only=True)
class WRNOptions(ModelOptions):
    dropout: float = option(0.0, low=0, help="dropout between the convolutions of a block")


@dataclass(frozen=True, kw_only=True)
class ViTOptions(ModelOptions):
    dim: int = option(384, low=1, help="embedding width (ViT-S: 384)")
    depth: int = option(12, low=1, help="transformer blocks")
    heads: int = option(6, low=1, help="attention heads (must divide dim)")
    patch_size: int | None = option(None, low=1, help="patch side in pixels (None: from the image size)")
    mlp_ratio: float = option(4.0, low=0, help="MLP hidden width as a multiple of dim")

    def check(self) -> None:
        if self.dim % self.heads:
            raise InputError(f"dim: expected a multiple of heads={self.heads}, got {self.dim}")


@dataclass(frozen=True)
class ModelSpec:
    """A registered model: its ``name``, its ``factory`` (a callable, or ``"module:function"`` imported
    by :meth:`load`) and the Options class of the factory's keyword options (None: not declared; the
    factory checks them)."""

    name: str
    factory: Callable[..., Any] | str
    options: type[ModelOptions] | None = None

    def __post_init__(self) -> None:
        if self.options is not None and not (isinstance(self.options, type) and issubclass(self.options, Options)):
            raise TypeError(f"model {self.name!r}: options must be an Options subclass, got {self.options!r}")
        if not (callable(self.factory) or isinstance(self.factory, str)):
            raise TypeError(f"model {self.name!r}: factory must be a callable or 'module:function'")

    def load(self) -> Callable[..., Any]:
        """The factory (imported first when it is a ``"module:function"`` reference)."""
        if isinstance(self.factory, str):
            return resolve_ref(self.factory, what=f"factory of model {self.name!r}")
        return self.factory


#: model name -> its :class:`ModelSpec` (the built-ins below, their factories in :mod:`.models` and
#: :mod:`.longtail.nets` imported on first use; :func:`register_model` adds yours)
models: Registry[ModelSpec] = Registry("model")
_F = "vistabench.learners."
for _name, _cls, _factory in (
        ("cnn28", CNN28Options, "models:_cnn28"), ("resnet32", NoModelOptions, "models:_resnet32"),
        ("resnet18", ResNetOptions, "models:_resnet18"), ("resnet50", ResNetOptions, "models:_resnet50"),
        ("cifar_resnet34", NoModelOptions, "models:_cifar_resnet34"), ("wrn16_8", WRNOptions, "models:_wrn16_8"),
        ("vit_small", ViTOptions, "vit:_vit_small"), ("resnet32_bbn", NoModelOptions, "longtail.nets:_resnet32_bbn")):
    models.add(_name, ModelSpec(_name, _F + _factory, _cls))
#: the names of the built-in models (those registered above)
BUILTIN_MODELS = frozenset(models.names())


def register_model(name: str, options: type[ModelOptions] | None = None, *, factory: Any = None) -> Any:
    """Register model ``name``: ``@register_model(name, MyOptions)`` on its factory (returned unchanged),
    or ``register_model(name, options, factory="module:function")`` (returns the :class:`ModelSpec`).
    ``options``: the Options class of the factory's keyword options (``--model-opt`` is checked by it)."""
    if factory is not None:
        return models.add(name, ModelSpec(name, factory, options))

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        models.add(name, ModelSpec(name, fn, options))
        return fn

    return deco


def model_options_class(model: str) -> type[ModelOptions] | None:
    """The options class of ``model``; None for a model that declares none (a user's)."""
    return models.get(model).options if model in models else None


def check_model_name(model: str, name: str = "model") -> None:
    """InputError naming ``name`` (with close matches) unless ``model`` is registered in :data:`models`
    (a built-in, or a user's registered by importing its module) or names a factory (``MODULE:FUNCTION``,
    ``timm:NAME``); never imports torch."""
    known = set(models.names())
    if model in known or (isinstance(model, str) and ":" in model):  # MODULE:FUNCTION / timm:NAME: see
        return  # vistabench.learners.external (the protocols' check_backbone_fields resolves it)
    raise InputError(f"{name}: unknown model {model!r}{did_you_mean(model, sorted(known), n=2)} "
                     f"(known: {', '.join(sorted(known))})")


def check_model_options(model: str, options: Mapping[str, Any] | None, *, name: str = "model_opt") -> dict[str, Any]:
    """The ``options`` given, with values of the backbone's types; InputError naming ``name`` and the key.

    Checked by the model's options class (its fields' types, ranges and rules across fields); only
    the given keys are returned (a config stores what was given). Options of a model without an
    options class pass unchanged; the model's factory checks them.
    """
    options = dict(options or {})
    cls = model_options_class(model)
    if cls is None:
        return options
    known = [i.name for i in cls.fields_info()]
    for key in options:
        if key not in known:
            listed = ", ".join(known) if known else "none"
            raise InputError(f"{name}: {key}: not an option of model {model!r}"
                             f"{did_you_mean(key, known, n=2, cutoff=0.6, quote=False)} (its options: {listed})")
    checked = cls.from_dict(options, prefix=f"{name}: ")
    return {key: getattr(checked, key) for key in options}


def check_patch_size(model: str, options: Mapping[str, Any], image_size: int, *, data: str,
                     name: str = "model_opt") -> None:
    """A ViT patch larger than the images cannot be embedded: InputError naming the option."""
    patch = options.get("patch_size")
    if model == "vit_small" and patch is not None and int(patch) > int(image_size):
        raise InputError(f"{name}: patch_size: {patch} is larger than the {image_size}-pixel images of data "
                         f"{data!r}; give a patch_size <= {image_size}")
