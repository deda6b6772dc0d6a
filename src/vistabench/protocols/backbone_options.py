"""The backbone and precision fields every training protocol's config shares, and their checks.

``model`` (each protocol names it; a ``MODULE:FUNCTION`` / ``timm:NAME`` factory is allowed
everywhere, see :mod:`vistabench.learners.external`), ``pretrained`` (a local state dict),
``precision`` (``fp32``/``bf16``/``fp16``) and ``compile`` (CUDA only), checked when the config is made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from ..config import option
from ..errors import InputError

__all__ = ["precision_field", "compile_field", "pretrained_field", "check_backbone_fields", "Precision"]

Precision = Literal["fp32", "bf16", "fp16"]
_SUFFIXES = (".safetensors", ".pt", ".pth", ".bin")


def precision_field() -> Any:
    return option("fp32", key_default="fp32",
                  help="fp32 | bf16 | fp16: autocast type of the forward passes (weights stay fp32; fp16 adds a "
                       "grad scaler and needs CUDA; bf16 runs on a CPU)")


def compile_field() -> Any:
    return option(False, key_default=False, help="train through torch.compile (CUDA only)")


def pretrained_field() -> Any:
    return option(None, key_default=None, metavar="FILE",
                  help="a local .safetensors or .pt state dict loaded into the model before training "
                       "(its classifier head left out: a fresh one for the data's classes)")


def check_backbone_fields(model: str | None, pretrained: str | None, device: str, precision: str = "fp32",
                          compile: bool = False) -> None:
    """One-line InputErrors for a factory model name, a pretrained file and CUDA-only settings on a
    CPU (``device`` cpu; ``auto`` is checked when the trainer is made), before anything is built."""
    if device == "cpu" and precision == "fp16":
        raise InputError("precision: fp16 needs a CUDA device (device is cpu); use bf16 on a CPU")
    if device == "cpu" and compile:
        raise InputError("compile: true needs a CUDA device (device is cpu); leave it off")
    if isinstance(model, str) and ":" in model:
        from ..learners.external import resolve_factory
        resolve_factory(model)  # importable and callable; the call itself happens when the run builds it
    if pretrained is not None:
        p = Path(pretrained)
        if p.suffix not in _SUFFIXES:
            raise InputError(f"pretrained: expected a {', '.join(_SUFFIXES)} state dict, got {pretrained!r}")
        if not p.is_file():
            raise InputError(f"pretrained: {pretrained} does not exist or is not a file")
