"""The long-tail survey's further reference methods, registered in
:data:`vistabench.learners.longtail.lt_methods` (imported by that module).

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
             scale 20, focal γ 1 for ``cls_epochs`` (default ≈ 30/200 of the epochs) (Li et al., CVPR 2022)
============ ==============================================================================
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import InputError
from .losses import GCLLoss, IBLoss, LADELoss, RIDELoss, TADELoss, bbn_alpha
from .lt_nets import BBNNet, CausalNormNet, ExpertNet, reversed_probabilities
from .lt_registry import _Context, _predict, _register, _train
from .models import NormedLinear
from .tensors import augment_batch, to_float_nchw
from .trainer import TrainConfig, Trainer, TrainResult, TrainStep, resolve_device

Out = "tuple[np.ndarray, list[TrainResult]]"


def _seeded(seed: int, make):
    """Build method-specific modules from ``torch.manual_seed(seed)`` without touching the global RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make()


def _fit(ctx: _Context, net: torch.nn.Module, step: TrainStep, **fit_kw) -> TrainResult:
    """Train ``net`` with the method's ``step``; the trainer (prediction, normalisation) goes to ``ctx``."""
    tr = Trainer(net, ctx.cfg, step=step)
    res = tr.fit(ctx.train.images, ctx.train.labels, **fit_kw)
    ctx.trainer = tr
    return res


@_register("bbn")
def _bbn(ctx: _Context, test: np.ndarray, opt: dict) -> Out:
    net = _seeded(ctx.cfg.seed, lambda: BBNNet(ctx.model))
    epochs = ctx.cfg.epochs

    def step(x, y, x2, y2, epoch):
        a = bbn_alpha(epoch, epochs)
        out = net.mixed(x, x2, a)
        return a * F.cross_entropy(out, y) + (1 - a) * F.cross_entropy(out, y2), out

    res = _fit(ctx, net, step, second_sampler=reversed_probabilities(ctx.train.labels))
    return _predict(ctx, test), [res]


@_register("tde", num_heads=2, tau=16.0, gamma=0.03125, alpha=1.5, mu=0.9)
def _tde(ctx: _Context, test: np.ndarray, opt: dict) -> Out:
    if ctx.model.feature_dim % int(opt["num_heads"]):
        raise InputError(f"options: num_heads={opt['num_heads']} must divide the feature size {ctx.model.feature_dim}")
    net = _seeded(ctx.cfg.seed, lambda: CausalNormNet(ctx.model, num_heads=int(opt["num_heads"]), tau=opt["tau"],
                                                      gamma=opt["gamma"], alpha=opt["alpha"], mu=opt["mu"]))

    def step(x, y, x2, y2, epoch):
        f = net.backbone.features(x)
        net.update_mean(f)
        out = net.logits(f, 0.0)
        return F.cross_entropy(out, y), out

    res = _fit(ctx, net, step)
    return _predict(ctx, test), [res]


@_register("ride", num_experts=3, diversity=-0.45, max_margin=0.5, scale=30.0, reweight_epoch=None)
def _ride(ctx: _Context, test: np.ndarray, opt: dict) -> Out:
    if opt["reweight_epoch"] is None:
        opt["reweight_epoch"] = int(0.8 * ctx.cfg.epochs)
    net = _seeded(ctx.cfg.seed, lambda: ExpertNet(ctx.model, int(opt["num_experts"]), scale=opt["scale"]))
    loss = RIDELoss(ctx.counts, max_margin=opt["max_margin"], scale=opt["scale"], diversity=opt["diversity"],
                    reweight_epoch=int(opt["reweight_epoch"])).to(resolve_device(ctx.cfg.device))

    def step(x, y, x2, y2, epoch):
        loss.set_epoch(epoch)  # deferred re-weighting from reweight_epoch
        z = net.experts(x)
        return loss(z, y), z.mean(0)

    res = _fit(ctx, net, step)
    return _predict(ctx, test), [res]


@_register("ib", alpha=1000.0, ib_epoch=None)
def _ib(ctx: _Context, test: np.ndarray, opt: dict) -> Out:
    if opt["ib_epoch"] is None:
        opt["ib_epoch"] = ctx.cfg.epochs // 2
    net = ctx.model
    loss = IBLoss(ctx.counts, alpha=opt["alpha"]).to(resolve_device(ctx.cfg.device))
    start = int(opt["ib_epoch"])

    def step(x, y, x2, y2, epoch):
        f = net.features(x)
        out = net.classifier(f)
        if epoch < start:
            return F.cross_entropy(out, y), out
        return loss(out, y, f.abs().sum(1)), out

    res = _fit(ctx, net, step)
    return _predict(ctx, test), [res]


