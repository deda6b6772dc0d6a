"""The small-data method registry (no torch): what each method is called, its options, its builder.

A method is registered with :func:`register_method`; its builder is a callable or a
``"module:function"`` string imported on first use (so a config can list and check methods without
importing torch). A builder is ``builder(base, params, ctx) -> (model, loss_fn | None)``: ``base``
the freshly built backbone, ``params`` one trial's hyper-parameters (lr, weight decay, batch size
and every method option), ``ctx`` a :class:`MethodContext` (the run's :class:`~..recipe.Recipe` among it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ...methods import MethodSpec, method_registrar, method_registries
from ...registry import Registry
from ..recipe import Recipe
from .options import (AuxilearnOptions, CosineCEOptions, DhnOptions, DsknOptions, DvpOptions, FconvOptions,
                      GradL2Options, HarmonicOptions, NoOptions, OleOptions, TvmfOptions)

__all__ = ["MethodContext", "SmallDataMethod", "methods", "register_method", "CONV_BACKBONES"]


@dataclass(frozen=True)
class MethodContext:
    """What a builder may know about the run: its training ``recipe`` (the backbone built is
    ``recipe.model``; ``recipe.pretrained`` not None: those weights were loaded into it, and a builder
    keeps them rather than re-initialising layers), the backbone's input and the seed."""

    recipe: Recipe
    num_classes: int
    in_channels: int
    image_size: int | None
    seed: int


@dataclass(frozen=True)
class SmallDataMethod(MethodSpec):
    """A small-data method: a :class:`~vistabench.methods.MethodSpec` plus what the search does with it.

    ``fixed``: values of lr / weight_decay / batch_size the method imposes (``ce_untuned``);
    ``tuned=False``: nothing is searched (a batch-size choice becomes its median).
    ``backbones``: the built-in backbones the method can change (None: any); a run naming another
    built-in one (``dskn`` on ``vit_small``) is refused when its config is built.
    """

    fixed: dict[str, Any] = field(default_factory=dict)
    tuned: bool = True

    def build_fn(self) -> Callable[..., Any] | None:
        """The builder (imported on first use when given as ``"module:function"``)."""
        return self.load()


methods: Registry[SmallDataMethod] = method_registries.add("smalldata", Registry("small-data method"))


#: ``register_method(name, options=NoOptions, *, builder, title, family, fixed, tuned, backbones)``: one
#: :class:`SmallDataMethod` (the signature every learner family shares: :func:`~vistabench.methods.method_registrar`)
register_method = method_registrar(methods, "smalldata", spec_type=SmallDataMethod, default_options=NoOptions)


_P = "vistabench.learners.smalldata."
#: the built-in convolutional backbones (what the architecture methods rebuild or change)
CONV_BACKBONES = ("cnn28", "resnet18", "resnet32", "resnet50", "wrn16_8")
register_method("ce", builder=None, title="Cross-entropy (tuned baseline)", family="baseline")
register_method("ce_untuned", builder=None, title="Cross-entropy (untuned: lr 0.1, wd 1e-4)", family="baseline",
                fixed={"lr": 0.1, "weight_decay": 1e-4}, tuned=False)
register_method("cosine", title="Cosine loss", family="cost function", builder=_P + "basic:build_cosine")
register_method("cosine_ce", title="Cosine + cross-entropy loss", family="cost function", options=CosineCEOptions,
                builder=_P + "basic:build_cosine_ce")
register_method("harmonic", title="Harmonic networks (DCT blocks)", family="architecture", options=HarmonicOptions,
                builder=_P + "harmonic:build", backbones=CONV_BACKBONES)
register_method("grad_l2", title="Grad-l2 penalty", family="cost function", options=GradL2Options,
                builder=_P + "basic:build_grad_l2")  # weight decay: its option (searched under gem, 0 under vistabench)
register_method("dhn", title="Deep hybrid networks (scattering + conv)", family="architecture",
                options=DhnOptions, builder=_P + "dhn:build", backbones=CONV_BACKBONES)
register_method("ole", title="Orthogonal low-rank embedding (CE + OLE)", family="cost function",
                options=OleOptions, builder=_P + "ole:build")
register_method("fconv", title="Full convolution", family="architecture", options=FconvOptions,
                builder=_P + "fconv:build", backbones=CONV_BACKBONES)
register_method("dskn", title="Dual selective kernel networks", family="architecture", options=DsknOptions,
                builder=_P + "dskn:build", backbones=CONV_BACKBONES)
register_method("dvp", title="Distilling visual priors (MoCo teacher + distillation)", family="warm-starting",
                options=DvpOptions, builder=_P + "dvp:build")
register_method("auxilearn", title="Auxiliary learning (implicit differentiation)", family="cost function",
                options=AuxilearnOptions, builder=_P + "auxilearn:build")
register_method("tvmf", title="t-vMF similarity", family="cost function", options=TvmfOptions,
                builder=_P + "tvmf:build")
