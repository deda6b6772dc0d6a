"""AuxiLearn (Navon et al., ICLR 2021): learned auxiliary labels, combined by implicit differentiation.

Following the reference implementation (github.com/lorenzobrigato/gem, ``pipelines/auxilearn/``):

- the primary network (the backbone with a 1000-d linear output) gets two MLP heads
  (1000 -> 512 -> ReLU -> out): the main task and ``C · K`` auxiliary classes
  (K = ``num_aux_classes`` per class, softmax);
- a label-generating network (a second copy of the backbone, its own weights) outputs soft
  auxiliary labels, masked to the K sub-classes of the true class;
- per-sample focal losses ``ℓ = Σ −t (1 − p)² log p`` for the main task and (× ``aux_scale``)
  the auxiliary task are combined by a non-negative linear combination network (weights start
  at 1) plus a skip connection, ``mean(w·[ℓ_main, ℓ_aux]) + mean(ℓ_main)`` (the reference's
  linear combiner; it is not clamped there either);
- every ``auxgrad_every`` steps, after the primary step (gem's order; ``meta_step="before"``: before
  it, on the same batch), the generator and combination parameters φ take an SGD step
  (momentum 0.9, gradient norm clipped at 50) along the implicit hypergradient of the main loss
  (the reference's scaling: the Neumann sum without the final factor α, i.e. 1/α x the
  gradient :func:`hypergradient` returns) on an auxiliary batch and a fresh training batch, both
  augmented like the training batches (``augment_aux``) (the auxiliary set, ``aux_set_size`` of the training images and at least
  one per class, is held out of the primary training): ``dL_A/dφ = −(∂²L_T/∂φ∂W) H⁻¹ ∇_W L_A`` with ``H⁻¹`` approximated by
  ``α Σ_{j=0}^{J} (I − α H)^j`` (Neumann series, J = 3, α = the learning rate) — see
  :func:`hypergradient`.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from .common import fresh_copy
from .registry import MethodContext

__all__ = ["hypergradient", "focal_loss", "AuxiLearnModel", "AuxiLearnLoss", "build"]


def hypergradient(val_loss: torch.Tensor, train_loss: torch.Tensor, aux_params: Sequence[torch.Tensor],
                  params: Sequence[torch.Tensor], *, lr: float, terms: int) -> list[torch.Tensor]:
    """Implicit gradient of ``val_loss`` w.r.t. ``aux_params`` through the optimum of ``train_loss``.

    ``g = −(∂²L_T/∂φ∂W) · α Σ_{j=0}^{terms} (I − α ∇²_W L_T)^j ∇_W L_V`` (Lorraine et al. 2020); the
    direct term ∂L_V/∂φ is zero here (the validation loss does not depend on φ). ``train_loss``
    must have been computed with a graph (create_graph is used internally).
    """
    params, aux_params = list(params), list(aux_params)
    v = [g if g is not None else torch.zeros_like(p)
         for g, p in zip(torch.autograd.grad(val_loss, params, retain_graph=True, allow_unused=True), params)]
    d_train = torch.autograd.grad(train_loss, params, create_graph=True, allow_unused=True)
    keep = [i for i, g in enumerate(d_train) if g is not None]
    d_train = [d_train[i] for i in keep]
    ps = [params[i] for i in keep]
    v = [v[i] for i in keep]
    p = list(v)
    for _ in range(terms):
        hv = torch.autograd.grad(d_train, ps, grad_outputs=v, retain_graph=True, allow_unused=True)
        v = [cv - lr * (h if h is not None else 0.0) for cv, h in zip(v, hv)]
        p = [cp + cv for cp, cv in zip(p, v)]
    mixed = torch.autograd.grad(d_train, aux_params, grad_outputs=[lr * x for x in p], allow_unused=True)
    return [-g if g is not None else torch.zeros_like(a) for g, a in zip(mixed, aux_params)]


def focal_loss(prob: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-sample ``Σ_k −t_k (1 − p_k)² log(p_k + 1e-12)`` for probabilities and targets (N, K)."""
    return (-target * (1 - prob) ** 2 * torch.log(prob + 1e-12)).sum(1)


def _mlp(out: int) -> nn.Sequential:
    """The reference's task head on the backbone's 1000-d output: 1000 -> 512 -> ReLU -> out."""
    return nn.Sequential(nn.Linear(1000, 512), nn.ReLU(), nn.Linear(512, out))


