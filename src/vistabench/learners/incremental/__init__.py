"""Few-shot class-incremental learners: the registry, the context a learner is built from, its options.

Importing this package does not import torch: the built-in learners (:mod:`.baselines`:
``prototype``, ``finetune``; :mod:`.fr`: ``fr``) are loaded on the first registry lookup, and a
method's options (:mod:`.options`) are known without them, so a run's config is built and printed
without torch.

A new method::

    from vistabench.learners.incremental import IncrementalContext, register_method
    from vistabench.learners.incremental.baselines import PrototypeLearner

    @register_method("my_proto")            # options=MyOptions for hyper-parameters of its own
    class MyLearner(PrototypeLearner):
        ...

A learner is ``cls(ctx: IncrementalContext)``; ``learn(images, labels, classes, session=i)`` then
``scores(images) -> (scores, class ids)`` after every session; ``settings()`` goes into the record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from ...config import Options
from ...errors import InputError
from ...registry import Registry
from .options import FROptions, NoOptions

__all__ = ["IncrementalContext", "incremental_methods", "register_method", "method_options_class",
           "method_names", "default_backbone"]

L = TypeVar("L")

#: method name -> learner class (the built-ins load on the first lookup).
incremental_methods: Registry[type] = Registry(
    "incremental method", modules=("vistabench.learners.incremental.baselines", "vistabench.learners.incremental.fr"))

#: method name -> its Options class; known without importing the learners (no torch).
_OPTIONS: dict[str, type[Options]] = {"prototype": NoOptions, "finetune": NoOptions, "fr": FROptions}

#: method name -> (backbone, backbone options) used when the run names no model.
_BACKBONES: dict[str, tuple[str, dict[str, Any]]] = {
    "prototype": ("cnn28", {}), "finetune": ("cnn28", {}),
    # small enough for a CPU; the authors' ViT is dim 256, depth 12, 8 heads
    "fr": ("vit_small", {"dim": 64, "depth": 6, "heads": 4}),
}


def register_method(name: str, *, options: type[Options] = NoOptions, backbone: str = "cnn28",
                    backbone_options: dict[str, Any] | None = None) -> Callable[[L], L]:
    """Class decorator: register an incremental learner under ``name``, with its Options class and
    the backbone a run uses when it names no model."""
    if not (isinstance(options, type) and issubclass(options, Options)):
        raise TypeError(f"register_method({name!r}): options must be an Options subclass, got {options!r}")

    def deco(cls: L) -> L:
        known = _OPTIONS.get(name)
        if known is not None and known is not options:
            raise RuntimeError(f"incremental method {name!r}: registered with two option classes")
        _OPTIONS[name] = options
        _BACKBONES.setdefault(name, (backbone, dict(backbone_options or {})))
        return incremental_methods.register(name)(cls)

    return deco


def method_names() -> list[str]:
    """Every method a config may name (the built-ins and those of :func:`register_method`, no torch)."""
    return sorted(_OPTIONS)


def method_options_class(name: str) -> type[Options]:
    """The Options class of method ``name``; InputError naming ``method`` with close matches."""
    if name not in _OPTIONS:
        import difflib

        close = difflib.get_close_matches(str(name), method_names(), n=2, cutoff=0.5)
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise InputError(f"method: unknown incremental method {name!r}{hint} (known: {', '.join(method_names())})")
    return _OPTIONS[name]


def default_backbone(name: str) -> tuple[str, dict[str, Any]]:
    """(model, model options) a run of method ``name`` uses when it names no model."""
    model, opts = _BACKBONES.get(name, ("cnn28", {}))
    return model, dict(opts)


@dataclass(frozen=True)
class IncrementalContext:
    """What a learner is built from: the run's resolved settings and the images' shape.

    Base session: ``epochs``, ``lr``, ``momentum``, ``nesterov``, ``weight_decay``,
    ``warmup_epochs``, ``schedule`` (``"cosine"`` per step, or ``"step"``: ``lr x lr_factors[i]``
    from epoch ``lr_milestones[i]`` on), ``batch_size`` (capped at the session's images). Novel
    sessions (``finetune``): ``novel_epochs`` at ``novel_lr``, cosine. ``pretrained``, ``precision``,
    ``compile``: as in :func:`~vistabench.learners.models.build_model` and :class:`~..trainer.TrainConfig`.
    ``method_options``: the
    method's Options. ``base_cache``: a dict shared by runs that train the same base session
    (seeded, so the copy equals a retrained model).
    """

    model: str
    in_channels: int
    image_size: int | None = None
    model_options: dict[str, Any] = field(default_factory=dict)
    epochs: int = 5
    lr: float = 0.05
    momentum: float = 0.9
    nesterov: bool = False
    weight_decay: float = 5e-4
    warmup_epochs: int = 0
    schedule: str = "cosine"
    lr_milestones: tuple[int, ...] = ()
    lr_factors: tuple[float, ...] = ()
    batch_size: int = 128
    novel_epochs: int = 10
    novel_lr: float = 0.01
    seed: int = 0
    device: str = "cpu"
    method_options: Options = field(default_factory=NoOptions)
    pretrained: str | None = None
    precision: str = "fp32"
    compile: bool = False
    base_cache: dict | None = field(default=None, compare=False, repr=False)
