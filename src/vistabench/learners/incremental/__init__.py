"""Few-shot class-incremental learners: the registry, the context a learner is built from, its options.

Importing this package does not import torch: each method is a :class:`~vistabench.methods.MethodSpec`
in ``incremental_methods`` whose builder, the learner class (:mod:`.baselines`: ``prototype``,
``finetune``; :mod:`.fr`: ``fr``), is imported on first use (``incremental_methods.get(name).load()``);
a method's options (:mod:`.options`) are known without it, so a run's config is built and printed
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

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ...config import Options
from ...methods import MethodSpec, method_registrar, method_registries
from ...registry import Registry
from ..recipe import RECIPE, Recipe
from .options import FROptions, NoOptions

__all__ = ["IncrementalContext", "incremental_methods", "register_method", "method_names", "default_backbone"]

_I = "vistabench.learners.incremental."

#: method name -> its :class:`~vistabench.methods.MethodSpec`; the builder is the learner class
#: (the built-ins' modules are imported on first use: a config is built without torch).
incremental_methods: Registry[MethodSpec] = method_registries.add("incremental", Registry("incremental method"))


_register = method_registrar(incremental_methods, "incremental", default_options=NoOptions)


def register_method(name: str, options: type[Options] = NoOptions, *, backbone: str = "cnn28",
                    backbone_options: dict[str, Any] | None = None, **spec: Any) -> Any:
    """Register an incremental learner class under ``name`` (``@register_method(name, options=...)``
    on the class, or ``builder="module:Class"``), with its Options class and the backbone a run uses
    when it names no model (:func:`~vistabench.methods.method_registrar`)."""
    spec.setdefault("default_model", backbone)
    spec.setdefault("default_model_options", dict(backbone_options or {}))
    return _register(name, options, **spec)


register_method("prototype", builder=_I + "baselines:PrototypeLearner",
                title="nearest class mean on frozen base-session features")
register_method("finetune", builder=_I + "baselines:FinetuneLearner", title="fine-tune the network on each novel session")
# small enough for a CPU; the authors' ViT is dim 256, depth 12, 8 heads
register_method("fr", FROptions, builder=_I + "fr:FRLearner", backbone="vit_small",
                backbone_options={"dim": 64, "depth": 6, "heads": 4}, title="feature rectification (Revisiting FSCIL)")


def method_names() -> list[str]:
    """Every method a config may name (the built-ins and those of :func:`register_method`, no torch)."""
    return incremental_methods.names()


def default_backbone(name: str) -> tuple[str, dict[str, Any]]:
    """(model, model options) a run of method ``name`` uses when it names no model."""
    spec = incremental_methods.get(name, field="method")
    return spec.default_model or "cnn28", dict(spec.default_model_options)


@dataclass(frozen=True, init=False)
class IncrementalContext:
    """What a learner is built from: the run's training recipe, the novel sessions' budget and the
    images' shape.

    ``recipe`` (:class:`~vistabench.learners.recipe.Recipe`): the base session's (``epochs``, ``lr``,
    ``momentum``, ``nesterov``, ``weight_decay``, ``warmup_epochs``, ``schedule``: ``"cosine"`` per
    step, or ``"step"``: ``lr x lr_factors[i]`` from epoch ``lr_milestones[i]`` on; ``batch_size``,
    capped at the session's images), the backbone (``model``, ``pretrained``) and where it trains
    (``device``, ``precision``, ``compile``, ``devices``, ``loader``, ``workers``): every session's
    trainer is made from it (``TrainConfig.from_recipe(ctx.recipe, ...)``). Recipe fields given by
    name go into it (``IncrementalContext(model="cnn28", epochs=1, in_channels=1)``), and ``ctx.lr``
    reads ``ctx.recipe.lr``. Novel sessions (``finetune``): ``novel_epochs`` at ``novel_lr``, cosine.
    ``eval_transform``: ``"none"`` (images as stored) or ``"resize_crop"`` (test images and
    prototype images resized by 1.15 and centre-cropped, as the reference's test transform).
    ``method_options``: the
    method's Options. ``base_cache``: a dict shared by runs that train the same base session
    (seeded, so the copy equals a retrained model).
    """

    recipe: Recipe
    in_channels: int
    image_size: int | None = None
    model_options: dict[str, Any] = field(default_factory=dict)
    novel_epochs: int = 10
    novel_lr: float = 0.01
    seed: int = 0
    method_options: Options = field(default_factory=NoOptions)
    eval_transform: str = "none"
    base_cache: dict | None = field(default=None, compare=False, repr=False)

    def __init__(self, recipe: Recipe | None = None, **settings: Any) -> None:
        own = {f.name: f for f in dataclasses.fields(self) if f.name != "recipe"}
        unknown = sorted(set(settings) - set(own) - set(RECIPE))
        if unknown:
            raise TypeError(f"IncrementalContext: unknown field {unknown[0]!r}")  # a caller's bug
        if "in_channels" not in settings:
            raise TypeError("IncrementalContext: in_channels is required")  # a caller's bug
        base = Recipe() if recipe is None else recipe
        if not isinstance(base, Recipe):
            raise TypeError(f"recipe: expected a Recipe, got {type(base).__name__}")  # a caller's bug
        stage = {k: v for k, v in settings.items() if k in RECIPE}
        object.__setattr__(self, "recipe", base.replace(**stage) if stage else base)
        for name, f in own.items():
            if name in settings:
                value = settings[name]
            else:
                value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # the recipe's fields read through: ``ctx.lr`` is ``ctx.recipe.lr``
        if name in RECIPE and "recipe" in self.__dict__:
            return getattr(self.__dict__["recipe"], name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