class _Generator(nn.Module):
    """Label generator: a backbone (1000-d output) + MLP head with C·K scores, soft-maxed within
    the true class's K."""

    def __init__(self, base: nn.Module, num_classes: int, k: int) -> None:
        super().__init__()
        self.base, self.c, self.k = base, num_classes, k
        self.fc = nn.Linear(base.feature_dim, 1000)
        self.head = _mlp(num_classes * k)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        s = self.head(self.fc(self.base.features(x)))
        mask = torch.full((self.c, self.c * self.k), 1e-8, device=x.device)
        for i in range(self.c):
            mask[i, i * self.k:(i + 1) * self.k] = 1.0
        m = mask[y]
        e = torch.exp(s - s.max(1, keepdim=True)[0]) * m
        return e / (e.sum(1, keepdim=True) + 1e-7)


class AuxiLearnModel(nn.Module):
    """Primary network as in the reference: backbone with a 1000-d linear output (``features``),
    then a main MLP head (``classifier``, C classes) and an auxiliary MLP head (C·K, softmax);
    ``forward`` returns the main logits (the auxiliary prediction and the input of the last
    training forward are kept for the loss)."""

    def __init__(self, base: nn.Module, k: int) -> None:
        super().__init__()
        self.base = base
        self.in_channels, self.num_classes, self.feature_dim = base.in_channels, base.num_classes, 1000
        self.fc = nn.Linear(base.feature_dim, 1000)
        self.classifier = _mlp(base.num_classes)
        self.aux_head = _mlp(base.num_classes * k)
        self.last: tuple[torch.Tensor, torch.Tensor] | None = None

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.base.features(x))

    def both(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = self.features(x)
        return self.classifier(f), torch.softmax(self.aux_head(f), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits, aux = self.both(x)
        self.last = (x, aux) if (self.training and torch.is_grad_enabled()) else None
        return logits


class AuxiLearnLoss(nn.Module):
    """Combined focal loss; runs the auxiliary-parameter updates (holds the generator and combiner)."""

    def __init__(self, model: AuxiLearnModel, generator: _Generator, *, aux_scale: float, every: int,
                 aux_fraction: float, terms: int = 3, max_grad_norm: float = 50.0, meta_step: str = "after",
                 augment_aux: bool = True, generator_mode: str = "gem") -> None:
        super().__init__()
        self._model = [model]
        self.generator = generator
        self.combine = nn.Parameter(torch.ones(2))
        self.aux_scale, self.every, self.aux_fraction = float(aux_scale), int(every), float(aux_fraction)
        self.terms, self.max_grad_norm = int(terms), float(max_grad_norm)
        self._step = 0
        self._trainer = None
        self._aux_idx: np.ndarray | None = None
        self._rng = np.random.default_rng(0)
        self._meta_opt: torch.optim.Optimizer | None = None
        self.meta_after, self.augment_aux = meta_step == "after", bool(augment_aux)
        self._pending = False
        self._train_idx: np.ndarray | None = None
        self._aug_gen: torch.Generator | None = None
        self.generator_mode = generator_mode

    def set_epoch(self, epoch: int) -> None:
        """gem (``generator_mode="gem"``): the generator is in train mode during the first epoch only;
        the first evaluation puts the whole model, generator included, in eval mode and gem's
        ``train_epoch`` sets only the primary network back to train (``auxilearn_classifier.py``),
        so from epoch 2 on the generator labels with its frozen epoch-1 BN statistics.
        ``"train"``: always in train mode (our earlier variant)."""
        self.generator.train(self.generator_mode == "train" or epoch == 0)

    def before_fit(self, trainer, images: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """Pick the auxiliary set: a stratified ``aux_fraction`` of the images (at least one per
        class); returns the indices of the others, the primary training set (as in the reference)."""
        self._trainer, self._images = trainer, images
        rng = np.random.default_rng(trainer.cfg.seed + 42)
        per = max(1, math.ceil(self.aux_fraction * len(labels) / max(1, len(np.unique(labels)))))
        self._aux_idx = np.concatenate([rng.permutation(np.flatnonzero(labels == c))[:per] for c in np.unique(labels)])
        self._aux_labels = labels[self._aux_idx]
        self._rng = np.random.default_rng(trainer.cfg.seed + 43)
        self._meta_opt = torch.optim.SGD(list(self.generator.parameters()) + [self.combine], lr=trainer.cfg.lr,
                                         momentum=0.9, weight_decay=trainer.cfg.weight_decay)
        self._step = 0
        self._pending = False
        self._train_idx = np.setdiff1d(np.arange(len(labels)), self._aux_idx)
        self._train_labels = labels[self._train_idx]
        self._aug_gen = (torch.Generator().manual_seed(trainer.cfg.seed + 44)
                         if (self.augment_aux and trainer.cfg.augment) else None)
        return self._train_idx

    def _losses(self, logits: torch.Tensor, aux: torch.Tensor, x: torch.Tensor, y: torch.Tensor, *,
                meta: bool) -> torch.Tensor:
        """Combined loss; ``meta=False`` (the primary step) treats the generated labels and the
        combination weights as constants, as the primary optimiser does not update them."""
        main = focal_loss(torch.softmax(logits, 1), F.one_hot(y, logits.shape[1]).to(logits.dtype))
        if meta:
            target, comb = self.generator(x, y), self.combine
        else:
            with torch.no_grad():
                target = self.generator(x, y)
            comb = self.combine.detach()
        aux_l = focal_loss(aux, target) * self.aux_scale
        return (torch.stack([main, aux_l], 1) @ comb).mean() + main.mean()

    def forward(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        model = self._model[0]
        if model.last is None or x_mismatch(model.last[0], y) or logits.device.type == "meta":
            return focal_loss(torch.softmax(logits, 1), F.one_hot(y, logits.shape[1]).to(logits.dtype)).mean()
        x, aux = model.last
        if self._pending:  # the meta step due after the previous primary step (gem's order)
            self._pending = False
            self._meta_step(*self._fresh_train_batch(len(y)))  # changes φ only: this step's logits stand
        self._step += 1
        if self._meta_opt is not None and self._step % self.every == 0:
            if self.meta_after:
                self._pending = True
            else:
                self._meta_step(x.detach(), y)  # before the primary loss, which then sees the new φ
        return self._losses(logits, aux, x, y, meta=False)

    def _fresh_train_batch(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A new augmented batch of the primary training images (gem draws the loader's next batch)."""
        tr = self._trainer
        pick = self._rng.choice(len(self._train_idx), size=min(n, len(self._train_idx)), replace=False)
        x = tr.batch(self._images, self._train_idx[pick], self._aug_gen)
        return x, torch.from_numpy(self._train_labels[pick]).to(x.device)

    def _meta_step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        model, tr = self._model[0], self._trainer
        pick = self._rng.choice(len(self._aux_idx), size=min(len(self._aux_idx), tr.cfg.batch_size), replace=False)
        xa = tr.batch(self._images, self._aux_idx[pick], self._aug_gen)
        ya = torch.from_numpy(self._aux_labels[pick]).to(xa.device)
        la, _ = model.both(xa)
        val = focal_loss(torch.softmax(la, 1), F.one_hot(ya, la.shape[1]).to(la.dtype)).mean()
        lt, at = model.both(x)
        train = self._losses(lt, at, x, y, meta=True)
        phi = list(self.generator.parameters()) + [self.combine]
        w = [p for n, p in model.named_parameters() if p.requires_grad and not n.startswith("aux_head")]
        lr = float(tr.cfg.lr)
        # The reference's Neumann sum omits the factor α = lr, so its meta step follows
        # (1/α) x the implicit gradient; kept, as the paper's numbers come from that code.
        grads = [g / lr for g in hypergradient(val, train, phi, w, lr=lr, terms=self.terms)]
        self._meta_opt.zero_grad(set_to_none=True)
        for p, g in zip(phi, grads):
            p.grad = g.detach()
        torch.nn.utils.clip_grad_norm_(phi, self.max_grad_norm)
        self._meta_opt.step()
        for p in model.parameters():  # the hypergradient graph left no gradients on W
            p.grad = None


def x_mismatch(x: torch.Tensor, y: torch.Tensor) -> bool:
    return x.shape[0] != y.shape[0]


def build(base: nn.Module, config: dict, ctx: MethodContext) -> tuple[nn.Module, AuxiLearnLoss]:
    k = int(config["num_aux_classes"])
    # fresh weights for the generator: gem builds it with create_model (the architecture's init)
    gen_base = fresh_copy(base, str(config.get("generator_init", "architecture")))
    model = AuxiLearnModel(base, k)
    loss = AuxiLearnLoss(model, _Generator(gen_base, base.num_classes, k), aux_scale=float(config["aux_scale"]),
                         every=int(config["auxgrad_every"]), aux_fraction=float(config["aux_set_size"]),
                         meta_step=str(config.get("meta_step", "after")),
                         augment_aux=bool(config.get("augment_aux", True)),
                         generator_mode=str(config.get("generator_mode", "gem")))
    return model, loss
