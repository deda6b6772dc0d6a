"""Every long-tail method's hyper-parameters as a typed :class:`~vistabench.config.Options` class.

Torch-free: the run configuration (:mod:`vistabench.protocols.longtail.config`) resolves and
prints these without importing torch. A method's options are filled in three steps: what the user
gave (``method_options`` / ``--method-opt KEY=VALUE``) wins over the recipe's values
(:meth:`MethodOptions.recipe_defaults`: e.g. the reference's focal γ = 1 on CIFAR), which win over
the declared defaults (today's CPU behaviour). Options whose default depends on the run (``None``
= "from the epochs", e.g. LDAM's DRW epoch = 80% of them) are resolved to numbers there too, so
``--print-config`` shows what the run will use.

:data:`lt_methods` is the long-tail method registry: each built-in method's
:class:`~vistabench.methods.MethodSpec` (its options class and its function in :mod:`.methods` or
:mod:`.survey`, imported on first use), and those of :func:`~vistabench.learners.longtail.register_method`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ...config import Options, option
from ...errors import InputError
from ...methods import MethodSpec, method_registrar, method_registries
from ...registry import Registry
from ..recipe import Recipe

__all__ = ["MethodOptions", "lt_methods", "register_method", "RunFacts"]


@dataclass(frozen=True)
class RunFacts:
    """What a method's run-dependent defaults may depend on: the run's training ``recipe`` (checked),
    the kind of ``dataset`` ("cifar10", "cifar100" or "other") and the ``preset`` ("cpu" or "reference")."""

    recipe: Recipe
    dataset: str
    preset: str


@dataclass(frozen=True, kw_only=True)
class MethodOptions(Options):
    """Base class of a long-tail method's options. ``epoch_options``: the options holding a 0-based
    epoch of the training from which something switches on (LDAM's DRW epoch); the run's config
    refuses one at or after its last epoch (the switch would never happen)."""

    epoch_options: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def recipe_defaults(cls, facts: RunFacts) -> dict[str, Any]:
        """Values of this recipe/run for options the user did not give (override)."""
        return {}


#: method name -> its :class:`~vistabench.methods.MethodSpec` (the built-ins below, with their builders in
#: :mod:`.methods` and :mod:`.survey` imported on first use; :func:`~.registry.register_method` adds more)
lt_methods: Registry[MethodSpec] = method_registries.add("longtail", Registry("long-tail method"))

_M = "vistabench.learners.longtail."


_register = method_registrar(lt_methods, "longtail")


def register_method(name: str, options: type[MethodOptions], **spec: Any) -> Any:
    """Register long-tail method ``name`` with its options class: ``@register_method(name, Options)`` on
    ``fn(ctx, test_images, options) -> (logits, train_results)``, or ``builder=fn`` /
    ``builder="module:function"`` (:func:`vistabench.methods.method_registrar`)."""
    if not (isinstance(options, type) and issubclass(options, MethodOptions)):
        raise TypeError(f"options of {name!r}: expected a MethodOptions subclass, got {options!r}")
    return _register(name, options, **spec)


def _declare(name: str, builder: str):
    def deco(cls: type[MethodOptions]) -> type[MethodOptions]:
        register_method(name, cls, builder=_M + builder, title=(cls.__doc__ or "").strip().split("\n")[0])
        return cls
    return deco


def _reference(facts: RunFacts) -> bool:
    return facts.preset == "reference"


@_declare("ce", "methods:run_ce")
@dataclass(frozen=True, kw_only=True)
class CEOptions(MethodOptions):
    """Plain cross-entropy: no options."""


@_declare("balanced_softmax", "methods:run_bsm")
@dataclass(frozen=True, kw_only=True)
class BalancedSoftmaxOptions(MethodOptions):
    """Balanced softmax (Ren et al.): no options."""


@_declare("bbn", "survey:run_bbn")
@dataclass(frozen=True, kw_only=True)
class BBNOptions(MethodOptions):
    """BBN: cumulative α = 1 − (epoch/epochs)², uniform + reversed samplers (no options)."""


@_declare("focal", "methods:run_focal")
@dataclass(frozen=True, kw_only=True)
class FocalOptions(MethodOptions):
    gamma: float = option(2.0, low=0, help="focusing parameter γ (reference recipe: 1, as the LDAM-DRW and "
                                           "IB CIFAR scripts; 2 is Lin et al.'s detection value)")

    @classmethod
    def recipe_defaults(cls, facts: RunFacts) -> dict[str, Any]:
        return {"gamma": 1.0} if _reference(facts) else {}


@_declare("ldam_drw", "methods:run_ldam")
@dataclass(frozen=True, kw_only=True)
class LDAMOptions(MethodOptions):
    epoch_options = ("drw_epoch",)
    max_margin: float = option(0.5, low=0, help="largest LDAM margin (of the rarest class)")
    scale: float = option(30.0, low=0, low_open=True, help="logit scale s of the cosine classifier")
    beta: float = option(0.9999, low=0, high=0.999999999, help="class-balanced β of the deferred re-weighting")
    drw_epoch: int | None = option(None, low=0, help="0-based epoch from which DRW weights apply "
                                                     "(default 80% of the epochs: 160 of 200)")

    @classmethod
    def recipe_defaults(cls, facts: RunFacts) -> dict[str, Any]:
        return {"drw_epoch": int(0.8 * facts.recipe.epochs)}


@_declare("logit_adjust", "methods:run_la")
@dataclass(frozen=True, kw_only=True)
class LogitAdjustOptions(MethodOptions):
    tau: float = option(1.0, low=0, help="post-hoc adjustment z − τ·log π")


@_declare("crt", "methods:run_crt")
@dataclass(frozen=True, kw_only=True)
class CRTOptions(MethodOptions):
    crt_epochs: int | None = option(None, low=1, help="epochs of the classifier re-training "
                                                      "(cpu: max(1, epochs // 5); reference: 10)")
    crt_lr: float | None = option(None, low=0, low_open=True, help="peak lr of the re-training (cpu: the run's lr; "
                                                                   "reference: 0.2)")
    crt_weight_decay: float | None = option(None, low=0, help="weight decay of the re-training (cpu: the run's; "
                                                             "reference 5e-4)")
    crt_batch_size: int | None = option(None, low=2, help="batch size of the re-training (cpu: the run's; "
                                                          "reference 512)")
    crt_sampler: Literal["class_balanced", "class_aware"] = option(
        "class_balanced", help="class_balanced: i.i.d. draws with p ∝ 1/n_c; class_aware: the reference's "
                               "ClassAwareSampler (classes in cycles, crt_per_class images per visit)")
    crt_per_class: int = option(4, low=1, help="images per class visit of the class-aware sampler")
    crt_epoch: Literal["sampler", "steps"] = option(
        "sampler", help="length of a class-aware epoch: sampler = its own max_c n_c × C images; steps = "
                        "int(N_train / crt_batch_size) full batches (the reference's run_networks.py)")
    crt_bn_mode: Literal["eval", "train"] = option(
        "eval", help="batch norm of the frozen backbone: eval (fixed statistics) or train (batch statistics, "
                     "running averages updated, as the reference's model.train())")
    crt_schedule: Literal["cosine", "cosine_epoch"] = option(
        "cosine", help="cosine: per step from crt_lr to 0; cosine_epoch: per epoch, stepped before the first "
                       "epoch as the reference's CosineAnnealingLR")

    @classmethod
    def recipe_defaults(cls, facts: RunFacts) -> dict[str, Any]:
        if _reference(facts):
            return {"crt_epochs": 10, "crt_lr": 0.2, "crt_weight_decay": 5e-4, "crt_batch_size": 512,
                    "crt_sampler": "class_aware", "crt_bn_mode": "train", "crt_schedule": "cosine_epoch",
                    "crt_epoch": "steps"}
        return {"crt_epochs": max(1, facts.recipe.epochs // 5), "crt_lr": facts.recipe.lr,
                "crt_weight_decay": facts.recipe.weight_decay, "crt_batch_size": facts.recipe.batch_size}


@_declare("tde", "survey:run_tde")
@dataclass(frozen=True, kw_only=True)
class TDEOptions(MethodOptions):
    num_heads: int = option(2, low=1, help="heads of the causal norm classifier (must divide the feature size)")
    tau: float = option(16.0, low=0, low_open=True, help="classifier scale τ")
    gamma: float = option(0.03125, low=0, help="norm offset γ of the causal norm classifier")
    alpha: float = option(1.5, low=0, help="counterfactual strength α at test time (reference: 1.0 on CIFAR-10, "
                                           "1.5 on CIFAR-100)")
    mu: float = option(0.9, low=0, high=1, help="momentum of the moving-average feature")

    @classmethod
    def recipe_defaults(cls, facts: RunFacts) -> dict[str, Any]:
        return {"alpha": 1.0} if _reference(facts) and facts.dataset == "cifar10" else {}


@_declare("ride", "survey:run_ride")
@dataclass(frozen=True, kw_only=True)
class RIDEOptions(MethodOptions):
    epoch_options = ("reweight_epoch",)
    num_experts: int = option(3, low=1, help="experts sharing the trunk")
    diversity: float = option(-0.45, help="diversity factor λ of the KL term (negative rewards disagreement)")
    max_margin: float = option(0.5, low=0, help="largest LDAM margin")
    scale: float = option(30.0, low=0, low_open=True, help="cosine-head scale")
    reweight_epoch: int | None = option(None, low=0, help="0-based epoch of the deferred re-weighting "
                                                          "(default 80% of the epochs: 160 of 200)")

    @classmethod
    def recipe_defaults(cls, facts: RunFacts) -> dict[str, Any]:
        return {"reweight_epoch": int(0.8 * facts.recipe.epochs)}


@_declare("ib", "survey:run_ib")
@dataclass(frozen=True, kw_only=True)
class IBOptions(MethodOptions):
    epoch_options = ("ib_epoch",)
    alpha: float = option(1000.0, low=0, low_open=True, help="influence-balanced α")
    ib_epoch: int | None = option(None, low=0, help="0-based epoch from which the IB loss replaces "
                                                    "cross-entropy (default half the epochs: 100 of 200)")

    @classmethod
    def recipe_defaults(cls, facts: RunFacts) -> dict[str, Any]:
        return {"ib_epoch": facts.recipe.epochs // 2}


@_declare("tade", "survey:run_tade")
@dataclass(frozen=True, kw_only=True)
class TADEOptions(MethodOptions):
    tau: float = option(2.0, low=0, help="τ of the backward expert's inverse prior")
    tt_epochs: int = option(5, low=1, help="test-time aggregation passes over each test set")
    tt_lr: float = option(0.1, low=0, low_open=True, help="lr of the test-time aggregation weights")
    tt_batch: int = option(128, low=1, help="batch size of the test-time aggregation")
    tt_min_weight: float = option(0.05, low=0, high=1, help="stop when an expert's weight falls below this")


@_declare("lade", "survey:run_lade")
@dataclass(frozen=True, kw_only=True)
class LADEOptions(MethodOptions):
    lam: float = option(0.1, low=0, help="weight of the LADER regulariser")
    remine_lambda: float = option(0.1, low=0, help="REMINE regularisation λ")
    test_prior: tuple[float, ...] | None = option(None, low=0, low_open=True,
                                                  help="test class prior to predict for (default uniform)")


@_declare("gcl", "survey:run_gcl")
@dataclass(frozen=True, kw_only=True)
class GCLOptions(MethodOptions):
    scale: float = option(30.0, low=0, low_open=True, help="logit scale of the first stage")
    noise_mul: float = option(0.5, low=0, help="Gaussian cloud size multiplier")
    cls_margin: float = option(0.1, low=0, help="margin of the classifier stage")
    cls_scale: float = option(20.0, low=0, low_open=True, help="logit scale of the classifier stage")
    cls_gamma: float = option(1.0, low=0, help="focal γ of the classifier stage (factor detached, as the reference)")
    cls_epochs: int | None = option(None, low=1, help="epochs of the classifier stage (cpu: ≈ 30/200 of the "
                                                      "epochs; reference: 30)")
    cls_lr_factor: float = option(1.0, low=0, low_open=True,
                                  help="peak lr of the classifier stage as a multiple of lr (reference 0.02: base/50)")
    cls_schedule: Literal["cosine", "cosine_epoch"] = option(
        "cosine", help="classifier-stage schedule: cosine per step, or per epoch as the reference")
    mixup: bool = option(False, help="mixup in both stages (the reference's default, Beta(mixup_alpha, mixup_alpha))")
    mixup_alpha: float = option(1.0, low=0, low_open=True, help="Beta parameter of mixup")

    @classmethod
    def recipe_defaults(cls, facts: RunFacts) -> dict[str, Any]:
        if _reference(facts):
            return {"cls_epochs": 30, "cls_lr_factor": 0.02, "cls_schedule": "cosine_epoch", "mixup": True}
        return {"cls_epochs": max(1, round(facts.recipe.epochs * 30 / 200))}


def resolve_method_options(method: str, given: Any, facts: RunFacts) -> MethodOptions:
    """``method``'s options: ``given`` (a mapping, or an options object) over the recipe's values."""
    cls = lt_methods.get(method, field="method").options
    if isinstance(given, MethodOptions):
        if not isinstance(given, cls):
            raise InputError(f"method_options: expected the options of {method!r} ({cls.__name__}), "
                             f"got {type(given).__name__}")
        given = given.given() or given.to_dict()
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise InputError(f"method_options: expected a mapping of {method!r} options, got {given!r}")
    given = cls.normalise_names(given, prefix="method_options.")
    return cls.from_dict({**cls.recipe_defaults(facts), **given}, prefix="method_options.")
