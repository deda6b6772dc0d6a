"""FLOP accounting (docs/stream.md, "Compute"): count one step once, multiply by the number of steps.

Counts come from :class:`torch.utils.flop_counter.FlopCounterMode` run on a *meta-device copy* of
the model, so counting costs no arithmetic and does not touch the real weights, gradients or
batch-norm statistics. What is counted is what FlopCounterMode counts: matrix products and
convolutions (``mm``, ``addmm``, ``bmm``, ``convolution`` and their backward, scaled dot-product
attention), **a multiply-add = 2 FLOPs**. Element-wise work (batch norm, activations, pooling,
the loss, the optimiser update) is not counted, which is the usual convention (fvcore, the
Nevis'22 accounting). For conv/linear layers the backward pass costs 2x the forward (gradient
w.r.t. the input and w.r.t. the weights), except for the first layer, whose input needs no
gradient (1x); a training step is therefore close to 3x a forward pass.

Counts are cached per process by (architecture signature, input shape, batch size, mode, loss):
"once per (model, input shape, batch size)". The signature is the model's class, ``repr`` (its
layer hyper-parameters) and parameter/buffer shapes; a model whose forward changes FLOPs in a
way none of these show would need :func:`clear_cache`.
"""

from __future__ import annotations

import copy
from typing import Callable, Literal, Sequence

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from .._validation import check_value
from ..errors import InputError

__all__ = ["count_flops", "count_forward_flops", "count_train_step_flops", "flops_by_operator",
           "clear_cache"]

# (architecture signature, input shape, batch, mode, loss signature) -> FLOPs. Counting a step goes
# through FlopCounterMode's Python dispatch (~0.02 s for cnn28, ~0.4 s for ResNet-32), so a
# hyper-parameter search with many trials of one architecture counts it once per process.
_CACHE: dict[tuple, int] = {}
_CACHE_MAX = 4096


def clear_cache() -> None:
    """Forget cached step counts (the benchmark uses this to time the counting itself)."""
    _CACHE.clear()


def _signature(model: nn.Module) -> tuple:
    """What decides a model's FLOPs: its class, its module tree (layer hyper-parameters) and the
    shapes of its parameters and buffers. Weights' values do not matter."""
    shapes = tuple((k, tuple(v.shape)) for k, v in model.state_dict().items())
    return (type(model).__module__, type(model).__qualname__, repr(model), shapes)


def _loss_signature(loss: Callable | None) -> object:
    if loss is None:
        return None
    if isinstance(loss, nn.Module):
        return ("module", type(loss).__module__, type(loss).__qualname__, repr(loss))
    if getattr(loss, "__closure__", None) is None and hasattr(loss, "__qualname__"):
        return ("function", getattr(loss, "__module__", ""), loss.__qualname__)
    return ("object", id(loss))  # closures and callables: no safe structural key


def _cached(key: tuple, compute: Callable[[], int]) -> int:
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[key] = compute()
    return _CACHE[key]


