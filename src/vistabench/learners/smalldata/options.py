"""The small-data methods' own hyper-parameters as typed options (no torch: configs import this).

Each method declares a :class:`MethodOptions` subclass. A hyper-parameter that the search may
tune is a *space field* (:func:`space_option`): its value is either a fixed number or a search
range written as in ``--space`` (``{"uniform": [0, 32]}``, ``{"loguniform": [0.01, 1]}``,
``{"choice": [1, 2]}``); the range's ends (or every choice) must lie within the field's declared
bounds, so ``kappa: {"uniform": [-1, 8]}`` is refused where ``kappa`` is declared. Other fields are
plain switches (``loss: composite``).

Defaults are gem's (the benchmark's public code, lorenzobrigato/gem: it searches lr, weight decay
and batch size only and keeps every method's own hyper-parameters at their defaults);
``VISTABENCH`` holds the values of ``--recipe vistabench`` (our earlier searches). The config's
``method_options`` field holds one of these, resolved for the recipe (``--print-config`` shows it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Mapping, Union, get_args

from ...config import Options, check_bounds, option
from ...errors import InputError
from ...tuning import Choice, Fixed, Param, parse_space, space_to_json

__all__ = ["MethodOptions", "space_option", "NoOptions", "CosineCEOptions", "HarmonicOptions", "GradL2Options",
           "DhnOptions", "OleOptions", "FconvOptions", "DsknOptions", "DvpOptions", "AuxilearnOptions",
           "TvmfOptions", "SpaceValue", "CommonSpace"]

#: a fixed value, or a search range ``{"uniform"|"loguniform": [low, high]}`` / ``{"choice": [...]}``
SpaceValue = Union[dict, float]
IntSpaceValue = Union[dict, int]

def space_option(default: Any, *, help: str, low: float | None = None, high: float | None = None,
                 low_open: bool = False, integer: bool = False) -> Any:
    """A hyper-parameter the search may tune (typed :data:`SpaceValue`, or ``IntSpaceValue`` for an
    integer): a fixed value or a range whose ends lie within [low, high]. ``integer`` is documentary:
    the field's type says it."""
    text = help + ' (a value, or a search range such as {"uniform": [a, b]})'
    if isinstance(default, dict):
        return option(help=text, low=low, high=high, low_open=low_open,
                      default_factory=lambda: {k: list(v) if isinstance(v, list) else v for k, v in default.items()})
    return option(default, help=text, low=low, high=high, low_open=low_open)


@dataclass(frozen=True, kw_only=True)
class MethodOptions(Options):
    """A method's own options (see the module docstring). ``VISTABENCH``: the other recipe's values."""

    VISTABENCH: ClassVar[dict[str, Any]] = {}

    def check(self) -> None:
        for info in self.fields_info():
            value = getattr(self, info.name)
            if not isinstance(value, Mapping):
                if info.choices is None and isinstance(value, float) and self._kind(info.name) == "int":
                    if not value.is_integer():
                        raise InputError(f"{info.name}: expected an integer, got {value!r}")
                    object.__setattr__(self, info.name, int(value))
                continue
            if self._kind(info.name) is None:
                raise InputError(f"{info.name}: expected a single value, got the range {dict(value)!r}")
            param = self._parse(info.name, value)
            ends = param.values if isinstance(param, Choice) else (
                (param.value,) if isinstance(param, Fixed) else (param.low, param.high))
            for v in ends:
                if not isinstance(v, (int, float)) or isinstance(v, bool):
                    raise InputError(f"{info.name}: expected numbers, got {v!r}")
                if not math.isfinite(v):
                    raise InputError(f"{info.name}: expected finite numbers, got {v!r}")
                if self._kind(info.name) == "int" and float(v) != int(v):
                    raise InputError(f"{info.name}: expected integers, got {v!r}")
                check_bounds(v, info.name, low=info.low, high=info.high, low_open=info.low_open, noun="values")
            object.__setattr__(self, info.name, space_to_json({info.name: param})[info.name])

    @classmethod
    def _kind(cls, name: str) -> str | None:
        """"int" or "float" for a space field (by its type), None for a plain option."""
        args = get_args(cls.field_info(name).type)
        if dict not in args:
            return None
        return "int" if int in args else "float"

    @staticmethod
    def _parse(name: str, value: Mapping[str, Any]) -> Param:
        try:
            return parse_space({name: dict(value)})[name]
        except InputError as exc:
            text = str(exc).replace(f"search space {name!r}: ", "")
            raise InputError(text if text.startswith(name) else f"{name}: {text}") from None

    @classmethod
    def for_recipe(cls, recipe: str, given: Mapping[str, Any] | None = None, *,
                   prefix: str = "method_options.") -> "MethodOptions":
        """The options under ``recipe`` (gem: the defaults; vistabench: ``VISTABENCH``), ``given`` winning."""
        base = dict(cls.VISTABENCH) if recipe == "vistabench" else {}
        given = cls.normalise_names(given or {}, prefix=prefix)
        return cls.from_dict({**base, **given}, prefix=prefix)

    def space(self) -> dict[str, Param]:
        """Every option as a search parameter (fixed values as :class:`~vistabench.tuning.Fixed`)."""
        out: dict[str, Param] = {}
        for info in self.fields_info():
            value = getattr(self, info.name)
            out[info.name] = self._parse(info.name, value) if isinstance(value, Mapping) else Fixed(value)
        return out


