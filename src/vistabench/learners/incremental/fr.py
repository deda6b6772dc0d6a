"""Feature rectification (FR) for few-shot class-incremental learning (paper 003, Section 4; torch).

*Rethinking Few-shot Class-incremental Learning: Learning from Yourself* rectifies the final
feature of a frozen ViT with its intermediate features::

    X_FR = M_m(cat(M_F(X_final), M_I(X_inter)))          (Eq. 7; M_* are 2-layer MLPs)

one FR module per selected intermediate block, trained with

* ``cos``: 1 − cos(X_FR, X_final), keeps the rectified feature near the final one (Eq. 10);
* IR, instance-level relation transfer: smooth-L1 between the pairwise Euclidean distances of the
  rectified features and of the intermediate features (Eq. 8), :func:`ir_loss`;
* CR, class-centre relation transfer: KL between the softmax of the prototype similarities of the
  L2-normalised intermediate and rectified features (Eq. 9), :func:`cr_loss`;
* novel-class cross-entropy of the rectified features against the prototypes (Eq. 11).

The backbone is trained on the base session and frozen; classes are represented by the normalised
mean final feature of their training images (the prototype classifier). In novel sessions the FR
modules are trained on features sampled from one Gaussian per class and layer (novel classes
borrow the covariance of their K nearest base classes) plus the session's real shots. A test image
is scored by every FR branch against the prototypes and the branches are averaged (Fig. 4's output
ensemble).

Everything the paper's text leaves open follows the authors' code (iSEE-Laboratory/Revisting_FSCIL,
``models/my_vit/helper.py``, ``models/myModules.py``) and the per-dataset run scripts
(``runs/cifar100.sh``, ``runs/miniImageNet.sh``, ``runs/cub200.sh``: :class:`.options.FROptions`);
docs/incremental.md lists where, and docs/fidelity.md the deliberate differences.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ...errors import InputError
from ..schedules import step_factor
from . import IncrementalContext
from .baselines import PrototypeLearner
from .options import FROptions
from ..lanes import seeded

__all__ = ["FeatureRectify", "FRLearner", "pairwise_distances", "ir_loss", "cr_loss", "cos_loss", "VIT_MODELS"]

#: Backbones with ``block_features`` (intermediate class tokens).
VIT_MODELS = ("vit_small",)


# ------------------------------------------------------------------------------------- losses
def pairwise_distances(x: torch.Tensor, *, eps: float = 1e-12) -> torch.Tensor:
    """Euclidean distance matrix (N, N) of the rows of ``x`` (N, D), zero diagonal.

    As the authors' ``pdist``: squared distances from the Gram matrix, clamped at ``eps`` before
    the square root (a finite gradient for equal rows).
    """
    sq = x.pow(2).sum(dim=1)
    d = (sq.unsqueeze(1) + sq.unsqueeze(0) - 2 * x @ x.t()).clamp(min=eps).sqrt()
    return d * (1 - torch.eye(len(x), dtype=d.dtype, device=d.device))


def ir_loss(rectified: torch.Tensor, intermediate: torch.Tensor, labels: torch.Tensor | None = None, *,
            intra_weight: float = 1.0, inter_weight: float = 1.0) -> torch.Tensor:
    """Instance-level relation transfer (paper Eq. 8): smooth-L1 between distance matrices.

    Parameters
    ----------
    rectified, intermediate : tensors of shape (N, D)
        X_FR and X_I of the same N samples; the intermediate distances are a fixed target.
    labels : int tensor of shape (N,), optional
        Without labels: the mean smooth-L1 over all N² pairs (the paper's Eq. 8, the authors'
        ``RkdDistance``). With labels: the authors' ``rkd_split intraI_interI`` default, the mean
        over same-class pairs (the diagonal included) times ``intra_weight`` plus the mean over
        different-class pairs times ``inter_weight``; an empty group contributes 0.

    Returns
    -------
    scalar tensor
    """
    d_r = pairwise_distances(rectified)
    with torch.no_grad():
        d_i = pairwise_distances(intermediate)
    if labels is None:
        return F.smooth_l1_loss(d_r, d_i)
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    out = d_r.new_zeros(())
    for mask, w in ((same, intra_weight), (~same, inter_weight)):
        if w and bool(mask.any()):
            out = out + w * F.smooth_l1_loss(d_r[mask], d_i[mask])
    return out


def cr_loss(rectified: torch.Tensor, intermediate: torch.Tensor, prototypes: torch.Tensor, *,
            temperature: float = 16.0) -> torch.Tensor:
    """Class-centre relation transfer (paper Eq. 9), as the authors compute it.

    ``KL(q_I ‖ q_FR)`` averaged over the N samples, where ``q = softmax(τ · cos(x, P))`` over the C
    prototypes (rows of ``prototypes``, shape (C, D)); the intermediate side is the target
    (``F.kl_div(log q_FR, q_I, reduction="batchmean")``). Shapes: (N, D), (N, D), (C, D).
    """
    p = F.normalize(prototypes, dim=-1)
    log_r = F.log_softmax(temperature * F.normalize(rectified, dim=-1) @ p.t(), dim=-1)
    with torch.no_grad():
        q_i = F.softmax(temperature * F.normalize(intermediate, dim=-1) @ p.t(), dim=-1)
    return F.kl_div(log_r, q_i, reduction="batchmean")


def cos_loss(rectified: torch.Tensor, final: torch.Tensor) -> torch.Tensor:
    """Cosine constraint (paper Eq. 10): mean of 1 − cos(X_FR, X_final) (``cosine_embedding_loss``)."""
    return (1 - F.cosine_similarity(rectified, final.detach(), dim=-1)).mean()


# ------------------------------------------------------------------------------------- module
class _Mlp(nn.Module):
    """timm-style 2-layer MLP as in the authors' ``myModules.Mlp``: fc1 → GELU → LayerNorm → fc2."""

    def __init__(self, cin: int, hidden: int, cout: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(cin, hidden)
        self.act = nn.GELU()
        self.norm = nn.LayerNorm(hidden, eps=1e-6)
        self.fc2 = nn.Linear(hidden, cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.norm(self.act(self.fc1(x))))


class FeatureRectify(nn.Module):
    """X_FR = M_m(cat(M_I(X_inter), M_F(X_final))), shapes (N, D) → (N, D).

    M_F, M_I: D → ``hidden`` → D; M_m: 2D → 2D → D (the authors' ``FeatureRectify``; their
    concatenation puts the intermediate branch first, the paper's Eq. 7 the final one: the same
    function class).
    """

    def __init__(self, dim: int, hidden: int = 512) -> None:
        super().__init__()
        self.mlp_final = _Mlp(dim, hidden, dim)
        self.mlp_inter = _Mlp(dim, hidden, dim)
        self.mlp_mixed = _Mlp(2 * dim, 2 * dim, dim)

    def forward(self, final: torch.Tensor, inter: torch.Tensor) -> torch.Tensor:
        return self.mlp_mixed(torch.cat((self.mlp_inter(inter), self.mlp_final(final)), dim=1))


# ------------------------------------------------------------------------------------ learner
class _Gaussian:
    """One class's feature distribution on one layer: mean (D,), Cholesky factor of cov + eps·I."""

    def __init__(self, mean: np.ndarray, cov: np.ndarray, eps: float) -> None:
        self.mean = np.asarray(mean, dtype=np.float64)
        self.cov = np.asarray(cov, dtype=np.float64)
        a = self.cov + eps * np.eye(len(self.mean))
        jitter = eps
        while True:  # float rounding can leave a tiny negative eigenvalue: add more jitter
            try:
                self.chol = np.linalg.cholesky(a)
                break
            except np.linalg.LinAlgError:
                jitter = max(jitter * 10, 1e-8)
                a = self.cov + jitter * np.eye(len(self.mean))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.mean + rng.standard_normal((n, len(self.mean))) @ self.chol.T


class FRLearner(PrototypeLearner):
    """Frozen ViT + prototype classifier + feature rectification from intermediate blocks."""

    def __init__(self, ctx: IncrementalContext) -> None:
        super().__init__(ctx)
        if ctx.model not in VIT_MODELS:
            raise InputError(f"model: method 'fr' needs a ViT backbone with intermediate blocks "
                             f"({', '.join(VIT_MODELS)}), got {ctx.model!r}")
        fr = ctx.method_options
        if not isinstance(fr, FROptions):
            raise InputError(f"method_options: expected FROptions for method 'fr', got {type(fr).__name__}")
        self.fr = fr
        self.lr_history: list[tuple[int, int, float]] = []  # (session, 0-based epoch, lr of the FR modules)
        self.layers: tuple[int, ...] = ()
        self.branches: nn.ModuleDict | None = None
        self.dists: dict[int, dict[str, _Gaussian]] = {}
        self.base_classes: list[int] = []
        self.loss_history: list[dict[str, float]] = []

    # ---------------------------------------------------------------- features
    def _features(self, images: np.ndarray) -> dict[str, np.ndarray]:
        """{"final": (N, D), "layer<b>": (N, D) for each FR block}, float32."""
        model = self.trainer.model  # type: ignore[union-attr]
        layers = list(self.layers)
        d = int(model.feature_dim)

        def fn(x: torch.Tensor) -> torch.Tensor:
            final, inter = model.block_features(x, layers)
            return torch.cat([final, *inter], dim=1)

        out = self.trainer.apply(images, fn, width=d * (1 + len(layers)))  # type: ignore[union-attr]
        feats = {"final": out[:, :d]}
        for k, b in enumerate(layers):
            feats[f"layer{b}"] = out[:, d * (k + 1): d * (k + 2)]
        return feats

    def _keys(self) -> list[str]:
        return ["final"] + [f"layer{b}" for b in self.layers]

    # ---------------------------------------------------------------- sessions
    def _setup(self) -> None:
        model = self.trainer.model  # type: ignore[union-attr]
        if not hasattr(model, "block_features"):
            raise InputError(f"model: method 'fr' needs a ViT backbone with intermediate blocks (vit_small), "
                             f"got {self.cfg.model!r}")
        depth = len(model.blocks)
        layers = self.fr.layers
        bad = [b for b in layers if b >= depth - 1]
        if bad:
            raise InputError(f"method_options.layers: expected intermediate blocks 0..{depth - 2} of a "
                             f"{depth}-block ViT, got {bad}")
        self.layers = tuple(layers)
        dim = int(model.feature_dim)
        with seeded(self.cfg.seed):
            self.branches = nn.ModuleDict({f"layer{b}": FeatureRectify(dim, self.fr.hidden) for b in self.layers})
        self.branches.to(self.trainer.device)  # type: ignore[union-attr]

    def _fit_gaussians(self, feats: dict[str, np.ndarray], labels: np.ndarray, classes: Sequence[int]) -> None:
        for c in classes:
            m = labels == c
            self.dists[int(c)] = {}
            for key in self._keys():
                x = feats[key][m].astype(np.float64)
                cov = np.cov(x, rowvar=False) if len(x) > 1 else np.zeros((x.shape[1], x.shape[1]))
                self.dists[int(c)][key] = _Gaussian(x.mean(axis=0), cov, self.fr.eps)

    def _borrow_gaussians(self, feats: dict[str, np.ndarray], labels: np.ndarray, classes: Sequence[int]) -> None:
        """Novel classes: mean of the shots, covariance averaged over the K base classes whose means
        are nearest in cosine distance (the authors' ``get_MVNs``), per layer."""
        for c in classes:
            self.dists[int(c)] = {}
        for key in self._keys():
            base_means = np.stack([self.dists[b][key].mean for b in self.base_classes])
            base_covs = np.stack([self.dists[b][key].cov for b in self.base_classes])
            bn = base_means / np.linalg.norm(base_means, axis=1, keepdims=True)
            for c in classes:
                mu = feats[key][labels == c].astype(np.float64).mean(axis=0)
                dist = 1 - bn @ (mu / np.linalg.norm(mu))
                near = np.argsort(dist, kind="stable")[: self.fr.k_nearest]
                self.dists[int(c)][key] = _Gaussian(mu, base_covs[near].mean(axis=0), self.fr.eps)

    def _optimizer(self) -> torch.optim.Optimizer:
        """SGD of the FR modules (weight decay 0, as the authors' ``helper.py``)."""
        return torch.optim.SGD(self.branches.parameters(), lr=self.fr.lr_fr, momentum=self.fr.momentum_fr,  # type: ignore[union-attr]
                               dampening=self.fr.dampening, weight_decay=0.0)

    def _set_epoch_lr(self, opt: torch.optim.Optimizer, session: int, epoch: int) -> None:
        """The step schedule: ``lr_fr x lr_factors_fr[i]`` from epoch ``milestones_fr[i]`` on (MultiStepLR)."""
        lr = self.fr.lr_fr * step_factor(epoch, self.fr.milestones_fr, self.fr.lr_factors_fr)
        for g in opt.param_groups:
            g["lr"] = lr
        self.lr_history.append((session, epoch, lr))

    def _step(self, batch: dict[str, torch.Tensor], labels: torch.Tensor, *, novel: bool,
              opt: torch.optim.Optimizer) -> dict[str, float]:
        fr = self.fr
        protos = torch.as_tensor(self.prototypes, dtype=torch.float32, device=labels.device)
        final = batch["final"]
        total = final.new_zeros(())
        parts = {"cos": 0.0, "cr": 0.0, "ir": 0.0, "ce_novel": 0.0}
        nov = labels >= 0
        if novel:
            nov = torch.as_tensor(np.isin(labels.cpu().numpy(), self.base_classes, invert=True), device=labels.device)
        targets = torch.as_tensor(self._targets(labels.cpu().numpy()), device=labels.device)
        for b in self.layers:
            inter = batch[f"layer{b}"]
            rect = self.branches[f"layer{b}"](final, inter)  # type: ignore[index]
            l_cos = cos_loss(rect, final)
            l_cr = cr_loss(rect, inter, protos, temperature=fr.temperature)
            l_ir = ir_loss(rect, inter, labels, intra_weight=fr.ir_intra, inter_weight=fr.ir_inter)
            loss = fr.cos * l_cos + fr.cr * l_cr + l_ir
            parts["cos"] += l_cos.item()
            parts["cr"] += l_cr.item()
            parts["ir"] += l_ir.item()
            if novel and fr.ce_novel and bool(nov.any()):
                logits = fr.temperature * F.normalize(rect[nov], dim=-1) @ F.normalize(protos, dim=-1).t()
                l_ce = F.cross_entropy(logits, targets[nov])
                loss = loss + fr.ce_novel * l_ce
                parts["ce_novel"] += l_ce.item()
            total = total + loss
        opt.zero_grad()
        total.backward()
        opt.step()
        return {k: v / len(self.layers) for k, v in parts.items()}

    def _train_base_fr(self, feats: dict[str, np.ndarray], labels: np.ndarray, session: int) -> None:
        """Base session: real base features in PK batches (k classes drawn with replacement, p
        samples each with replacement; ⌊N/(p·k)⌋ batches per epoch, at least one), no CE term."""
        fr, dev = self.fr, self.trainer.device  # type: ignore[union-attr]
        rng = np.random.default_rng([self.cfg.seed, session])
        by_class = {c: np.flatnonzero(labels == c) for c in self.base_classes}
        tens = {k: torch.as_tensor(v, device=dev) for k, v in feats.items()}
        lab = torch.as_tensor(labels, device=dev)
        opt = self._optimizer()
        n_batches = max(1, len(labels) // (fr.p * fr.k))
        for epoch in range(fr.epochs_fr):
            self._set_epoch_lr(opt, session, epoch)
            for _ in range(n_batches):
                cls = rng.choice(self.base_classes, size=fr.k)
                idx = np.concatenate([rng.choice(by_class[int(c)], size=fr.p) for c in cls])
                it = torch.as_tensor(idx, device=dev)
                self.loss_history.append(self._step({k: v[it] for k, v in tens.items()}, lab[it], novel=False, opt=opt))

    def _train_novel_fr(self, shots: dict[str, np.ndarray], shot_labels: np.ndarray, session: int) -> None:
        """Novel session: features sampled from every seen class's Gaussians (``samples_per_class``
        per class and epoch, PK order, ``batch_size_fr`` per step), the session's real shots appended
        to every batch. Final and intermediate features are drawn independently, as in the code."""
        fr, dev = self.fr, self.trainer.device  # type: ignore[union-attr]
        rng = np.random.default_rng([self.cfg.seed, session])
        seen = list(self.classes)
        c = len(seen)
        real = {k: torch.as_tensor(v, device=dev) for k, v in shots.items()}
        real_lab = torch.as_tensor(shot_labels, device=dev)
        opt = self._optimizer()
        groups = max(1, (fr.samples_per_class * c) // (fr.p * fr.k))
        for epoch in range(fr.epochs_fr):
            self._set_epoch_lr(opt, session, epoch)
            order = np.concatenate([np.tile(rng.permutation(c)[: fr.k], fr.p) for _ in range(groups)])
            for s in range(0, len(order), fr.batch_size_fr):
                lab = np.asarray(seen)[order[s: s + fr.batch_size_fr]]
                batch: dict[str, torch.Tensor] = {}
                for key in self._keys():
                    x = np.empty((len(lab), self.prototypes.shape[1]))
                    for cl in np.unique(lab):
                        m = lab == cl
                        x[m] = self.dists[int(cl)][key].sample(int(m.sum()), rng)
                    batch[key] = torch.cat([torch.as_tensor(x, dtype=torch.float32, device=dev), real[key]])
                lab_t = torch.cat([torch.as_tensor(lab, device=dev), real_lab])
                self.loss_history.append(self._step(batch, lab_t, novel=True, opt=opt))

    def learn(self, images: np.ndarray, labels: np.ndarray, classes: Sequence[int], *, session: int) -> None:
        labels = np.asarray(labels, dtype=np.int64)
        if self.trainer is None:
            new = self._add_classes(labels, classes, session)
            self._train_base(images, labels)
            self._setup()
            feats = self._features(images)
            self.prototypes = self._normalised_means(feats["final"], labels, new)
            self.base_classes = list(new)
            self._fit_gaussians(feats, labels, new)
            with torch.enable_grad():
                self._train_base_fr(feats, labels, session)
            return
        new = self._add_classes(labels, classes, session)
        feats = self._features(images)
        self.prototypes = np.vstack([self.prototypes, self._normalised_means(feats["final"], labels, new)])
        self._borrow_gaussians(feats, labels, new)
        with torch.enable_grad():
            self._train_novel_fr(feats, labels, session)

    @staticmethod
    def _normalised_means(feats: np.ndarray, labels: np.ndarray, classes: Sequence[int]) -> np.ndarray:
        protos = np.stack([feats[labels == c].astype(np.float64).mean(axis=0) for c in classes])
        norms = np.linalg.norm(protos, axis=1, keepdims=True)
        return protos / np.where(norms > 0, norms, 1.0)

    @torch.no_grad()
    def scores(self, images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Average over FR branches of cos(X_FR, P) (or of softmax(τ·cos), ``ensemble="softmax"``)."""
        if self.trainer is None or self.branches is None:
            raise InputError("scores: learn the base session first")
        feats = self._features(images)
        dev = self.trainer.device
        protos = F.normalize(torch.as_tensor(self.prototypes, dtype=torch.float32, device=dev), dim=-1)
        final = torch.as_tensor(feats["final"], device=dev)
        out = torch.zeros(len(final), len(protos), device=dev)
        for b in self.layers:
            rect = self.branches[f"layer{b}"](final, torch.as_tensor(feats[f"layer{b}"], device=dev))
            cos = F.normalize(rect, dim=-1) @ protos.t()
            out += cos if self.fr.ensemble == "logits" else F.softmax(self.fr.temperature * cos, dim=-1)
        out /= len(self.layers)
        return out.cpu().numpy().astype(np.float32), np.asarray(self.classes, dtype=np.int64)

    def settings(self) -> dict[str, Any]:
        """What the run used (stored with the record)."""
        return {"fr": {**self.fr.to_dict(), "layers": list(self.layers)}}