def count_flops(fn: Callable[[], object]) -> int:
    """Total FLOPs (multiply-add = 2) of the torch operations run by ``fn()``."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def flops_by_operator(fn: Callable[[], object]) -> dict[str, int]:
    """FLOPs of ``fn()`` per aten operator name (e.g. ``{"convolution": ..., "addmm": ...}``)."""
    with FlopCounterMode(display=False) as counter:
        fn()
    per_op = counter.get_flop_counts().get("Global", {})
    return {str(k).split(".")[-1] if "." in str(k) else str(k): int(v) for k, v in per_op.items()}


def _shape(input_shape: Sequence[int], name: str = "input_shape") -> tuple[int, ...]:
    try:
        shape = tuple(int(s) for s in input_shape)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name}: expected a tuple of ints like (C, H, W), got {input_shape!r}") from exc
    if len(shape) not in (3, 4) or any(s <= 0 for s in shape):
        raise InputError(f"{name}: expected (C, H, W) or (N, C, H, W) with positive sizes, got {input_shape!r}")
    return shape


def count_forward_flops(model: nn.Module, input_shape: Sequence[int], *, batch_size: int = 1) -> int:
    """FLOPs of one inference forward pass (eval mode).

    Parameters
    ----------
    model : nn.Module
    input_shape : tuple
        ``(C, H, W)`` of one image (then ``batch_size`` images are counted) or a full
        ``(N, C, H, W)`` batch shape (then ``batch_size`` is ignored).
    batch_size : int
        Images per forward pass when ``input_shape`` is 3-d.

    Returns
    -------
    int
        FLOPs, multiply-add = 2.
    """
    shape = _shape(input_shape)
    if len(shape) == 3:
        shape = (check_value(batch_size, "batch_size", type=int, low=0, low_open=True),) + shape
    def run_on(device: str) -> int:
        m = copy.deepcopy(model).to(device).eval()
        x = torch.zeros(shape, device=device)

        def run() -> None:
            with torch.no_grad():
                m(x)

        return count_flops(run)

    def compute() -> int:
        try:
            return run_on("meta")
        except (RuntimeError, NotImplementedError):  # no meta kernel: count on a CPU copy
            return run_on("cpu")

    return _cached(("forward", _signature(model), shape), compute)


def count_train_step_flops(
    model: nn.Module,
    input_shape: Sequence[int],
    batch_size: int,
    *,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    trainable: Literal["all", "classifier"] = "all",
) -> int:
    """FLOPs of one training step (forward + backward) on a batch of ``batch_size`` images.

    Parameters
    ----------
    model : nn.Module
        A :class:`~vistabench.learners.models.Backbone` (``features`` + ``classifier``) or any
        module (then ``trainable`` must be ``"all"``).
    input_shape : tuple
        ``(C, H, W)`` of one image.
    batch_size : int
    loss_fn : callable, optional
        ``loss_fn(logits, targets) -> scalar``; default cross-entropy. (Losses are element-wise
        work and not counted, but the loss decides which gradients flow.)
    trainable : {"all", "classifier"}
        ``"classifier"`` counts a forward pass of the frozen feature extractor (no gradients) plus
        forward and backward of the classifier, as in classifier re-training.

    Returns
    -------
    int
        FLOPs of forward + backward, multiply-add = 2. The optimiser update is not counted.
    """
    shape = _shape(input_shape)
    if len(shape) != 3:
        raise InputError(f"input_shape: expected (C, H, W) of one image, got {input_shape!r}")
    n = check_value(batch_size, "batch_size", type=int, low=0, low_open=True)
    if trainable not in ("all", "classifier"):
        raise InputError(f"trainable: expected 'all' or 'classifier', got {trainable!r}")
    if trainable == "classifier" and not (hasattr(model, "features") and hasattr(model, "classifier")):
        raise InputError("trainable='classifier' needs a model with .features and .classifier")
    base_loss = loss_fn if loss_fn is not None else nn.functional.cross_entropy

    def compute() -> int:
        try:
            return _count_step(model, base_loss, (n,) + shape, trainable, torch.device("meta"))
        except (RuntimeError, NotImplementedError):
            # An operator without a meta kernel (or a loss holding CPU tensors the copy could not
            # move): count on a CPU copy with a real zero batch instead. Same counts.
            return _count_step(model, base_loss, (n,) + shape, trainable, torch.device("cpu"))

    key = ("train", _signature(model), (n,) + shape, trainable, _loss_signature(loss_fn))
    return _cached(key, compute)


def _count_step(model: nn.Module, loss_fn: Callable, shape: tuple[int, ...], trainable: str,
                device: torch.device) -> int:
    m = copy.deepcopy(model).to(device)
    loss = copy.deepcopy(loss_fn).to(device) if isinstance(loss_fn, nn.Module) else loss_fn
    x = torch.zeros(shape, device=device)
    y = torch.zeros(shape[0], dtype=torch.long, device=device)

    def run() -> None:
        if trainable == "all":
            m.train()
            out = m(x)
        else:
            m.eval()
            with torch.no_grad():
                f = m.features(x)
            m.classifier.train()
            out = m.classifier(f)
        loss(out, y).backward()

    return count_flops(run)