@dataclass(frozen=True, kw_only=True)
class NoOptions(MethodOptions):
    """A method without options of its own."""


@dataclass(frozen=True, kw_only=True)
class CosineCEOptions(MethodOptions):
    xent_weight: SpaceValue = space_option({"loguniform": [0.01, 1.0]}, low=0, low_open=True,
                                           help="weight λ of the cross-entropy term")
    head: Literal["gem", "embedding"] = option(
        "gem", help="gem: ReLU + BatchNorm1d on the normalised embedding, then the extra linear layer, which "
                    "also predicts; embedding: the extra layer on the normalised embedding feeds the loss only "
                    "and the embedding predicts (our earlier variant)")
    VISTABENCH = {"head": "embedding"}


@dataclass(frozen=True, kw_only=True)
class HarmonicOptions(MethodOptions):
    dct_level: IntSpaceValue | None = space_option(
        None, low=1, integer=True, help="keep the DCT filters with u + v < level (None: all k² filters, gem)")
    normalisation: Literal["l1", "orthonormal"] = option(
        "l1", help="DCT filter scaling: l1 (each filter's absolute values sum to 1, gem) or orthonormal")
    first_bn: bool = option(True, help="BatchNorm (no affine) between the DCT and the 1x1 mix of the first "
                                       "harmonic layer (gem)")
    mix_init: Literal["gem", "conv"] = option(
        "gem", help="initial 1x1 mix of the harmonic layers without BN: gem = Kaiming fan-out over out x filters (gem's "
                    "Harm2d weight of shape (out, in, filters, 1, 1)); conv = over out, as a 1x1 convolution")
    VISTABENCH = {"dct_level": {"choice": [3, 5]}, "normalisation": "orthonormal", "first_bn": False,
                  "mix_init": "conv"}


@dataclass(frozen=True, kw_only=True)
class GradL2Options(MethodOptions):
    grad_l2: SpaceValue = space_option({"loguniform": [1e-3, 10.0]}, low=0,
                                       help="weight of the squared input-gradient norm penalty")
    weight_decay: SpaceValue = space_option(
        {"loguniform": [1e-5, 0.1]}, low=0,
        help="weight decay of grad-l2's runs: searched like every method's under gem (full_train.py searches "
             "'decay' for all methods); 0 under vistabench (the paper's text: the penalty replaces weight decay)")
    VISTABENCH = {"weight_decay": 0.0}


@dataclass(frozen=True, kw_only=True)
class DhnOptions(MethodOptions):
    scattering_J: IntSpaceValue = space_option(3, low=1, integer=True, help="scattering scale J (gem: 3)")
    hybrid_stem: Literal["gem", "plain"] = option(
        "gem", help="the layers replacing the first stages of a residual backbone: gem = as gem's scattering.py "
                    "(new convolutions at PyTorch's default init; on resnet18/resnet50 the scattering BN has "
                    "momentum 0.9 in PyTorch's convention - the new batch weighs 0.9 - and the 3x3 conv a bias); "
                    "plain = Kaiming fan-out convolutions without bias, BN momentum 0.1 (our earlier variant)")
    input_crop: Literal["gem", "shift"] = option(
        "gem", help="where the dataset's augmentation is a shift of p px (cifair10, eurosat): gem = training images "
                    "resized to size+2p and randomly cropped to size, evaluation images resized to size+2p and "
                    "centre-cropped (gem's transforms with the integer target_size its scattering pipeline "
                    "requires, here the images' own size); shift = the shift augmentation, evaluation images as "
                    "stored")
    VISTABENCH = {"scattering_J": {"choice": [1, 2]}, "hybrid_stem": "plain", "input_crop": "shift"}


@dataclass(frozen=True, kw_only=True)
class OleOptions(MethodOptions):
    ole_weight: SpaceValue = space_option(0.25, low=0, low_open=True, help="weight λ of the OLE term (gem: 0.25)")
    VISTABENCH = {"ole_weight": {"loguniform": [0.01, 1.0]}}


