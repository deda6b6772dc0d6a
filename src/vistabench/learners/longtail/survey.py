"""The long-tail survey's further reference methods, registered in :data:`.registry.lt_methods`.

============ ==============================================================================
``bbn``      bilateral-branch network, cumulative learning α = 1 − (epoch/epochs)², uniform and
             reversed (∝ n_max/n_c) samplers (Zhou et al., CVPR 2020)
``tde``      decoupled TDE: causal norm classifier (``num_heads`` 2, ``tau`` 16, ``gamma`` 1/32),
             counterfactual inference with the moving-average feature (μ 0.9), ``alpha`` 1.5
             (Tang et al., NeurIPS 2020)
``ride``     RIDE: 3 experts (``num_experts``), LDAM margins, diversity factor ``diversity`` −0.45,
             DRW from ``reweight_epoch`` (default 80% of the epochs, 160 of 200); no router
             (Wang et al., ICLR 2021)
``ib``       influence-balanced loss (``alpha`` 1000, 1/n_c class weights) after a cross-entropy
             warm-up of ``ib_epoch`` epochs (default half, 100 of 200) (Park et al., ICCV 2021)
``tade``     SADE/TADE: forward / uniform / backward experts (``tau`` 2), and test-time
             self-supervised aggregation on each unlabelled test set (``tt_epochs`` 5, ``tt_lr``
             0.1, ``tt_batch`` 128, stop when a weight < ``tt_min_weight`` 0.05) (Zhang et al., 2022)
``lade``     LADE: balanced softmax + ``lam`` 0.1 × LADER (``remine_lambda`` 0.1); predicts for the
             test prior ``test_prior`` (default uniform: the sweep's test prior is unknown)
             (Hong et al., CVPR 2021)
``gcl``      GCL: cosine head, Gaussian-cloud loss (scale 30, ``noise_mul`` 0.5), then the
             classifier re-trained with class-balanced sampling and the cloud loss with margin 0.1,
             scale 20, focal γ 1 (detached factor) for ``cls_epochs`` at ``cls_lr_factor`` × lr;
             ``mixup`` in both stages (reference recipe) (Li et al., CVPR 2022)
============ ==============================================================================

Options: :mod:`.options`; the pieces the tests check one by one: :func:`bbn_step`, :func:`ib_step`,
:func:`gcl_classifier_stage`, :func:`mixup_step`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from ...errors import InputError
from ..losses import GCLLoss, IBLoss, LADELoss, RIDELoss, TADELoss, bbn_alpha
from ..models import NormedLinear
from ..tensors import augment_batch, to_float_nchw
from ..trainer import Trainer, TrainResult, TrainStep, resolve_device
from .nets import BBNNet, CausalNormNet, ExpertNet, reversed_probabilities
from .options import BBNOptions, GCLOptions, IBOptions, LADEOptions, RIDEOptions, TADEOptions, TDEOptions
from .registry import MethodContext, predict, train
from ..lanes import seeded

__all__ = ["SelfSupervisedAggregation", "bbn_step", "ib_step", "mixup_step", "gcl_classifier_stage"]

Out = tuple[np.ndarray, list[TrainResult]]


def _seeded(seed: int, make):
    """Build method-specific modules from ``torch.manual_seed(seed)`` without touching the global RNG."""
    with seeded(seed):
        return make()


def bbn_step(net: BBNNet, epochs: int) -> TrainStep:
    """BBN's training step: ``α = 1 − (epoch/epochs)²`` (:func:`~..losses.bbn_alpha`), logits
    ``net.mixed(x, x2, α)`` of the uniform batch ``x`` and the reversed-sampler batch ``x2``, loss
    ``α CE(out, y) + (1 − α) CE(out, y2)``."""
    def step(x, y, x2, y2, epoch):
        a = bbn_alpha(epoch, epochs)
        out = net.mixed(x, x2, a)
        return a * F.cross_entropy(out, y) + (1 - a) * F.cross_entropy(out, y2), out
    return step


def run_bbn(ctx: MethodContext, test: np.ndarray, opt: BBNOptions) -> Out:
    net = _seeded(ctx.cfg.seed, lambda: BBNNet(ctx.model, init=ctx.init))
    res = train(ctx, model=net, step=bbn_step(net, ctx.cfg.epochs),
                second_sampler=reversed_probabilities(ctx.train.labels))
    return predict(ctx, test), [res]


def run_tde(ctx: MethodContext, test: np.ndarray, opt: TDEOptions) -> Out:
    if ctx.model.feature_dim % opt.num_heads:
        raise InputError(f"method_options.num_heads: {opt.num_heads} must divide the model's feature size "
                         f"{ctx.model.feature_dim}")
    net = _seeded(ctx.cfg.seed, lambda: CausalNormNet(ctx.model, num_heads=opt.num_heads, tau=opt.tau,
                                                      gamma=opt.gamma, alpha=opt.alpha, mu=opt.mu))

    def step(x, y, x2, y2, epoch):
        f = net.backbone.features(x)
        net.update_mean(f)
        out = net.logits(f, 0.0)
        return F.cross_entropy(out, y), out

    res = train(ctx, model=net, step=step)
    return predict(ctx, test), [res]


def run_ride(ctx: MethodContext, test: np.ndarray, opt: RIDEOptions) -> Out:
    net = _seeded(ctx.cfg.seed, lambda: ExpertNet(ctx.model, opt.num_experts, scale=opt.scale,
                                                                 init=ctx.init))
    loss = RIDELoss(ctx.counts, max_margin=opt.max_margin, scale=opt.scale, diversity=opt.diversity,
                    reweight_epoch=int(opt.reweight_epoch)).to(resolve_device(ctx.cfg.device))

    def step(x, y, x2, y2, epoch):
        loss.set_epoch(epoch)  # deferred re-weighting from reweight_epoch
        z = net.experts(x)
        return loss(z, y), z.mean(0)

    res = train(ctx, model=net, step=step)
    return predict(ctx, test), [res]


def ib_step(net: torch.nn.Module, loss: IBLoss, start: int) -> TrainStep:
    """IB's step: cross-entropy before 0-based epoch ``start``, the IB loss (with the features' L1
    norm) from it on (the reference's ``epoch >= start_ib_epoch``)."""
    def step(x, y, x2, y2, epoch):
        f = net.features(x)
        out = net.classifier(f)
        if epoch < start:
            return F.cross_entropy(out, y), out
        return loss(out, y, f.abs().sum(1)), out
    return step


def run_ib(ctx: MethodContext, test: np.ndarray, opt: IBOptions) -> Out:
    loss = IBLoss(ctx.counts, alpha=opt.alpha).to(resolve_device(ctx.cfg.device))
    res = train(ctx, step=ib_step(ctx.model, loss, int(opt.ib_epoch)))
    return predict(ctx, test), [res]


@dataclass
class SelfSupervisedAggregation:
    """SADE's test-time self-supervised aggregation, applied to one unlabelled test set at a time.

    Holds the frozen experts' logits on the test pool: ``clean`` (E, N, C) and two augmented
    views ``views`` (2, E, N, C). Calling it with the pool indices of a test set learns aggregation
    weights w = softmax(a) (a starts at 1/E) by maximising the mean cosine similarity of
    ``softmax(Σ_k w_k z_k)`` between the two views (SGD, momentum 0.9, Nesterov, weight decay
    5e-4, ``options.tt_epochs`` passes of ``options.tt_batch``, lr ``options.tt_lr``; stops after an
    epoch in which a weight fell below ``options.tt_min_weight``: the method's
    :class:`~.options.TADEOptions`, declared and checked there) and returns ``Σ_k w_k z_k`` on the
    clean images, shape (n, C). It never sees labels. ``last_weights`` holds the weights of the latest call.
    """

    clean: np.ndarray
    views: np.ndarray
    options: TADEOptions = field(default_factory=TADEOptions)
    seed: int = 0
    last_weights: list | None = None

    def __call__(self, indices: np.ndarray) -> np.ndarray:
        # three parameters and (batch, C) tensors: one thread (several only add synchronisation, ~50x slower)
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return self._adapt(np.asarray(indices, dtype=np.int64))
        finally:
            torch.set_num_threads(before)

    def _adapt(self, idx: np.ndarray) -> np.ndarray:
        E = self.clean.shape[0]
        v0 = torch.from_numpy(self.views[0][:, idx])
        v1 = torch.from_numpy(self.views[1][:, idx])
        a = torch.full((E,), 1.0 / E, requires_grad=True)
        o = self.options
        opt = torch.optim.SGD([a], lr=o.tt_lr, momentum=0.9, weight_decay=5e-4, nesterov=True)
        rng = np.random.default_rng(self.seed)
        for _ in range(o.tt_epochs):
            order = rng.permutation(len(idx))
            for s in range(0, len(idx), o.tt_batch):
                b = torch.from_numpy(order[s:s + o.tt_batch])
                w = torch.softmax(a, 0)
                p0 = torch.softmax(torch.einsum("e,enc->nc", w, v0[:, b]), 1)
                p1 = torch.softmax(torch.einsum("e,enc->nc", w, v1[:, b]), 1)
                loss = -F.cosine_similarity(p0, p1, dim=1).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            if bool((torch.softmax(a, 0) < o.tt_min_weight).any()):
                break
        w = torch.softmax(a.detach(), 0)
        self.last_weights = w.tolist()
        return torch.einsum("e,enc->nc", w, torch.from_numpy(self.clean[:, idx])).numpy()


@torch.no_grad()
def _expert_logits(tr: Trainer, net: ExpertNet, images: np.ndarray, gen: torch.Generator | None,
                   padding: int) -> np.ndarray:
    """(E, N, C) expert logits, eval mode; ``gen`` set = one random crop + flip view."""
    net.eval()
    out = []
    bs = tr.eval_batch(images)
    with tr.threads():
        for s in range(0, len(images), bs):
            x = to_float_nchw(images[s:s + bs])
            if gen is not None:
                x = augment_batch(x, gen, padding=padding)
            x = tr.normaliser.apply(x).to(tr.device)  # type: ignore[union-attr]
            out.append(net.experts(x).float().cpu().numpy())
    E = len(net.heads)
    return np.concatenate(out, axis=1) if out else np.zeros((E, 0, net.num_classes), np.float32)


def run_tade(ctx: MethodContext, test: np.ndarray, opt: TADEOptions) -> Out:
    net = _seeded(ctx.cfg.seed, lambda: ExpertNet(ctx.model, 3, init=ctx.init))
    loss = TADELoss(ctx.counts, tau=opt.tau).to(resolve_device(ctx.cfg.device))

    def step(x, y, x2, y2, epoch):
        z = net.experts(x)
        return loss(z, y), z.mean(0)

    res = train(ctx, model=net, step=step)
    tr = ctx.trainer
    tr.normaliser.check_compatible(test, "test_images")  # type: ignore[union-attr]
    clean = _expert_logits(tr, net, test, None, 0)  # type: ignore[arg-type]
    gen = torch.Generator().manual_seed(ctx.cfg.seed + 11)
    views = np.stack([_expert_logits(tr, net, test, gen, ctx.cfg.crop_padding) for _ in range(2)])  # type: ignore[arg-type]
    ctx.test_time = SelfSupervisedAggregation(clean, views, options=opt, seed=ctx.cfg.seed)
    return clean.mean(0), [res]


def run_lade(ctx: MethodContext, test: np.ndarray, opt: LADEOptions) -> Out:
    C = len(ctx.counts)
    if opt.test_prior is None:
        log_q = np.full(C, np.log(1.0 / C))
    else:
        q = np.asarray(opt.test_prior, dtype=np.float64)
        if q.shape != (C,):
            raise InputError(f"method_options.test_prior: expected {C} positive numbers (one per class), "
                             f"got {len(q)}")
        log_q = np.log(q / q.sum())
    res = train(ctx, LADELoss(ctx.counts, lam=opt.lam, remine_lambda=opt.remine_lambda))
    # The trained logits estimate the balanced (uniform-prior) posterior: add log q − log(1/C).
    return predict(ctx, test) + (log_q - np.log(1.0 / C)).astype(np.float32)[None, :], [res]


def mixup_step(logits_of: Callable[[torch.Tensor], torch.Tensor], loss: torch.nn.Module, *, alpha: float,
               seed: int) -> TrainStep:
    """Mixup (Zhang et al.; GCL's ``mixup_data``/``mixup_criterion``): λ ~ Beta(α, α) per batch, the
    batch mixed with a permutation of itself, loss ``λ L(out, y) + (1 − λ) L(out, y[perm])``. Draws
    come from generators seeded with ``seed`` (the global RNG is untouched)."""
    rng = np.random.default_rng(seed + 13)
    gen = torch.Generator().manual_seed(seed + 13)

    def step(x, y, x2, y2, epoch):
        lam = float(rng.beta(alpha, alpha))
        perm = torch.randperm(len(y), generator=gen).to(x.device)
        out = logits_of(lam * x + (1.0 - lam) * x[perm])
        return lam * loss(out, y) + (1.0 - lam) * loss(out, y[perm]), out
    return step


def gcl_classifier_stage(ctx: MethodContext, opt: GCLOptions) -> TrainResult:
    """GCL's second stage on the trained ``ctx.model``: the cosine classifier alone (features frozen,
    batch norm in eval mode, as the reference's ``model.eval()``), class-balanced sampling, the cloud
    loss with margin ``cls_margin``, scale ``cls_scale``, focal ``cls_gamma``; ``cls_epochs`` at peak
    lr ``cls_lr_factor × lr`` with the ``cls_schedule``; mixup when ``mixup``."""
    loss = GCLLoss(ctx.counts, margin=opt.cls_margin, scale=opt.cls_scale, noise_mul=opt.noise_mul,
                   gamma=opt.cls_gamma).to(resolve_device(ctx.cfg.device))
    cfg2 = replace(ctx.cfg, epochs=opt.cls_epochs, warmup_epochs=0, lr=ctx.cfg.lr * opt.cls_lr_factor,
                   schedule=opt.cls_schedule, lr_milestones=(), lr_factors=(), schedule_offset=0)
    model = ctx.model
    if not opt.mixup:
        return train(ctx, loss, cfg=cfg2, sampler="class_balanced", trainable="classifier")

    def logits_of(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            f = model.features(x)
        return model.classifier(f)
    step = mixup_step(logits_of, loss, alpha=opt.mixup_alpha, seed=ctx.cfg.seed + 1)
    return train(ctx, cfg=cfg2, step=step, sampler="class_balanced", trainable="classifier")


def run_gcl(ctx: MethodContext, test: np.ndarray, opt: GCLOptions) -> Out:
    ctx.model.classifier = _seeded(ctx.cfg.seed, lambda: NormedLinear(ctx.model.feature_dim, ctx.model.num_classes,
                                                                    init=ctx.head_init))
    loss = GCLLoss(ctx.counts, margin=0.0, scale=opt.scale, noise_mul=opt.noise_mul).to(resolve_device(ctx.cfg.device))
    if opt.mixup:
        first = train(ctx, step=mixup_step(ctx.model, loss, alpha=opt.mixup_alpha, seed=ctx.cfg.seed))
    else:
        first = train(ctx, loss)
    second = gcl_classifier_stage(ctx, opt)
    return predict(ctx, test) * np.float32(opt.cls_scale), [first, second]