@dataclass
class SelfSupervisedAggregation:
    """SADE's test-time self-supervised aggregation, applied to one unlabelled test set at a time.

    Holds the frozen experts' logits on the test pool: ``clean`` (E, N, C) and two augmented
    views ``views`` (2, E, N, C). Calling it with the pool indices of a test set learns aggregation
    weights w = softmax(a) (a starts at 1/E) by maximising the mean cosine similarity of
    ``softmax(Σ_k w_k z_k)`` between the two views (SGD, momentum 0.9, Nesterov, weight decay
    5e-4, ``epochs`` passes of ``batch_size``; stops after an epoch in which a weight fell below
    ``min_weight``) and returns ``Σ_k w_k z_k`` on the clean images, shape (n, C). It never sees
    labels. ``last_weights`` holds the weights of the latest call.
    """

    clean: np.ndarray
    views: np.ndarray
    epochs: int = 5
    lr: float = 0.1
    batch_size: int = 128
    min_weight: float = 0.05
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
        opt = torch.optim.SGD([a], lr=self.lr, momentum=0.9, weight_decay=5e-4, nesterov=True)
        rng = np.random.default_rng(self.seed)
        for _ in range(self.epochs):
            order = rng.permutation(len(idx))
            for s in range(0, len(idx), self.batch_size):
                b = torch.from_numpy(order[s:s + self.batch_size])
                w = torch.softmax(a, 0)
                p0 = torch.softmax(torch.einsum("e,enc->nc", w, v0[:, b]), 1)
                p1 = torch.softmax(torch.einsum("e,enc->nc", w, v1[:, b]), 1)
                loss = -F.cosine_similarity(p0, p1, dim=1).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            if bool((torch.softmax(a, 0) < self.min_weight).any()):
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
    bs = tr.cfg.eval_batch_size
    with tr.threads():
        for s in range(0, len(images), bs):
            x = to_float_nchw(images[s:s + bs])
            if gen is not None:
                x = augment_batch(x, gen, padding=padding)
            x = tr.normaliser.apply(x).to(tr.device)  # type: ignore[union-attr]
            out.append(net.experts(x).float().cpu().numpy())
    E = len(net.heads)
    return np.concatenate(out, axis=1) if out else np.zeros((E, 0, net.num_classes), np.float32)


@_register("tade", tau=2.0, tt_epochs=5, tt_lr=0.1, tt_batch=128, tt_min_weight=0.05)
def _tade(ctx: _Context, test: np.ndarray, opt: dict) -> Out:
    net = _seeded(ctx.cfg.seed, lambda: ExpertNet(ctx.model, 3))
    loss = TADELoss(ctx.counts, tau=opt["tau"]).to(resolve_device(ctx.cfg.device))

    def step(x, y, x2, y2, epoch):
        z = net.experts(x)
        return loss(z, y), z.mean(0)

    res = _fit(ctx, net, step)
    tr = ctx.trainer
    tr.normaliser.check_compatible(test, "test_images")  # type: ignore[union-attr]
    clean = _expert_logits(tr, net, test, None, 0)  # type: ignore[arg-type]
    gen = torch.Generator().manual_seed(ctx.cfg.seed + 11)
    views = np.stack([_expert_logits(tr, net, test, gen, ctx.cfg.crop_padding) for _ in range(2)])  # type: ignore[arg-type]
    ctx.test_time = SelfSupervisedAggregation(clean, views, epochs=int(opt["tt_epochs"]), lr=float(opt["tt_lr"]),
                                        batch_size=int(opt["tt_batch"]), min_weight=float(opt["tt_min_weight"]),
                                        seed=ctx.cfg.seed)
    return clean.mean(0), [res]


@_register("lade", lam=0.1, remine_lambda=0.1, test_prior=None)
def _lade(ctx: _Context, test: np.ndarray, opt: dict) -> Out:
    C = len(ctx.counts)
    if opt["test_prior"] is None:
        log_q = np.full(C, np.log(1.0 / C))
    else:
        q = np.asarray(opt["test_prior"], dtype=np.float64)
        if q.shape != (C,) or np.any(q <= 0) or not np.all(np.isfinite(q)):
            raise InputError(f"options: test_prior must be {C} positive numbers, got {opt['test_prior']!r}")
        log_q = np.log(q / q.sum())
    res = _train(ctx, LADELoss(ctx.counts, lam=opt["lam"], remine_lambda=opt["remine_lambda"]))
    # The trained logits estimate the balanced (uniform-prior) posterior: add log q − log(1/C).
    return _predict(ctx, test) + (log_q - np.log(1.0 / C)).astype(np.float32)[None, :], [res]


@_register("gcl", scale=30.0, noise_mul=0.5, cls_margin=0.1, cls_scale=20.0, cls_gamma=1.0, cls_epochs=None)
def _gcl(ctx: _Context, test: np.ndarray, opt: dict) -> Out:
    if opt["cls_epochs"] is None:
        opt["cls_epochs"] = max(1, round(ctx.cfg.epochs * 30 / 200))
    ctx.model.classifier = _seeded(ctx.cfg.seed, lambda: NormedLinear(ctx.model.feature_dim, ctx.model.num_classes))
    first = _train(ctx, GCLLoss(ctx.counts, margin=0.0, scale=opt["scale"], noise_mul=opt["noise_mul"]))
    cfg2 = TrainConfig(**{**asdict(ctx.cfg), "epochs": int(opt["cls_epochs"]), "warmup_epochs": 0})
    second = _train(ctx, GCLLoss(ctx.counts, margin=opt["cls_margin"], scale=opt["cls_scale"],
                                 noise_mul=opt["noise_mul"], gamma=opt["cls_gamma"]),
                    cfg=cfg2, sampler="class_balanced", trainable="classifier")
    return _predict(ctx, test) * np.float32(opt["cls_scale"]), [first, second]