@dataclass(frozen=True, kw_only=True)
class FconvOptions(MethodOptions):
    maxpool: Literal["2x2", "3x3"] = option(
        "2x2", help="max-pool of an ImageNet-stem ResNet: 2x2 stride 2 no padding (gem) or the usual 3x3/2/1")
    block_init: Literal["default", "kaiming"] = option(
        "default", help="initialisation of the residual blocks' convolutions: default = PyTorch's (gem builds new "
                        "blocks after the backbone's init, keeping only ResNet downsample layers); kaiming = the "
                        "backbone's Kaiming fan-out (our earlier variant)")
    VISTABENCH = {"maxpool": "3x3", "block_init": "kaiming"}


@dataclass(frozen=True, kw_only=True)
class DsknOptions(MethodOptions):
    loss: Literal["composite", "ce"] = option(
        "composite", help="composite: positive-class loss + cosine loss + centre_weight x centre loss on an "
                          "extra projection layer (gem's default); ce: cross-entropy")
    centre_weight: float = option(0.5, low=0, low_open=True, help="weight of the centre loss (gem 0.5)")
    centre_lr: float = option(0.5, low=0, low_open=True, help="SGD learning rate of the class centres (gem 0.5)")
    centre_dim: int | None = option(None, low=1, help="dimension of the projection the centre loss acts on "
                                                      "(None: the backbone's feature dimension, gem)")
    dual_forward: Literal["both", "drawn"] = option(
        "both", help="training forward of a dual block: both = both branches run and the one not drawn is "
                     "multiplied by 0, so it still gets weight decay and momentum and its BN statistics move "
                     "(gem); drawn = only the drawn branch runs (our earlier variant)")
    wide_shortcut: Literal["blur", "plain"] = option(
        "blur", help="WRN dual block's shortcut where the shape changes: blur = 1x1 conv + BlurPool at the block's "
                     "stride, 1 included (gem); plain = 1x1 conv, BlurPool only when strided")
    branch_relu: bool = option(
        True, help="a ReLU at the end of each basic/bottleneck branch, before the branches are summed (gem's "
                   "SK blocks end in relu(out + 0)); false: none (our earlier variant)")
    VISTABENCH = {"loss": "ce", "dual_forward": "drawn", "wide_shortcut": "plain", "branch_relu": False}


@dataclass(frozen=True, kw_only=True)
class DvpOptions(MethodOptions):
    """DVP's options: the distillation (stage 2) and the MoCo pre-training (stage 1), gem's defaults
    (``DistillClassifier`` / ``DistillPreTraining`` / ``ContrastiveAugmentation`` / ``MoCo_smallbank``)."""

    distill_weight: SpaceValue = space_option({"loguniform": [1e-5, 1e-2]}, low=0, low_open=True,
                                              help="weight λ of the distillation term")
    ce_only_epochs: int | None = option(4, low=0, help="epochs of cross-entropy only before distillation "
                                                       "starts (gem: 4, distillation from epoch 5 on; None: 1 % "
                                                       "of the epochs, our earlier rule)")
    student_init: Literal["teacher", "random"] = option(
        "teacher", help="teacher: the student starts from the contrastive encoder's weights, as the teacher "
                        "(gem); random: from its own random weights")
    distill_features: Literal["stages", "pooled"] = option(
        "stages", help="stages: the pre-ReLU map at the end of every stage, 1x1 conv + BN connectors, stage i "
                       "of S weighted 1/2^(S-1-i) (gem); pooled: the pooled post-ReLU features, linear + BN "
                       "connector, margin from a Gaussian fit of the teacher's features (our earlier variant)")
    margin_source: Literal["initial_bn", "teacher_bn"] = option(
        "initial_bn", help="stages: the per-channel margin E[x | x < 0] of N(beta, gamma^2) of the BN before each "
                           "ReLU, from the BNs as initialised (gem computes the margins before loading the "
                           "pre-trained weights: -sqrt(2/pi)) or from the pre-trained teacher (teacher_bn)")
    teacher_mode: Literal["train", "eval"] = option(
        "train", help="mode of the teacher while distilling: train (batch statistics, gem) or eval")
    moco_queue: int = option(4096, low=1, help="MoCo queue size K, negatives (gem 4096)")
    moco_momentum: float = option(0.999, low=0, high=1, help="momentum m of the key encoder (gem 0.999)")
    moco_temperature: float = option(0.07, low=0, low_open=True, help="softmax temperature T (gem 0.07)")
    moco_margin: float = option(0.6, low=0, help="margin subtracted from the positive logit (gem 0.6)")
    moco_dim: int = option(128, low=1, help="dimension of the MLP projection (gem 128)")
    moco_splits: int = option(8, low=1, help="BatchNorm splits of both encoders, with the key batch shuffled "
                                             "(gem's single-GPU shuffled BN: 8; 1: plain BN)")
    pretrain_epochs: int | None = option(None, low=1, help="pre-training epochs (None: the run's epochs, as "
                                                           "gem's scripts give its pre-training)")
    pretrain_lr: float | None = option(None, low=0, low_open=True,
                                       help="pre-training learning rate (None: the trial's; gem searches it)")
    pretrain_weight_decay: float | None = option(None, low=0, help="pre-training weight decay (None: the "
                                                                   "trial's; gem searches it)")
    pretrain_batch_size: int = option(64, low=2, help="pre-training batch size (a multiple of moco_splits "
                                                      "dividing moco_queue, as gem's queue and split BN need)")
    jitter_prob: float = option(0.8, low=0, high=1, help="probability of MoCo v2's ColorJitter(0.4, 0.4, 0.4, "
                                                         "0.1) on a pre-training view (gem 0.8; 1 or 3 channels)")
    grayscale_prob: float = option(0.2, low=0, high=1, help="probability of grayscale on a pre-training view "
                                                            "(gem 0.2)")
    blur_prob: float = option(0.5, low=0, high=1, help="probability of a Gaussian blur, sigma ~ U[0.1, 2], on a "
                                                       "pre-training view (gem 0.5)")
    teacher_init: Literal["architecture", "default"] = option(
        "architecture", help="the teacher's random initial weights: architecture = drawn as the backbone draws "
                             "them (gem builds its encoder with create_model); default = PyTorch's default init")
    VISTABENCH = {"teacher_init": "default", "ce_only_epochs": None, "student_init": "random", "distill_features": "pooled",
                  "teacher_mode": "eval", "moco_splits": 1, "jitter_prob": 0.0, "grayscale_prob": 0.0,
                  "blur_prob": 0.0}

    def check(self) -> None:
        super().check()
        if self.pretrain_batch_size % self.moco_splits:
            raise InputError(f"pretrain_batch_size: expected a multiple of moco_splits ({self.moco_splits}), "
                             f"got {self.pretrain_batch_size}")
        if self.moco_queue % self.pretrain_batch_size:
            raise InputError(f"moco_queue: expected a multiple of pretrain_batch_size ({self.pretrain_batch_size}), "
                             f"as gem's queue update asserts, got {self.moco_queue}")


