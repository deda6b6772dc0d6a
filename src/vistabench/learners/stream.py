"""Stream learners (Nevis'22 baselines) and the compute ledger they charge.

A learner implements ``init() -> state``, ``train(task, data, state, ledger) -> (state, predictor)``
and ``predict(predictor, images) -> scores`` (docs/stream.md). It sees one :class:`TaskView` (the
current task's metadata) and a read-only copy of the current task's training data; every training
step and every forward pass spent on search or model selection is charged to the
:class:`ComputeLedger` the runner hands it.

Baselines (registry ``stream_learners``):

``indep``     random init, random search over learning rate and label smoothing, keep the best trial.
``ft-prev``   as ``indep`` but every trial starts from the most recent task's network (new head).
``ft-d``      starts from the most related past network: relatedness = k-NN accuracy on a small
              subset of the new task's data in that network's feature space (charged).
``ensemble``  ``indep`` whose predictor is the ensemble of all trials, weights
              ``softmax(val_score / temperature)`` (Nevis'22 Appendix I).
``pt``        every trial starts from a supplied checkpoint (a state dict loaded with
              ``torch.load(..., weights_only=True)``; its classifier is replaced); PT-MT's
              checkpoint comes from :func:`~vistabench.learners.stream_pretrain.pretrain_meta_train`.
``mt``        FT-d initialisation + co-training with the most related past task
              (:mod:`~vistabench.learners.stream_mt`).
``bhpo``      ``indep`` with trials chosen sequentially by GP-UCB Bayesian optimisation
              (:mod:`~vistabench.learners.stream_bhpo`).

Compute knobs: ``trials`` (random-search configurations per task) and ``steps`` (SGD steps per
trial). The batch size follows the training-set size, ``B = clip(2^floor(log2(n / 16)), 8,
max_batch)`` (a power of two near n/16: the paper's Eq. 4 sets B from n with a constant lost in the
text extraction). Each trial's ``steps`` are split into ``E`` equal chunks (E = the largest of
4, 3, 2, 1 dividing ``steps``) after each of which the validation score is measured: the best
trial's scores against progress ``e / E`` are the learning curve used for forward transfer.
Multilabel tasks train with a sigmoid binary cross-entropy on a head padded to one output per
distinct label pattern (the shared trainer takes integer labels; only the first C outputs are
scores); their validation score is mAP.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from .._validation import check_positive
from ..errors import InputError
from ..metrics.stream import mean_average_precision
from ..registry import Registry
from .flops import count_forward_flops, count_train_step_flops
from .models import build_model
from .tensors import Normaliser, augment_batch, to_float_nchw
from .trainer import TrainConfig, Trainer

__all__ = ["learner_names", "TaskView", "ComputeLedger", "StreamLearner", "SearchLearner", "LearnerConfig", "TrialEngine",
           "stream_learners", "make_learner", "batch_size_for", "eval_points", "save_checkpoint"]


@dataclass(frozen=True)
class TaskView:
    """What a learner may know about the current task (never the stream, never a future task)."""

    uid: str
    name: str
    year: int
    domain: str
    kind: str
    num_classes: int
    class_names: tuple[str, ...]
    seed: int


class ComputeLedger:
    """FLOPs charged while learning one task: training steps and model-selection forward passes.

    One step is counted once per (architecture, input shape, batch size) with
    :func:`~vistabench.learners.flops.count_train_step_flops` on the meta device and multiplied
    by the number of steps, so accounting costs no arithmetic on real data. (The count is linear
    in the number of images for convolutions and linear layers, so a forward pass on n images is
    charged as n times the one-image count.)
    """

    def __init__(self) -> None:
        self.train_flops = 0
        self.eval_flops = 0
        self.train_steps = 0
        self.items: list[dict[str, Any]] = []

    @property
    def total(self) -> int:
        return self.train_flops + self.eval_flops

    def charge_train(self, model: nn.Module, input_shape: tuple[int, int, int], batch_size: int, steps: int,
                     *, loss_fn: Callable | None = None, what: str = "train") -> int:
        """Charge ``steps`` training steps of ``model`` on batches of ``batch_size`` images."""
        key = ("train", repr(model), tuple(input_shape), int(batch_size), type(loss_fn).__name__)
        if key not in _COUNT_CACHE:
            _COUNT_CACHE[key] = int(count_train_step_flops(model, input_shape, batch_size, loss_fn=loss_fn))
        per_step = _COUNT_CACHE[key]
        f = per_step * int(steps)
        self.train_flops += f
        self.train_steps += int(steps)
        self.items.append({"what": what, "per_step": per_step, "steps": int(steps), "flops": f})
        return f

    def charge_forward(self, model: nn.Module, input_shape: tuple[int, int, int], n_images: int,
                       *, what: str = "eval") -> int:
        """Charge inference forward passes of ``model`` on ``n_images`` images."""
        key = ("forward", repr(model), tuple(input_shape))
        if key not in _COUNT_CACHE:
            _COUNT_CACHE[key] = int(count_forward_flops(model, input_shape, batch_size=1))
        per_image = _COUNT_CACHE[key]
        f = per_image * int(n_images)
        self.eval_flops += f
        self.items.append({"what": what, "per_image": per_image, "images": int(n_images), "flops": f})
        return f


# per-step / per-image counts depend on the architecture (its repr), the input shape and the batch
# size only, never on the weights: count each once per process
_COUNT_CACHE: dict[tuple, int] = {}


def batch_size_for(n: int, *, max_batch: int = 256, min_batch: int = 16) -> int:
    """Batch size from the training-set size: ``clip(2^floor(log2(n / 16)), min_batch, max_batch)``, at most n.

    >>> batch_size_for(240), batch_size_for(5000), batch_size_for(10**6), batch_size_for(10)
    (16, 256, 256, 10)
    """
    n = check_positive(n, "n", integer=True)
    b = 2 ** int(math.floor(math.log2(max(n / 16.0, 1.0))))
    return int(min(max(b, min_batch), max_batch, n))


def eval_points(steps: int) -> int:
    """Number of learning-curve points: the largest of 4, 3, 2, 1 that divides ``steps``."""
    return next(e for e in (4, 3, 2, 1) if steps % e == 0)


@dataclass
class LearnerConfig:
    """Meta-learner settings shared by the baselines (the compute knobs are trials and steps)."""

    trials: int = 2
    steps: int = 40
    seed: int = 0
    arch: str = "cnn28"
    arch_options: dict = field(default_factory=lambda: {"width": 8})
    lr_range: tuple[float, float] = (3e-3, 0.3)
    label_smoothing_range: tuple[float, float] = (0.0, 0.3)
    weight_decay: float = 5e-4
    momentum: float = 0.9
    max_batch: int = 256
    min_batch: int = 16
    val_fraction: float = 0.2
    device: str = "cpu"
    knn_train: int = 200
    knn_val: int = 100
    knn_k: int = 5
    temperature: float = 0.05
    checkpoint: str | None = None
    mt_weight_range: tuple[float, float] = (0.1, 1.0)
    mt_memory: int = 1000
    search_space: str = "large"
    bhpo_startup: int = 1
    ucb_beta: float = 2.0

    def __post_init__(self) -> None:
        self.trials = check_positive(self.trials, "trials", integer=True)
        self.steps = check_positive(self.steps, "steps", integer=True)
        if self.search_space not in ("default", "large"):
            raise InputError(f"search_space: expected 'default' or 'large', got {self.search_space!r}")
        self.mt_memory = check_positive(self.mt_memory, "mt_memory", integer=True)
        if not 0 < self.val_fraction < 1:
            raise InputError(f"val_fraction: expected a value in (0, 1), got {self.val_fraction!r}")


@dataclass
class Member:
    """One trained network of a predictor (a trial)."""

    trainer: Trainer
    num_classes: int  # real classes C (the head may be padded for multilabel)
    score: float
    config: dict


@dataclass
class Predictor:
    members: list[Member]
    weights: np.ndarray
    kind: str
    curve: list[float]
    info: dict


# ---------------------------------------------------------------------- trial training variants
PIECEWISE = ((0.5, 0.1), (0.75, 0.01))  # (progress, lr scale) of the piece-wise constant schedule


class _SearchTrainer(Trainer):
    """The shared trainer with the searchable choices of BHPO's large space.

    ``schedule``: ``"cosine"`` (the trainer's) or ``"piecewise"`` (constant, scaled by
    :data:`PIECEWISE` at those fractions of the steps); ``crop`` / ``flip``: random crop after zero
    padding and horizontal flip, each on its own (the trainer's ``augment`` does both).
    """

    def __init__(self, *args: Any, schedule: str = "cosine", crop: bool = False, flip: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.schedule, self.crop, self.flip = schedule, bool(crop), bool(flip)

    def lr_at(self, step: int, total: int, steps_per_epoch: int) -> float:
        if self.schedule != "piecewise":
            return super().lr_at(step, total, steps_per_epoch)
        scale = 1.0
        for progress, s in PIECEWISE:
            if step >= int(progress * total):
                scale = s
        return self.cfg.lr * scale

    def batch(self, images: np.ndarray, idx: np.ndarray | slice, gen: torch.Generator | None = None) -> torch.Tensor:
        x = to_float_nchw(images[idx])
        if gen is not None and (self.crop or self.flip):
            x = augment_batch(x, gen, padding=self.cfg.crop_padding if self.crop else 0, flip=self.flip)
        return self.normaliser.apply(x)


# -------------------------------------------------------------------------- multilabel support
class _PatternBCE(nn.Module):
    """Sigmoid BCE where the integer label indexes a row of a 0/1 pattern matrix (C columns)."""

    def __init__(self, patterns: np.ndarray, label_smoothing: float) -> None:
        super().__init__()
        self.register_buffer("patterns", torch.as_tensor(patterns, dtype=torch.float32))
        self.c = patterns.shape[1]
        self.ls = float(label_smoothing)

    def forward(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        t = self.patterns.to(y.device)[y]
        t = t * (1.0 - self.ls) + 0.5 * self.ls
        return nn.functional.binary_cross_entropy_with_logits(logits[:, : self.c], t)


@dataclass
class _Part:
    """One task's share of a joint head: labels [label_offset, +n_labels), outputs [out_offset, +n_out)."""

    label_offset: int
    n_labels: int
    out_offset: int
    n_out: int
    weight: float
    patterns: np.ndarray | None  # multilabel: 0/1 row per label index (BCE on the first C outputs)
    label_smoothing: float


class _JointLoss(nn.Module):
    """Weighted sum of per-task losses on one network with one head block per task (MT, PT-MT).

    An example whose label falls in part k's label range is scored on part k's output block only
    (cross-entropy, or the sigmoid BCE of :class:`_PatternBCE` for a multilabel part); the loss is
    ``(1/B) * sum_i w_{k(i)} * loss_i`` over the batch.
    """

    def __init__(self, parts: list[_Part]) -> None:
        super().__init__()
        self.parts = parts
        for k, p in enumerate(parts):
            if p.patterns is not None:
                self.register_buffer(f"patterns{k}", torch.as_tensor(p.patterns, dtype=torch.float32))

    def forward(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        total = logits.new_zeros(())
        for k, p in enumerate(self.parts):
            sel = (y >= p.label_offset) & (y < p.label_offset + p.n_labels)
            z = logits[:, p.out_offset: p.out_offset + p.n_out]
            yy = (y - p.label_offset).clamp(0, p.n_labels - 1)
            if p.patterns is not None:
                pat = getattr(self, f"patterns{k}")
                t = pat.to(y.device)[yy] * (1.0 - p.label_smoothing) + 0.5 * p.label_smoothing
                per = nn.functional.binary_cross_entropy_with_logits(z[:, : pat.shape[1]], t, reduction="none").mean(1)
            else:
                per = nn.functional.cross_entropy(z, yy, label_smoothing=p.label_smoothing, reduction="none")
            total = total + p.weight * (per * sel.to(per.dtype)).sum()
        return total / max(1, y.shape[0])


def _split(n: int, frac: float, rng: np.random.Generator, labels: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Fit / validation indices; stratified by class when ``labels`` is given."""
    if labels is None:
        perm = rng.permutation(n)
        k = max(1, int(round(frac * n)))
        return np.sort(perm[k:]), np.sort(perm[:k])
    fit, val = [], []
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        k = int(round(frac * len(idx))) if len(idx) > 1 else 0
        val.append(idx[:k])
        fit.append(idx[k:])
    fit_i, val_i = np.sort(np.concatenate(fit)), np.sort(np.concatenate(val))
    if len(val_i) == 0:
        raise InputError(f"task has too few images ({n}) for a validation split")
    return fit_i, val_i


def _score(kind: str, logits: np.ndarray, targets: np.ndarray) -> float:
    if kind == "multilabel":
        # selection on a small validation split: a label without positives there says nothing
        # about the trial, so it is left out (the task's test error follows the run's setting)
        m = mean_average_precision(targets, logits, absent_labels="omit")
        return 0.0 if math.isnan(m) else m
    return float(np.mean(np.argmax(logits, axis=1) == targets))


# -------------------------------------------------------------------- trials through an engine
@dataclass(frozen=True)
class TrialEngine:
    """Where a task's search trials run: one after another in this process (the default), in
    ``max_parallel`` local processes, or as Ray tasks (the grid engine, :mod:`vistabench.jobs`).

    Not a learner setting: it changes where trials run, never what they compute (each trial's
    random draws are made in the driver, in the sequential order, before any trial runs), so it is
    not stored with the records. ``threads``: torch threads (and CPUs declared) per trial.
    """

    engine: str = "local"
    max_parallel: int | None = None
    ray_address: str | None = None
    threads: int = 1

    def __post_init__(self) -> None:
        from ..jobs import check_engine

        check_engine(self.engine, max_parallel=self.max_parallel, ray_address=self.ray_address)
        check_positive(self.threads, "threads", integer=True)

    def dispatches(self) -> bool:
        return self.engine == "ray" or (self.max_parallel or 1) > 1


@dataclass
class _TrialData:
    """What every trial of one task reads: the current task's training data and the chosen start
    (never another task's data, except the auxiliary task's kept examples for ``mt``)."""

    images: np.ndarray
    labels: np.ndarray
    targets: np.ndarray
    val_idx: np.ndarray
    kind: str
    num_classes: int
    num_outputs: int
    head: int
    patterns: np.ndarray | None
    e_points: int
    init: dict | None
    aux: dict | None


@dataclass
class _TrialOutcome:
    trainer: Trainer
    curve: list[float]
    steps: int
    flops: Any


def _trial_job(learner: "SearchLearner", data: _TrialData, plan: dict, threads: int) -> _TrialOutcome:
    """One trial in an engine's worker (a spawned process or a Ray task), with ``threads`` torch threads."""
    from ..progress import set_quiet

    set_quiet(True)
    before = torch.get_num_threads()
    torch.set_num_threads(int(threads))
    try:
        return learner._run_trial(data, plan)
    finally:
        torch.set_num_threads(before)


# ------------------------------------------------------------------------------------ learners
class StreamLearner:
    """Base class of stream learners. Subclasses implement :meth:`init`, :meth:`train`, :meth:`predict`.

    ``state_to_dict`` / ``state_from_dict`` turn the state into tensors and plain Python values
    (saved with ``torch.save`` and loaded with ``weights_only=True``) so a run can resume.
    """

    name = "base"

    def __init__(self, config: LearnerConfig | None = None) -> None:
        self.config = config or LearnerConfig()

    def init(self) -> Any:
        raise NotImplementedError

    def train(self, task: TaskView, data: Any, state: Any, ledger: ComputeLedger) -> tuple[Any, Any]:
        raise NotImplementedError

    def predict(self, predictor: Any, images: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def num_parameters(self, predictor: Any) -> int:
        return 0

    def state_to_dict(self, state: Any) -> dict:
        return {}

    def state_from_dict(self, d: dict) -> Any:
        return self.init()

    def settings(self) -> dict:
        out = asdict(self.config)
        out["learner"] = self.name
        return out


stream_learners: Registry[type[StreamLearner]] = Registry(
    "stream learner", modules=("vistabench.learners.stream_mt", "vistabench.learners.stream_bhpo"))


class SearchLearner(StreamLearner):
    """Random search over (learning rate, label smoothing); the initialisation is the subclass's choice."""

    ensemble = False
    count_in_trainer = False  # the ledger charges; True makes the trainer count too (a cross-check in tests)
    parallel_trials = True  # a task's trials are independent given their draws (False: each depends on the last)
    trial_engine: "TrialEngine | None" = None  # where a task's trials run (None: one after another here)

    def init(self) -> dict:
        return {"models": []}  # one entry per past task: uid, name, state_dict, num_outputs

    # -- initialisation of each trial's network (None = random init)
    def _init_from(self, task: TaskView, data: Any, fit_idx: np.ndarray, state: dict,
                   ledger: ComputeLedger) -> tuple[dict | None, str]:
        return None, "random"

    def _sample(self, rng: np.random.Generator) -> dict:
        lo, hi = self.config.lr_range
        ls_lo, ls_hi = self.config.label_smoothing_range
        return {"lr": float(math.exp(rng.uniform(math.log(lo), math.log(hi)))),
                "label_smoothing": float(rng.uniform(ls_lo, ls_hi))}

    def _build(self, num_outputs: int, channels: int, image_size: int, seed: int, init: dict | None,
               arch_options: dict | None = None) -> nn.Module:
        cfg = self.config
        model = build_model(cfg.arch, num_classes=num_outputs, in_channels=channels, image_size=image_size,
                            seed=seed, **(cfg.arch_options if arch_options is None else arch_options))
        if init is not None:
            sd = {k: v for k, v in init.items() if not k.startswith("classifier.")}
            missing, unexpected = model.load_state_dict(sd, strict=False)
            bad = [k for k in missing if not k.startswith("classifier.")]
            if bad or unexpected:
                raise InputError(f"initial weights do not fit {cfg.arch!r}: missing {bad[:3]}, unexpected {list(unexpected)[:3]}")
        return model

    # -- hooks of the search loop (defaults: random search, no auxiliary task, no memory)
    def _propose(self, rng: np.random.Generator, trial: int, history: list[tuple[dict, float]]) -> dict:
        """The next trial's hyper-parameters; ``history`` = (config, validation score) of the trials so far."""
        return self._sample(rng)

    def _aux_for(self, task: TaskView, init_from: str, state: dict) -> dict | None:
        """An auxiliary task to co-train with (``images``, ``labels``, ``n_labels``, ``n_out``, ``uid``) or None."""
        return None

    def _remember(self, task: TaskView, images: np.ndarray, labels: np.ndarray, rng: np.random.Generator) -> dict | None:
        """What of the current task to keep in the state for later tasks (None = nothing)."""
        return None

    def train(self, task: TaskView, data: Any, state: dict, ledger: ComputeLedger) -> tuple[dict, Predictor]:
        cfg = self.config
        rng = np.random.default_rng(task.seed)
        images, targets = data.images, data.targets
        n, h, w, b = images.shape
        shape = (b, h, w)
        if task.kind == "multilabel":
            patterns, labels = np.unique(targets, axis=0, return_inverse=True)
            labels = labels.reshape(-1)
            num_outputs = max(task.num_classes, len(patterns))
            fit_idx, val_idx = _split(n, cfg.val_fraction, rng, None)
        else:
            patterns, labels, num_outputs = None, np.asarray(targets), task.num_classes
            fit_idx, val_idx = _split(n, cfg.val_fraction, rng, labels)
        init, init_from = self._init_from(task, data, fit_idx, state, ledger)
        aux = self._aux_for(task, init_from, state)
        head = num_outputs + (aux["n_out"] if aux is not None else 0)
        bs0 = batch_size_for(len(fit_idx), max_batch=cfg.max_batch, min_batch=cfg.min_batch)
        e_points = eval_points(cfg.steps)
        per_chunk = cfg.steps // e_points
        members: list[Member] = []
        curves: list[list[float]] = []
        history: list[tuple[dict, float]] = []
        shared = _TrialData(images=images, labels=np.asarray(labels), targets=targets, val_idx=val_idx,
                            kind=task.kind, num_classes=task.num_classes, num_outputs=num_outputs, head=head,
                            patterns=patterns, e_points=e_points, init=init, aux=aux)

        def draw(trial: int) -> dict:
            """Every random draw of one trial, in the order of the sequential search (the rng is the
            driver's: training itself draws nothing from it)."""
            hp = self._propose(rng, trial, list(history))
            bs = int(min(len(fit_idx), max(1, round(bs0 * hp.get("batch_scale", 1.0)))))
            # one "epoch" = steps/E full batches drawn from repeated shuffles of the fit part
            reps = int(math.ceil(per_chunk * bs / len(fit_idx)))
            order = np.concatenate([rng.permutation(fit_idx) for _ in range(reps)])[: per_chunk * bs]
            model_seed = int(rng.integers(2**31))
            a_order = None
            if aux is not None:  # co-training: every step also takes bs images of the auxiliary task
                a_order = np.concatenate([rng.permutation(len(aux["labels"]))
                                          for _ in range(int(math.ceil(per_chunk * bs / len(aux["labels"]))))])
                a_order = a_order[: per_chunk * bs]
            return {"trial": trial, "hp": hp, "bs": bs, "order": order, "model_seed": model_seed,
                    "a_order": a_order, "train_seed": int(rng.integers(2**31))}

        def absorb(plan: dict, out: _TrialOutcome) -> None:
            """Charge one trial to the ledger and keep it (in trial order, whichever engine ran it)."""
            trial, hp, bs, tr = plan["trial"], plan["hp"], plan["bs"], out.trainer
            ledger.charge_train(tr.model, shape, bs, out.steps, loss_fn=tr.loss_fn, what=f"trial {trial}")
            if aux is not None:
                ledger.charge_train(tr.model, shape, bs, out.steps, loss_fn=tr.loss_fn,
                                    what=f"trial {trial} auxiliary ({aux['uid']})")
            ledger.charge_forward(tr.model, shape, len(val_idx) * len(out.curve), what=f"trial {trial} validation")
            members.append(Member(tr, task.num_classes, out.curve[-1], {**hp, "batch_size": bs, "steps": out.steps,
                                                                        "trainer_flops": out.flops}))
            curves.append(out.curve)
            history.append((hp, out.curve[-1]))

        engine = self.trial_engine
        if engine is not None and engine.dispatches() and self.parallel_trials and cfg.trials > 1:
            from ..jobs import Job, run_jobs

            plans = [draw(t) for t in range(cfg.trials)]
            gpus = 1.0 if cfg.device.startswith("cuda") and engine.engine == "ray" else 0.0
            jobs = [Job(_trial_job, (self, shared, plan, engine.threads), tag=plan["trial"], gpus=gpus)
                    for plan in plans]
            done: dict[int, _TrialOutcome] = {}
            outcomes = run_jobs(jobs, engine=engine.engine, max_parallel=engine.max_parallel,
                                cpus_per_job=engine.threads, ray_address=engine.ray_address)
            try:
                for out in outcomes:
                    done[out.job.tag] = out.result()  # a failed trial fails the task, as in sequence
            finally:
                outcomes.close()
            for plan in plans:
                absorb(plan, done[plan["trial"]])
        else:
            for trial in range(cfg.trials):
                plan = draw(trial)
                absorb(plan, self._run_trial(shared, plan))
        best = int(np.argmax([m.score for m in members]))
        if self.ensemble:
            s = np.array([m.score for m in members]) / cfg.temperature
            wts = np.exp(s - s.max())
            wts /= wts.sum()
            chosen = members
        else:
            wts, chosen = np.ones(1), [members[best]]
        entry = {"uid": task.uid, "name": task.name, "num_outputs": head,
                 "state_dict": {k: v.detach().cpu().clone() for k, v in members[best].trainer.model.state_dict().items()}}
        if "width" in members[best].config:
            entry["width"] = int(members[best].config["width"])
        state = {**state, "models": list(state["models"]) + [entry]}
        kept = self._remember(task, images, np.asarray(labels), rng)
        if kept is not None:
            state["memory"] = {**state.get("memory", {}), task.uid: kept}
        info = {"init_from": init_from, "best_trial": best, "trial_scores": [m.score for m in members],
                "trial_configs": [m.config for m in members], "batch_size": bs0, "eval_points": e_points,
                "fit_images": int(len(fit_idx)), "val_images": int(len(val_idx)),
                "aux_task": aux["uid"] if aux is not None else None}
        return state, Predictor(chosen, wts, task.kind, curves[best], info)

    def _run_trial(self, d: "_TrialData", plan: dict) -> "_TrialOutcome":
        """Train one trial from its draws (``plan``) on the current task's data ``d``; touches no rng,
        no ledger and no state, so it can run in any process."""
        cfg = self.config
        hp, bs = plan["hp"], plan["bs"]
        _, h, _, b = d.images.shape
        x, y = d.images[plan["order"]], d.labels[plan["order"]]
        arch_options = dict(cfg.arch_options)
        if "width" in hp:
            arch_options["width"] = int(hp["width"])
        model = self._build(d.head, b, h, seed=plan["model_seed"], init=d.init, arch_options=arch_options)
        n_cur = len(d.patterns) if d.patterns is not None else d.num_outputs
        if d.aux is not None:
            a_order = plan["a_order"]
            x = np.concatenate([x, d.aux["images"][a_order]])
            y = np.concatenate([y, d.aux["labels"][a_order] + n_cur])
            parts = [_Part(0, n_cur, 0, d.num_outputs, 1.0, d.patterns, hp["label_smoothing"]),
                     _Part(n_cur, d.aux["n_labels"], d.num_outputs, d.aux["n_out"], hp["aux_weight"], None, 0.0)]
            loss: nn.Module | None = _JointLoss(parts)
            step_bs = 2 * bs
        else:
            loss = _PatternBCE(d.patterns, hp["label_smoothing"]) if d.patterns is not None else None
            step_bs = bs
        tcfg = TrainConfig(epochs=d.e_points, lr=hp["lr"], weight_decay=cfg.weight_decay, batch_size=step_bs,
                           momentum=cfg.momentum, seed=plan["train_seed"], device=cfg.device,
                           label_smoothing=hp["label_smoothing"], eval_batch_size=512,
                           count_flops=self.count_in_trainer,
                           augment=bool(hp.get("crop", False) or hp.get("flip", False)),
                           crop_padding=max(1, h // 8))
        curve: list[float] = []
        val_x, val_t = d.images[d.val_idx], d.targets[d.val_idx]
        holder: dict[str, Trainer] = {}

        def on_epoch(epoch: int, metrics: dict) -> None:
            logits = holder["tr"].predict_logits(val_x)[:, : d.num_classes]
            curve.append(_score(d.kind, logits, val_t))

        tr = _SearchTrainer(model, tcfg, loss_fn=loss, callback=on_epoch, schedule=hp.get("schedule", "cosine"),
                            crop=hp.get("crop", False), flip=hp.get("flip", False))
        holder["tr"] = tr
        res = tr.fit(x, y)
        tr.callback = None  # the closure stays here: the trainer may travel back to the driver
        return _TrialOutcome(tr, curve, int(res.steps), res.flops)

    def predict(self, predictor: Predictor, images: np.ndarray) -> np.ndarray:
        images = np.array(images, copy=True)  # a writable private copy (torch warns on read-only arrays)
        out = None
        for m, wt in zip(predictor.members, predictor.weights):
            logits = m.trainer.predict_logits(images)[:, : m.num_classes].astype(np.float64)
            if predictor.kind == "multilabel":
                p = 1.0 / (1.0 + np.exp(-logits))
            else:
                z = logits - logits.max(axis=1, keepdims=True)
                p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
            out = wt * p if out is None else out + wt * p
        return out

    def num_parameters(self, predictor: Predictor) -> int:
        return int(sum(p.numel() for m in predictor.members for p in m.trainer.model.parameters()))

    def state_to_dict(self, state: dict) -> dict:
        out = {"models": state["models"]}
        if "memory" in state:
            out["memory"] = state["memory"]
        return out

    def state_from_dict(self, d: dict) -> dict:
        out = {"models": list(d.get("models", []))}
        if "memory" in d:
            out["memory"] = dict(d["memory"])
        return out


@stream_learners.register("indep")
class Indep(SearchLearner):
    """Random init, random search over learning rate and label smoothing, keep the best trial."""

    name = "indep"


@stream_learners.register("ensemble")
class Ensemble(SearchLearner):
    """Indep whose predictor is the softmax(score / T)-weighted ensemble of all trials."""

    name = "ensemble"
    ensemble = True


@stream_learners.register("ft-prev")
class FTPrev(SearchLearner):
    """Every trial fine-tunes the previous task's network (new head)."""

    name = "ft-prev"

    def _init_from(self, task, data, fit_idx, state, ledger):
        if not state["models"]:
            return None, "random"
        last = state["models"][-1]
        return last["state_dict"], last["uid"]


@stream_learners.register("ft-d")
class FTD(SearchLearner):
    """Fine-tune from the past network whose features give the best k-NN accuracy on the new task."""

    name = "ft-d"

    def _init_from(self, task, data, fit_idx, state, ledger):
        if not state["models"]:
            return None, "random"
        return self._most_related(task, data, fit_idx, state, ledger)

    def _most_related(self, task, data, fit_idx, state, ledger):
        from sklearn.neighbors import KNeighborsClassifier

        cfg = self.config
        rng = np.random.default_rng(task.seed + 1)
        idx = rng.permutation(fit_idx)
        tr_i, va_i = idx[: cfg.knn_train], idx[cfg.knn_train: cfg.knn_train + cfg.knn_val]
        if len(va_i) == 0:  # small task: hold out a third of the subset
            k = max(1, len(idx) // 3)
            tr_i, va_i = idx[k:], idx[:k]
        targets = data.targets
        if task.kind == "multilabel":  # exact-match accuracy over label patterns
            _, y = np.unique(targets, axis=0, return_inverse=True)
            y = y.reshape(-1)
        else:
            y = np.asarray(targets)
        n, h, w, b = data.images.shape
        sub = np.concatenate([tr_i, va_i])
        norm = Normaliser.fit(data.images[sub])
        scores = []
        for entry in state["models"]:
            opts = dict(cfg.arch_options, **({"width": entry["width"]} if "width" in entry else {}))
            model = self._build(entry["num_outputs"], b, h, seed=0, init=entry["state_dict"], arch_options=opts)
            model.load_state_dict(entry["state_dict"])
            tr = Trainer(model, TrainConfig(epochs=1, device=cfg.device, count_flops=False))
            tr.normaliser = norm
            f_tr, f_va = tr.features(data.images[tr_i]), tr.features(data.images[va_i])
            ledger.charge_forward(model, (b, h, w), len(sub), what=f"k-NN relatedness of {entry['uid']}")
            knn = KNeighborsClassifier(n_neighbors=min(cfg.knn_k, len(tr_i))).fit(f_tr, y[tr_i])
            scores.append(float(np.mean(knn.predict(f_va) == y[va_i])))
        best = int(np.argmax(scores))  # ties: the earliest task
        entry = state["models"][best]
        self.last_relatedness = {e["uid"]: s for e, s in zip(state["models"], scores)}
        return entry["state_dict"], entry["uid"]


@stream_learners.register("pt")
class PT(SearchLearner):
    """Fine-tune every task from one pretrained checkpoint (``LearnerConfig.checkpoint``)."""

    name = "pt"

    def __init__(self, config: LearnerConfig | None = None) -> None:
        super().__init__(config)
        if not self.config.checkpoint:
            raise InputError("learner 'pt' needs a checkpoint: pass --checkpoint FILE (a state dict saved with torch.save)")
        p = Path(self.config.checkpoint)
        if not p.is_file():
            raise InputError(f"--checkpoint {str(p)!r}: no such file")
        try:
            sd = torch.load(p, map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises UnpicklingError / RuntimeError variants; its text advises
            # an unsafe load, so it is not repeated
            raise InputError(f"--checkpoint {str(p)!r}: not a weights-only state dict (tensors only, as written by "
                             "torch.save(model.state_dict(), FILE)); refusing to load other objects") from exc
        if isinstance(sd, dict) and "state_dict" in sd:
            sd = sd["state_dict"]
        if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
            raise InputError(f"--checkpoint {str(p)!r}: expected a dict of tensors (a model state_dict)")
        self.pretrained = sd
        from .stream_pretrain import pretrain_cost

        self.pretrain_flops = pretrain_cost(p)  # reported apart from the stream's cFLOP

    def settings(self) -> dict:
        out = super().settings()
        out["pretrain_flops"] = self.pretrain_flops
        return out

    def _init_from(self, task, data, fit_idx, state, ledger):
        return self.pretrained, "checkpoint"


def learner_names() -> list[str]:
    """Names of every registered stream learner (``indep``, ..., ``mt``, ``bhpo``)."""
    return stream_learners.names()


def make_learner(name: str, **config: Any) -> StreamLearner:
    """Instantiate a registered stream learner with :class:`LearnerConfig` options."""
    cls = stream_learners.get(name)
    known = set(LearnerConfig.__dataclass_fields__)
    unknown = sorted(set(config) - known)
    if unknown:
        raise InputError(f"learner options {unknown} unknown (known: {sorted(known)})")
    return cls(LearnerConfig(**config))


def save_checkpoint(model: nn.Module, path: str | Path) -> Path:
    """Save a model's state dict for the ``pt`` learner (tensors only, loadable with weights_only=True)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, p)
    return p

