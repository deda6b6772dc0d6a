"""The search learner every Nevis'22 baseline builds on: per task, ``trials`` trainings of ``steps``
SGD steps with hyper-parameters drawn from the search space, the best one (or all, for the
ensemble) kept; where each trial's network starts is the subclass's choice (:mod:`.baselines`).

The recipe is the config's (:class:`~vistabench.learners.stream.options.LearnerConfig`): learning rate
log-uniform in ``lr_range`` and label smoothing uniform in ``label_smoothing_range``; SGD with
``momentum`` (Nesterov with ``nesterov``) and L2 weight decay added to the gradient before the
momentum (dm_nevis's ``sgdw``: ``optax.add_decayed_weights`` then ``optax.sgd``), on every parameter
(``decay_mask="all"``) or on conv / linear weights only (``"weights"``, dm_nevis's mask of the
parameters named ``w``); the batch size from the training-set size (``batch_size_rule``,
:func:`~vistabench.learners.stream.options.batch_size_for`); the schedule a cosine to 0 or optax's
warm-up cosine (``warmup_epochs``, to ``final_lr``); with ``keep_best_state`` the trial keeps the
network of its best validation point (dm_nevis's early-stopping state) while its score stays the
last validation point (dm_nevis returns the last validation metric as the trial's cost).

Each trial's ``steps`` are split into ``E`` equal chunks (E = the largest of 4, 3, 2, 1 dividing
``steps``) after each of which the validation score is measured: the best trial's scores against
progress ``e / E`` are the learning curve used for forward transfer. Multilabel tasks train with a
sigmoid binary cross-entropy on a head padded to one output per distinct label pattern (the shared
trainer takes integer labels; only the first C outputs are scores); their validation score is mAP
(``multilabel_selection: map``) or 1 − dm_nevis's per-label error (``error``). ``input_scaling``
and ``weight_init`` choose the networks' input scaling (:func:`input_normaliser`) and a fresh
network's initialisation (:func:`haiku_init`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from ...engine import Engine
from ...errors import InputError
from ...metrics.stream import mean_average_precision
from ..models import build_model
from ..tensors import Normaliser, augment_batch, to_float_nchw
from ..trainer import TrainConfig, Trainer
from .base import ComputeLedger, StreamLearner, TaskView
from .losses import JointLoss, LossPart, PatternBCE
from .options import TrialSchedule, batch_size_for, eval_points, warmup_cosine_lr
from ..lanes import seeded

__all__ = ["SearchLearner", "SearchTrainer", "TrialEngine", "Member", "Predictor", "PIECEWISE", "split_indices",
           "selection_score", "input_normaliser", "haiku_init"]



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


class SearchTrainer(Trainer):
    """The shared trainer with the stream recipe's choices and those of BHPO's large space: ``trial``
    (:class:`~.options.TrialSchedule`) holds the stream's recipe (its schedule: the trainer's cosine or
    optax's warm-up cosine), the trial's own schedule (``piecewise``: constant, scaled by
    :data:`PIECEWISE` at those fractions of the steps), its crop and flip (each on its own; the
    trainer's ``augment`` does both) and weight decay on conv / linear weights only.
    """

    def __init__(self, *args: Any, trial: TrialSchedule | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trial = trial if trial is not None else TrialSchedule()

    def lr_at(self, step: int, total: int, steps_per_epoch: int) -> float:
        t = self.trial
        if t.shape == "piecewise":
            scale = 1.0
            for progress, s in PIECEWISE:
                if step >= int(progress * total):
                    scale = s
            return self.cfg.lr * scale
        if t.recipe.schedule == "warmup-cosine":
            warm = min(total - 1, t.recipe.warmup_epochs * t.steps_per_data_epoch)
            return warmup_cosine_lr(step, total, peak=self.cfg.lr, warmup_steps=warm, final=t.final_lr)
        return super().lr_at(step, total, steps_per_epoch)

    def fit(self, *args: Any, **kwargs: Any) -> Any:
        if not self.trial.masked_decay:
            return super().fit(*args, **kwargs)
        wd = self.trial.masked_decay
        handles = [p.register_hook(lambda g, p=p: g + wd * p.detach())
                   for p in self.model.parameters() if p.requires_grad and p.dim() > 1]
        try:
            return super().fit(*args, **kwargs)
        finally:
            for h in handles:
                h.remove()

    def batch(self, images: np.ndarray, idx: np.ndarray | slice, gen: torch.Generator | None = None) -> torch.Tensor:
        x = to_float_nchw(images[idx])
        if gen is not None and (self.trial.crop or self.trial.flip):
            x = augment_batch(x, gen, padding=self.cfg.crop_padding if self.trial.crop else 0, flip=self.trial.flip)
        return self.normaliser.apply(x)


def input_normaliser(config: Any, images: np.ndarray) -> Normaliser | None:
    """The fixed input scaling of ``input_scaling: minus_one_one`` (dm_nevis
    ``experiments_jax/training/augmentations.py:68–88``: ``2 · x/255 − 1``, uint8 pixels to [−1, 1]) as a
    :class:`~..tensors.Normaliser` (mean 0.5, std 0.5 per channel after the 1/255 scaling); None for
    ``standardise`` (the trainer measures the task's mean/std)."""
    if config.input_scaling != "minus_one_one":
        return None
    b = images.shape[3]
    return Normaliser(mean=np.full(b, 0.5), std=np.full(b, 0.5), dtype=str(images.dtype))


def haiku_init(model: nn.Module) -> None:
    """haiku's default initialisation of ``hk.Conv2D`` / ``hk.Linear`` (what dm_nevis's networks and
    heads use): convolutions ``VarianceScaling(1.0, "fan_in", "truncated_normal")`` — a normal truncated
    at ±2 std, std √(1/fan_in)/0.8796 so that the truncated draw has variance 1/fan_in; linear layers
    ``TruncatedNormal(1/√fan_in)`` (±2 std, no correction); biases 0. Batch norms keep γ 1, β 0.
    Draws from the current torch RNG."""
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            fan_in = m.weight[0].numel()
            std = math.sqrt(1.0 / fan_in) / (0.87962566103423978 if isinstance(m, nn.Conv2d) else 1.0)
            nn.init.trunc_normal_(m.weight, mean=0.0, std=std, a=-2 * std, b=2 * std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


def split_indices(n: int, frac: float, rng: np.random.Generator, labels: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
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


def selection_score(kind: str, logits: np.ndarray, targets: np.ndarray, *, multilabel: str = "map") -> float:
    """A trial's validation score (higher is better): accuracy; for multilabel tasks the mAP over the
    labels with positives (``multilabel="map"``) or 1 − dm_nevis's error (``"error"``: the mean over
    examples and labels of ``predicted != target``, a label predicted present when its probability
    exceeds 0.5, i.e. logit > 0: ``experiments_jax/training/heads.py:191``, the Bernoulli's mode)."""
    if kind == "multilabel" and multilabel == "error":
        return float(1.0 - np.mean((np.asarray(logits) > 0) != (np.asarray(targets) > 0.5)))
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
    ``max_parallel`` local processes, or as Ray tasks (the job runner, :mod:`vistabench.jobs`).

    Not a learner setting: it changes where trials run, never what they compute (each trial's
    random draws are made in the driver, in the sequential order, before any trial runs), so it is
    not stored with the records. ``engine``: the :class:`~vistabench.engine.Engine` (checked when
    made); ``threads_per_trial``: torch threads (and CPUs declared) per trial.
    """

    engine: Engine = field(default_factory=Engine)
    threads_per_trial: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.engine, Engine):
            raise TypeError(f"engine: expected an Engine, got {type(self.engine).__name__}")  # a caller's bug
        if (isinstance(self.threads_per_trial, bool) or not isinstance(self.threads_per_trial, int)
                or self.threads_per_trial < 1):
            raise InputError(f"threads: expected a positive integer, got {self.threads_per_trial!r}")

    def dispatches(self) -> bool:
        return self.engine.dispatches()


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
    n_fit: int = 1  # images of the fit part (one data epoch = n_fit // batch + 1 steps, as dm_nevis)


@dataclass
class _TrialOutcome:
    trainer: Trainer
    curve: list[float]
    steps: int
    flops: Any
    kept_point: int | None = None  # keep_best_state: the validation point (1-based) whose network is kept


def _trial_job(learner: "SearchLearner", data: _TrialData, plan: dict, threads: int) -> _TrialOutcome:
    """One trial in an engine's worker (a spawned process or a Ray task), with ``threads`` torch threads."""
    from ...progress import set_quiet

    set_quiet(True)
    before = torch.get_num_threads()
    torch.set_num_threads(int(threads))
    try:
        return learner._run_trial(data, plan)
    finally:
        torch.set_num_threads(before)



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
        model = build_model(cfg.model, num_classes=num_outputs, in_channels=channels, image_size=image_size,
                            seed=seed, pretrained=cfg.pretrained,
                            **(cfg.arch_options if arch_options is None else arch_options))
        if init is None and cfg.weight_init == "haiku" and cfg.pretrained is None:
            with seeded(seed):
                haiku_init(model)
        if init is not None:
            what = getattr(self, "init_names", {}).get(id(init), "initial weights")
            sd = {k: v for k, v in init.items() if not k.startswith("classifier.")}
            own = model.state_dict()
            for k, v in sd.items():
                if k in own and tuple(own[k].shape) != tuple(v.shape):
                    raise InputError(f"{what}: tensor {k!r} has shape {list(v.shape)}, the {cfg.model!r} network of "
                                     f"this run ({arch_options or cfg.arch_options}) expects {list(own[k].shape)} "
                                     "(another width or architecture?)")
            missing, unexpected = model.load_state_dict(sd, strict=False)
            bad = [k for k in missing if not k.startswith("classifier.")]
            if bad or unexpected:
                raise InputError(f"{what} do not fit {cfg.model!r}: missing {bad[:3]}, unexpected {list(unexpected)[:3]}")
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
            fit_idx, val_idx = split_indices(n, cfg.val_fraction, rng, None)
        else:
            patterns, labels, num_outputs = None, np.asarray(targets), task.num_classes
            fit_idx, val_idx = split_indices(n, cfg.val_fraction, rng, labels)
        init, init_from = self._init_from(task, data, fit_idx, state, ledger)
        aux = self._aux_for(task, init_from, state)
        head = num_outputs + (aux["n_out"] if aux is not None else 0)
        bs0 = batch_size_for(len(fit_idx), rule=cfg.batch_size_rule, max_batch=cfg.max_batch, min_batch=cfg.min_batch)
        e_points = eval_points(cfg.steps)
        per_chunk = cfg.steps // e_points
        members: list[Member] = []
        curves: list[list[float]] = []
        history: list[tuple[dict, float]] = []
        shared = _TrialData(images=images, labels=np.asarray(labels), targets=targets, val_idx=val_idx,
                            kind=task.kind, num_classes=task.num_classes, num_outputs=num_outputs, head=head,
                            patterns=patterns, e_points=e_points, init=init, aux=aux,
                            n_fit=int(len(fit_idx)))

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
                                                                        "trainer_flops": out.flops,
                                                                        "kept_point": out.kept_point}))
            curves.append(out.curve)
            history.append((hp, out.curve[-1]))

        engine = self.trial_engine
        if engine is not None and engine.dispatches() and self.parallel_trials and cfg.trials > 1:
            from ...jobs import Job, run_jobs

            plans = [draw(t) for t in range(cfg.trials)]
            gpus = 1.0 if cfg.device.startswith("cuda") and engine.engine.engine == "ray" else 0.0
            jobs = [Job(_trial_job, (self, shared, plan, engine.threads_per_trial), tag=plan["trial"], gpus=gpus)
                    for plan in plans]
            done: dict[int, _TrialOutcome] = {}
            outcomes = run_jobs(jobs, engine=engine.engine, cpus_per_job=engine.threads_per_trial)
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
            parts = [LossPart(0, n_cur, 0, d.num_outputs, 1.0, d.patterns, hp["label_smoothing"]),
                     LossPart(n_cur, d.aux["n_labels"], d.num_outputs, d.aux["n_out"], hp["aux_weight"], None, 0.0)]
            loss: nn.Module | None = JointLoss(parts)
            step_bs = 2 * bs
        else:
            loss = PatternBCE(d.patterns, hp["label_smoothing"]) if d.patterns is not None else None
            step_bs = bs
        masked = cfg.decay_mask == "weights"
        # the recipe whole; the trial sets its budget and hyper-parameters (its schedule: the SearchTrainer's;
        # masked weight decay: applied by the SearchTrainer to the weights only)
        tcfg = TrainConfig.from_recipe(cfg, epochs=d.e_points, lr=hp["lr"],
                                       weight_decay=0.0 if masked else cfg.weight_decay, batch_size=step_bs,
                                       seed=plan["train_seed"], label_smoothing=hp["label_smoothing"],
                                       eval_batch_size=512, count_flops=self.count_in_trainer,
                                       augment=bool(hp.get("crop", False) or hp.get("flip", False)),
                                       crop_padding=max(1, h // 8))
        curve: list[float] = []
        val_x, val_t = d.images[d.val_idx], d.targets[d.val_idx]
        holder: dict[str, Any] = {}

        def on_epoch(epoch: int, metrics: dict) -> None:
            logits = holder["tr"].predict_logits(val_x)[:, : d.num_classes]
            curve.append(selection_score(d.kind, logits, val_t, multilabel=cfg.multilabel_selection))
            if cfg.keep_best_state and ("best" not in holder or curve[-1] > holder["best"]):
                holder["best"], holder["best_point"] = curve[-1], len(curve)
                holder["state"] = {k: v.detach().clone() for k, v in holder["tr"].model.state_dict().items()}

        tr = SearchTrainer(model, tcfg, loss_fn=loss, callback=on_epoch,
                           trial=TrialSchedule.of_trial(cfg, hp, steps_per_data_epoch=d.n_fit // bs + 1))
        holder["tr"] = tr
        res = tr.fit(x, y, normaliser=input_normaliser(cfg, d.images))
        tr.callback = None  # the closure stays here: the trainer may travel back to the driver
        if "state" in holder:  # dm_nevis: the trial's network is its best validation state ...
            tr.model.load_state_dict(holder["state"])
        # ... while its score is the last validation point (dm_nevis's cost of the trial)
        return _TrialOutcome(tr, curve, int(res.steps), res.flops, holder.get("best_point"))

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