@dataclass(frozen=True, kw_only=True)
class AuxilearnOptions(MethodOptions):
    aux_scale: SpaceValue = space_option({"loguniform": [0.05, 1.0]}, low=0, low_open=True,
                                         help="scale of the auxiliary loss")
    auxgrad_every: IntSpaceValue = space_option({"choice": [5, 15, 30]}, low=1, integer=True,
                                                help="primary steps between two meta (hyper-gradient) steps")
    num_aux_classes: int = option(5, low=1, help="auxiliary classes per primary class")
    aux_set_size: float = option(0.015, low=0, high=1, low_open=True,
                                 help="share of the training images held out as the auxiliary set")
    meta_step: Literal["after", "before"] = option(
        "after", help="after: the meta step follows the primary step, on a fresh auxiliary batch (gem); "
                      "before: it precedes it on the same step")
    augment_aux: bool = option(True, help="augment the auxiliary batch like the training batches (gem)")
    generator_mode: Literal["gem", "train"] = option(
        "gem", help="mode of the label generator: gem = train mode in the first epoch, then eval mode with its "
                    "epoch-1 BN statistics (gem's evaluation sets the whole model to eval and only the primary "
                    "network back to train); train = always train mode")
    generator_init: Literal["architecture", "default"] = option(
        "architecture", help="the generator's random initial weights: architecture = drawn as the backbone draws "
                             "them (gem builds it with create_model); default = PyTorch's default init")
    VISTABENCH = {"meta_step": "before", "augment_aux": False, "generator_mode": "train", "generator_init": "default"}


@dataclass(frozen=True, kw_only=True)
class TvmfOptions(MethodOptions):
    kappa: SpaceValue = space_option(16.0, low=0, help="concentration κ of the t-vMF similarity (gem: 16)")
    VISTABENCH = {"kappa": {"uniform": [0.0, 32.0]}}



@dataclass(frozen=True, kw_only=True)
class CommonSpace(MethodOptions):
    """The hyper-parameters every method searches, declared here for their bounds: a ``space`` entry
    for one of them (a value or a range) is checked against these (``batch_size: {"choice": [0]}`` or
    a negative weight decay is refused when the config is built). The default ranges are the
    protocol's (:func:`vistabench.protocols.smalldata.core.method_space`)."""

    lr: SpaceValue = space_option({"loguniform": [1e-4, 0.1]}, low=0, low_open=True, help="learning rate")
    weight_decay: SpaceValue = space_option({"loguniform": [1e-5, 0.1]}, low=0, help="weight decay")
    batch_size: IntSpaceValue | None = space_option(None, low=1, integer=True,
                                                    help="batch size (None: the dataset's choices)")
