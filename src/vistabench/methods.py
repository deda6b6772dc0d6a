"""The one description of a learning method, whatever its protocol: :class:`MethodSpec`, and the one
lookup of a method by protocol and name: :func:`get_method`.

Every learner family (long-tail methods, small-data methods, incremental learners, stream learners)
registers its methods as specs in its :class:`~vistabench.registry.Registry`, listed here by protocol
in :data:`method_registries`: the name, a title, the protocol, the typed
:class:`~vistabench.config.Options` class of its hyper-parameters, the builder (a callable, or a
``"module:attribute"`` reference imported on first use, so a config lists and checks methods without
importing torch) and what it supports. What the builder is called with is the protocol's contract:

- ``longtail``: ``builder(ctx, test_images, options) -> (logits, train_results)``
  (:mod:`vistabench.learners.longtail`);
- ``smalldata``: ``builder(base, params, ctx) -> (model, loss_fn | None)``, ``base`` the fresh
  backbone, ``params`` one trial's hyper-parameters (:mod:`vistabench.learners.smalldata.registry`);
- ``incremental``: the learner class, ``cls(ctx: IncrementalContext)`` with ``learn`` and ``scores``
  (:mod:`vistabench.learners.incremental`);
- ``stream``: a :class:`~vistabench.learners.stream.base.StreamLearner` subclass, ``cls(config)``
  (:mod:`vistabench.learners.stream`).

>>> get_method("incremental", "fr").options.__name__
'FROptions'

This module imports neither torch nor any protocol (a family's registry module, torch-free, is
imported on the first lookup).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .config import Options
from .registry import Registry, resolve_ref

__all__ = ["MethodSpec", "method_registrar", "method_registries", "get_method", "PROTOCOLS"]

#: the protocols whose learners are registered methods
PROTOCOLS = ("longtail", "smalldata", "incremental", "stream")

#: protocol -> its method registry (a :class:`~vistabench.registry.Registry` of :class:`MethodSpec`);
#: each learner family's torch-free registry module adds its own on the first lookup
method_registries: Registry[Registry[Any]] = Registry("protocol", modules=(
    "vistabench.learners.longtail.options", "vistabench.learners.smalldata.registry",
    "vistabench.learners.incremental", "vistabench.learners.stream.registry"))


def get_method(protocol: str, name: str, *, field: str = "method") -> "MethodSpec":
    """The method ``name`` of ``protocol`` (its :class:`MethodSpec`: options class, builder, ...);
    InputError naming ``field`` with close matches for an unknown one."""
    return method_registries.get(protocol, field="protocol").get(name, field=field)

_DECORATE: Any = object()  # register_method(...) without a builder: used as a decorator


@dataclass(frozen=True)
class MethodSpec:
    """A registered method.

    Attributes
    ----------
    name : the name a config gives (``method: ldam_drw``).
    protocol : the protocol family (``"longtail"``, ``"smalldata"``, ``"incremental"``, ``"stream"``).
    options : the :class:`~vistabench.config.Options` subclass of its own hyper-parameters.
    builder : the callable the protocol calls, or ``"module:attribute"`` naming it (imported by
        :meth:`load`); None: the protocol's plain default (small-data ``ce``: the backbone as is).
    title, family : one line for listings, and the method's kind (``"cost function"``, ...).
    backbones : the built-in backbones it can run on (None: any).
    default_model, default_model_options : the backbone a run uses when it names none (None: the
        protocol's default).
    """

    name: str
    protocol: str
    options: type[Options]
    builder: Callable[..., Any] | str | None = None
    title: str = ""
    family: str = ""
    backbones: tuple[str, ...] | None = None
    default_model: str | None = None
    default_model_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (isinstance(self.options, type) and issubclass(self.options, Options)):
            raise TypeError(f"{self.protocol} method {self.name!r}: options must be an Options subclass, "
                            f"got {self.options!r}")
        if not (self.builder is None or callable(self.builder) or isinstance(self.builder, str)):
            raise TypeError(f"{self.protocol} method {self.name!r}: builder must be a callable or "
                            f"'module:attribute', got {self.builder!r}")
        if self.backbones is not None:
            object.__setattr__(self, "backbones", tuple(self.backbones))
        object.__setattr__(self, "default_model_options", dict(self.default_model_options))

    def load(self) -> Callable[..., Any] | None:
        """The builder, imported first when it is a ``"module:attribute"`` reference."""
        if isinstance(self.builder, str):
            return resolve_ref(self.builder, what=f"builder of {self.protocol} method {self.name!r}")
        return self.builder


def method_registrar(registry: Registry[Any], protocol: str, *, spec_type: type[MethodSpec] = MethodSpec,
                     default_options: type[Options] | None = None) -> Callable[..., Any]:
    """The ``register_method`` of a learner family: one signature for all four.

    ``register_method(name, options, *, builder=..., title=..., **spec_fields)`` registers a
    ``spec_type`` in ``registry`` and returns it; without ``builder`` it is a decorator that registers
    the decorated function or class as the builder and returns it unchanged. ``title`` defaults to the
    first line of the builder's docstring.
    """

    def register_method(name: str, options: type[Options] | None = None, *, builder: Any = _DECORATE,
                        **fields: Any) -> Any:
        opts = options if options is not None else default_options

        def add(obj: Any) -> MethodSpec:
            if not fields.get("title") and obj is not None and not isinstance(obj, str):
                fields["title"] = (obj.__doc__ or "").strip().split("\n")[0]
            return registry.add(name, spec_type(name=name, protocol=protocol, options=opts, builder=obj, **fields))

        if builder is _DECORATE:
            def deco(obj: Any) -> Any:
                add(obj)
                return obj
            return deco
        return add(builder)

    register_method.__doc__ = (f"Register a {protocol} method: ``register_method(name, options, *, builder=..., "
                               f"title=..., ...)`` (a {spec_type.__name__}); without ``builder``, a decorator.")
    return register_method
