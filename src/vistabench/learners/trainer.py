"""One trainer for every protocol: SGD with momentum, a learning-rate schedule, FLOP accounting.

>>> import numpy as np
>>> from vistabench.learners.models import build_model
>>> rng = np.random.default_rng(0)
>>> x = rng.integers(0, 256, (40, 8, 8, 1), dtype=np.uint8); y = np.arange(40) % 2
>>> tr = Trainer(build_model("cnn28", num_classes=2, in_channels=1, seed=0),
...              TrainConfig(epochs=1, batch_size=16, lr=0.05))
>>> res = tr.fit(x, y)
>>> tr.predict_logits(x).shape, res.steps, res.flops > 0
((40, 2), 3, True)

Schedule: by default the learning rate follows a cosine from ``lr`` to 0 **per optimisation step**,
``lr_t = lr * (1 + cos(pi * t / T)) / 2`` for step t of T = epochs x steps-per-epoch, after an
optional linear warm-up over ``warmup_epochs``; per-epoch step and cosine schedules are in
:mod:`.schedules`. Weight decay is SGD's L2 term on every trainable parameter.

Determinism: everything random inside :meth:`Trainer.fit` (shuffling, class-balanced sampling,
augmentation, dropout) is drawn from generators seeded with ``TrainConfig.seed``; the global torch
RNG is left as it was. Together with ``build_model(..., seed=s)`` the same seeds give bitwise
identical logits on the CPU with the same number of threads. GPU kernels (cuDNN) may not be
bitwise deterministic.

Cost: the loop adds no host synchronisation per step (loss and accuracy are summed on the device
and read once per epoch) and converts each batch from the stored uint8 arrays as it goes (well under
1 ms for 128 CIFAR images, against ~0.4 s for a ResNet-32 step on a CPU core). On a CPU the optimizer's
update of a small network (no weight over :data:`~.openmp.SMALL_UPDATE` elements) runs on one
OpenMP thread (:mod:`.openmp`: element-wise, the same bits; it saves ~20 wakes of torch's other
threads per step), and its steps run with every thread of the process on one CPU when the first fit
of that network shape measured this faster (:mod:`.one_cpu`: the same threads and split, the same
bits; 1.3-1.7x on dhn's digits run). On a CPU the batches
keep the arrays' channels-last memory (:meth:`Trainer.batch`), so the model's convolutions run
channels-last, ~20% faster than on contiguous NCHW batches; ``benchmarks/bench_trainer_overhead.py``
times the trainer against bare PyTorch loops.

Module layout: :mod:`.train_config` (TrainConfig, TrainResult, resolve_device, ...), :mod:`.prediction`
(predicting with the fitted model: ``predict_logits``, ``features``, ``apply``),
:mod:`.schedules` (learning rates), :mod:`.sampling` (epoch orders, batches), :mod:`.sources`
(where batches come from: ``TrainConfig.loader``); their public names are re-exported here.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, Iterator, Literal

import numpy as np
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from .. import epochs, progress
from .._validation import check_labels, check_same_length
from ..errors import InputError
from .flops import count_train_step_flops, count_forward_flops
from ..data.image_files import ImageFiles
from .distributed import DataParallel, check_devices, data_parallel_world, rank_device, run_data_parallel
from .lanes import loop_seed
from .one_cpu import StepPlacement
from .openmp import SMALL_UPDATE, one_thread
from .sampling import batch_indices, epoch_order
from .prediction import Predicting
from .sources import DataSource, make_source
from .schedules import learning_rate
from .tensors import Normaliser, augment_batch, check_images, to_float_nchw
from .train_config import (PRECISIONS, Device, EpochCallback, Sampler, Trainable, TrainConfig, TrainingDiverged,
                           TrainResult, TrainStep, check_precision, peak_rss_bytes, resolve_device)

__all__ = ["TrainConfig", "TrainResult", "Trainer", "resolve_device", "EpochCallback", "TrainStep", "epoch_order",
           "TrainingDiverged", "Device", "Sampler", "Trainable"]


class Trainer(Predicting):
    """Train a :class:`~vistabench.learners.models.Backbone` and predict with it.

    Parameters
    ----------
    model : nn.Module
        Maps (N, B, H, W) float -> (N, C) logits; needs ``.features`` and ``.classifier`` for
        :meth:`features` and ``trainable="classifier"``.
    cfg : TrainConfig
    loss_fn : callable, optional
        ``loss_fn(logits, targets) -> scalar`` (default: cross-entropy with
        ``cfg.label_smoothing``). If it has ``set_epoch(epoch)`` (0-based), the trainer calls it at
        the start of every epoch (deferred re-weighting uses this); if it has
        ``before_fit(trainer, images, labels)``, the trainer calls it once after the input
        normalisation is set and before the first step (two-stage methods use this); if that
        returns an index array, only those images are trained on (the rest is the loss's own
        hold-out set). A ``torch.nn.Module`` loss is moved to the device.
    step : callable, optional
        A :class:`TrainStep` ``step(x, y, x2, y2, epoch) -> (loss, logits)`` that replaces
        ``loss_fn(model(x), y)`` for methods whose training forward differs from ``model(x)``
        (multi-branch and multi-expert networks; ``model(x)`` stays the prediction). Everything
        else is the same loop; its FLOPs are counted on the first real step of every batch size
        (forward + backward, :class:`torch.utils.flop_counter.FlopCounterMode`). Not together with
        ``loss_fn``.
    callback : callable, optional
        ``callback(epoch, metrics) -> bool | None`` after every epoch (``epoch`` 1-based,
        ``metrics`` = that epoch's history entry). Returning True stops training; exceptions (for
        example ``optuna.TrialPruned``) propagate to the caller. Every epoch's entry also goes to
        the listeners of :mod:`vistabench.epochs` (how a tracked run logs its training curves).
    """

    def __init__(self, model: nn.Module, cfg: TrainConfig, *, loss_fn: Callable | None = None,
                 step: TrainStep | None = None, callback: EpochCallback | None = None) -> None:
        if not isinstance(model, nn.Module):
            raise InputError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(cfg, TrainConfig):
            raise InputError(f"cfg: expected a TrainConfig, got {type(cfg).__name__}")
        self.model = model
        self.cfg = cfg
        if step is not None and loss_fn is not None:
            raise InputError("step: a custom step computes its own loss; pass step or loss_fn, not both")
        if step is not None and not callable(step):
            raise InputError(f"step: expected a callable (x, y, x2, y2, epoch) -> (loss, logits), got {step!r}")
        device = resolve_device(cfg.device)
        check_devices(cfg, device)
        self.device = rank_device(device)  # cuda:LOCAL_RANK under torchrun (see .distributed)
        check_precision(cfg, self.device)
        self._amp = PRECISIONS[cfg.precision]  # autocast type, None for fp32
        self.loss_fn = loss_fn
        self.step = step
        self.callback = callback
        self.normaliser: Normaliser | None = None
        self._flop_cache: dict[tuple, int] = {}
        #: after a fit: its steps ran on one CPU and its loop drew nothing from torch's default
        #: generator, so more fits like it may run at once, one per CPU (:mod:`.lanes`)
        self.lane_ready = False
        self.model.to(self.device)
        if self._amp is not None and self.device.type == "cuda":
            self.model.to(memory_format=torch.channels_last)
        # what training and prediction call; the model itself when not compiled (the fp32 path as before)
        self._forward: Callable = torch.compile(self.model) if cfg.compile else self.model

    # ------------------------------------------------------------------------------- helpers

    @property
    def num_classes(self) -> int | None:
        head = getattr(self.model, "classifier", None)
        return getattr(head, "out_features", None) or getattr(self.model, "num_classes", None)

    @property
    def in_channels(self) -> int | None:
        return getattr(self.model, "in_channels", None)

    def autocast(self):
        """Context manager: ``torch.autocast`` in ``cfg.precision`` on the trainer's device (fp32: none)."""
        if self._amp is None:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self._amp)

    def batch(self, images: np.ndarray, idx: np.ndarray | slice, gen: torch.Generator | None = None) -> torch.Tensor:
        """``images[idx]`` (n, H, W, B) as the normalised float (n, B, H, W) tensor on the device that
        training sees; augmented (``cfg.augment``) with ``gen`` when one is given. Needs the
        normalisation of :meth:`fit` (set before its first step). Subclasses may override it.

        On a CPU the batch is in channels-last memory (the values and shape of NCHW; see the module
        docstring's "Cost"); on CUDA it is contiguous NCHW in fp32 and channels-last in a mixed
        precision (``cfg.precision``)."""
        x = to_float_nchw(images[idx], channels_last=self.device.type == "cpu" or self._amp is not None)
        return self.finish_batch(x, gen)

    def finish_batch(self, x: torch.Tensor, gen: torch.Generator | None = None) -> torch.Tensor:
        """The rest of :meth:`batch` for a float (n, B, H, W) tensor in [0, 1] (uint8 scaled): the
        augmentation (with ``gen``), the memory layout and the standardisation, on the device
        (``x`` may already be there: the ``"device"`` data source)."""
        channels_last = self.device.type == "cpu" or self._amp is not None
        if gen is not None:
            aug = self.cfg.augment
            x = aug(x, gen) if callable(aug) else augment_batch(x, gen, padding=self.cfg.crop_padding)
            if channels_last:  # cropping by indexing returns NCHW memory; the values are unchanged
                x = x.contiguous(memory_format=torch.channels_last)
        return self.normaliser.apply(x.to(self.device, non_blocking=True))  # type: ignore[union-attr]  # set by fit() first

    def _step_flops(self, input_shape: tuple[int, ...], n: int, trainable: str) -> int:
        key = (tuple(input_shape), n, trainable)
        if key not in self._flop_cache:
            loss = self.loss_fn if self.loss_fn is not None else nn.functional.cross_entropy
            self._flop_cache[key] = count_train_step_flops(self.model, input_shape, n, loss_fn=loss,
                                                           trainable=trainable)  # type: ignore[arg-type]
        return self._flop_cache[key]

    def _fwd_flops(self, input_shape: tuple[int, ...], n: int) -> int:
        key = ("fwd", tuple(input_shape), n)
        if key not in self._flop_cache:
            self._flop_cache[key] = count_forward_flops(self.model, input_shape, batch_size=n)
        return self._flop_cache[key]

    def lr_at(self, step: int, total: int, steps_per_epoch: int) -> float:
        """Learning rate of 0-based optimisation ``step`` of ``total``: linear warm-up over
        ``cfg.warmup_epochs`` x ``steps_per_epoch`` steps, then the cosine to 0 (see the module
        docstring); the per-epoch schedules of ``cfg.schedule`` otherwise
        (:func:`~.schedules.learning_rate`). Subclasses may override it (another schedule)."""
        return learning_rate(self.cfg, step, total, steps_per_epoch)

    # ----------------------------------------------------------------------------------- fit

    def fit(
        self,
        images: np.ndarray,
        labels: np.ndarray,
        *,
        val: tuple[np.ndarray, np.ndarray] | None = None,
        sampler: Sampler = "uniform",
        trainable: Trainable = "all",
        normaliser: Normaliser | None = None,
        second_sampler: np.ndarray | None = None,
        frozen_mode: Literal["eval", "train"] = "eval",
    ) -> TrainResult:
        """Train on (N, H, W, B) images and (N,) int labels.

        Parameters
        ----------
        images : ndarray, shape (N, H, W, B)
            uint8 (scaled by 1/255) or another numeric dtype; standardised per channel with the
            mean/std of these images (kept for prediction).
        labels : ndarray of int, shape (N,)
            In ``[0, C)``, C = the model's number of outputs.
        val : (images, labels), optional
            Scored after every epoch (``val_acc`` in the history, passed to the callback).
        sampler : {"uniform", "class_balanced"} or callable
            ``"uniform"``: each epoch is a shuffled pass over the N images. ``"class_balanced"``:
            each epoch draws N images with replacement, image i with probability
            ``1 / (C' * n_{y_i})`` (C' = classes present), so every class is equally likely.
            A callable ``sampler(labels, rng) -> indices`` gives each epoch's order (its length
            fixed over the epochs; e.g. a class-aware sampler).
        trainable : {"all", "classifier"}
            ``"classifier"`` freezes everything but ``model.classifier``: features are computed
            without gradients, in eval mode (``frozen_mode="eval"``: batch-norm statistics stay
            fixed) or in train mode (``"train"``: batch statistics, running averages updated, as
            cRT's reference code). With a ``step``, the step computes the features itself.
        normaliser : Normaliser, optional
            Use this input standardisation instead of measuring one on ``images`` (for example
            to fine-tune on new data with the statistics of an earlier training set).
        second_sampler : ndarray of float, shape (N,), optional
            Per-image probabilities (summing to 1) of a second sampler (BBN's reversed sampler):
            every batch gets a second batch of the same size drawn with replacement from them (its
            own generator, seeded with ``seed + 7``; augmented like the first), passed to ``step``
            as ``x2, y2``. Needs a trainer with a ``step``.

        Returns
        -------
        TrainResult
        """
        flags = [p.requires_grad for p in self.model.parameters()]
        try:
            with self.threads():
                return self._fit(images, labels, val=val, sampler=sampler, trainable=trainable,
                                 normaliser=normaliser, second_sampler=second_sampler, frozen_mode=frozen_mode)
        finally:  # classifier-only training switches gradients off; give the caller's flags back
            for p, f in zip(self.model.parameters(), flags):
                p.requires_grad_(f)

    @contextmanager
    def threads(self) -> Iterator[None]:
        """Context manager: torch uses ``cfg.threads`` CPU threads inside (None: unchanged)."""
        n = self.cfg.threads
        before = torch.get_num_threads()
        # set_num_threads also empties oneDNN's cache of compiled kernels: only call it for a change
        if n is None or n == before:
            yield
            return
        torch.set_num_threads(n)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def _fit(self, images: np.ndarray, labels: np.ndarray, *, val: tuple[np.ndarray, np.ndarray] | None,
             sampler: str | Callable, trainable: str, normaliser: Normaliser | None = None,
             second_sampler: np.ndarray | None = None, frozen_mode: str = "eval") -> TrainResult:
        cfg = self.cfg
        if not callable(sampler) and sampler not in ("uniform", "class_balanced"):
            raise InputError(f"sampler: expected 'uniform', 'class_balanced' or a callable, got {sampler!r}")
        if frozen_mode not in ("eval", "train"):
            raise InputError(f"frozen_mode: expected 'eval' or 'train', got {frozen_mode!r}")
        if trainable not in ("all", "classifier"):
            raise InputError(f"trainable: expected 'all' or 'classifier', got {trainable!r}")
        if trainable == "classifier" and not (hasattr(self.model, "features") and hasattr(self.model, "classifier")):
            raise InputError("trainable='classifier' needs a model with .features and .classifier")
        images = check_images(images, "images", in_channels=self.in_channels)
        labels = check_labels(labels, "labels", num_classes=self.num_classes)
        check_same_length("images", images, "labels", labels)
        n = len(labels)
        if cfg.batch_size > n:
            raise InputError(
                f"batch_size: expected at most the number of training images ({n}), got {cfg.batch_size}"
            )
        if second_sampler is not None:
            if self.step is None:
                raise InputError("second_sampler: needs a trainer with a step (the default loss uses one batch)")
            p = np.asarray(second_sampler)
            if p.shape != (n,) or not np.issubdtype(p.dtype, np.floating) or not np.all(p >= 0) \
                    or not np.isclose(p.sum(), 1.0):
                raise InputError(f"second_sampler: expected {n} non-negative probabilities summing to 1, "
                                 f"got shape {p.shape}, dtype {p.dtype}")
        if val is not None:
            if not (isinstance(val, tuple) and len(val) == 2):
                raise InputError("val: expected a tuple (images, labels)")
            val_images = check_images(val[0], "val images", in_channels=images.shape[3])
            val_labels = check_labels(val[1], "val labels", num_classes=self.num_classes)
            check_same_length("val images", val_images, "val labels", val_labels)

        t_start = time.perf_counter()
        if normaliser is not None:
            if not isinstance(normaliser, Normaliser):
                raise InputError(f"normaliser: expected a Normaliser, got {type(normaliser).__name__}")
            normaliser.check_compatible(images, "images")
            self.normaliser = normaliser
        else:
            self.normaliser = Normaliser.fit(images)
        if val is not None:
            self.normaliser.check_compatible(val_images, "val images")
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

        params = (list(self.model.classifier.parameters()) if trainable == "classifier"
                  else [p for p in self.model.parameters() if p.requires_grad])
        if trainable == "classifier":
            for p in self.model.parameters():
                p.requires_grad_(False)
            for p in params:
                p.requires_grad_(True)
        opt = torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay,
                              nesterov=cfg.nesterov and cfg.momentum > 0)
        loss_fn = self.loss_fn
        if loss_fn is None:
            ls = cfg.label_smoothing

            def loss_fn(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
                return nn.functional.cross_entropy(logits, y, label_smoothing=ls)
        elif isinstance(loss_fn, nn.Module):
            loss_fn.to(self.device)
        if hasattr(loss_fn, "before_fit"):  # e.g. a teacher pre-trained on the same images
            keep = loss_fn.before_fit(self, images, labels)
            if keep is not None:  # the loss holds some images out of training (an auxiliary set)
                images = images.take(keep) if isinstance(images, ImageFiles) else images[keep]
                labels = labels[keep]
                n = len(labels)
                if cfg.batch_size > n:
                    raise InputError(f"batch_size: expected at most the {n} training images left after the "
                                     f"loss's hold-out, got {cfg.batch_size}")

        if cfg.loader == "device" and type(self).batch is not Trainer.batch:
            raise InputError(f"loader: 'device' converts batches itself; {type(self).__name__} overrides "
                             "Trainer.batch, use loader memory or stream")

        def run(dp: DataParallel | None = None) -> TrainResult:  # on every rank of a data-parallel fit
            source = make_source(self, images, cfg.recipe)
            try:
                return self._loop(source, images, labels, val_images if val is not None else None,
                                  val_labels if val is not None else None, sampler, trainable, second_sampler,
                                  frozen_mode, loss_fn, opt, t_start, n, dp)
            finally:
                source.close()
        return run() if data_parallel_world(cfg) == 1 else run_data_parallel(self, run)

    def _loop(self, source: DataSource, images: np.ndarray, labels: np.ndarray, val_images: np.ndarray | None,
              val_labels: np.ndarray | None, sampler: str | Callable, trainable: str,
              second_sampler: np.ndarray | None, frozen_mode: str, loss_fn: Callable, opt: torch.optim.Optimizer,
              t_start: float, n: int, dp: DataParallel | None = None) -> TrainResult:
        cfg = self.cfg
        main = dp is None or dp.is_main  # rank 0 validates, reports and decides to stop
        seed = cfg.seed + (0 if dp is None else dp.seed_offset)  # dropout / augmentation draws per rank
        min_batch = 2 if dp is None else max(2, dp.world)  # a smaller last batch joins the one before
        params = None if dp is None else [p for g in opt.param_groups for p in g["params"]]
        val = None if val_images is None else (val_images, val_labels)
        scaler = torch.amp.GradScaler("cuda") if cfg.precision == "fp16" else None  # fp16: loss scaling
        rng = np.random.default_rng(cfg.seed)
        rng2 = np.random.default_rng(cfg.seed + 7)  # the second sampler's own draws
        aug_gen = torch.Generator().manual_seed(seed + 1) if cfg.augment else None
        for m in self.model.modules():  # a per-input cache (dhn's scattering) keeps augmented batches out
            if hasattr(m, "inputs_augmented"):
                m.inputs_augmented = aug_gen is not None
        if aug_gen is None:
            self._warm_inputs(images)
        first_order = sampler(labels, rng) if callable(sampler) else None
        steps_per_epoch = len(batch_indices(np.arange(n if first_order is None else len(first_order)),
                                            cfg.batch_size, drop_last=cfg.drop_last, min_batch=min_batch))
        total_steps = cfg.epochs * steps_per_epoch
        sample_shape = (images.shape[3], images.shape[1], images.shape[2])

        history: list[dict] = []
        flops = eval_flops = step = 0
        train_seconds = 0.0
        stopped = False
        seen = 0
        devices = [self.device] if self.device.type == "cuda" else []
        # a small network's update (every weight at most SMALL_UPDATE elements) runs on one OpenMP thread
        largest = max((p.numel() for g in opt.param_groups for p in g["params"]), default=0)
        one = self.device.type == "cpu" and largest <= SMALL_UPDATE
        # such a network's steps may also run faster with every thread on one CPU (.one_cpu: measured
        # once per network shape in a process, the same bits); not beside a stream loader's workers
        placement = StepPlacement(
            (type(self.model).__qualname__, sum(p.numel() for p in self.model.parameters()), cfg.batch_size,
             sample_shape, torch.get_num_threads()),
            measure=one and cfg.loader == "memory" and dp is None and torch.get_num_threads() > 1)
        # the generator seeded for the loop (and whether it drew from it); in a lane (.lanes) left alone
        with loop_seed(seed, devices) as untouched, placement:
            for epoch in progress.track(range(cfg.epochs), total=cfg.epochs, description="training"):
                if hasattr(loss_fn, "set_epoch"):
                    loss_fn.set_epoch(epoch)
                if callable(sampler):
                    order, first_order = (first_order if first_order is not None else sampler(labels, rng)), None
                else:
                    order = epoch_order(labels, rng, sampler)
                batches = batch_indices(order, cfg.batch_size, drop_last=cfg.drop_last, min_batch=min_batch)
                local = batches if dp is None else [dp.shard(b) for b in batches]  # this rank's shards
                if cfg.count_flops and self.step is None:  # a custom step is measured as it runs
                    for b in local:
                        flops += self._step_flops(sample_shape, len(b), trainable)
                if trainable == "all" or frozen_mode == "train":
                    self.model.train()
                else:
                    self.model.eval()
                    self.model.classifier.train()
                tot_loss = torch.zeros((), device=self.device)
                correct = torch.zeros((), dtype=torch.long, device=self.device)
                t0 = time.perf_counter()
                lr = cfg.lr
                for gb, b, x in zip(batches, local, source.epoch(local, aug_gen)):
                    t_step = time.perf_counter()
                    lr = self.lr_at(step, total_steps, steps_per_epoch)
                    for g in opt.param_groups:
                        g["lr"] = lr
                    y = torch.from_numpy(labels[b]).to(self.device)
                    x2 = y2 = None
                    if second_sampler is not None:
                        b2 = rng2.choice(n, size=len(gb), replace=True, p=second_sampler)
                        b2 = b2 if dp is None else dp.shard(b2)
                        x2, y2 = source.batch(b2, aug_gen), torch.from_numpy(labels[b2]).to(self.device)
                    key = ("step", len(b))
                    measure = self.step is not None and cfg.count_flops and key not in self._flop_cache
                    opt.zero_grad(set_to_none=True)
                    with FlopCounterMode(display=False) if measure else nullcontext() as counter:
                        with self.autocast():
                            loss, logits = self._loss(x, y, x2, y2, epoch, loss_fn, trainable)
                        (loss if scaler is None else scaler.scale(loss)).backward()
                    if measure:
                        self._flop_cache[key] = int(counter.get_total_flops())
                    if dp is not None:  # the global batch's gradient on every rank
                        dp.average_gradients(params, len(b), len(gb))
                    if self.step is not None and cfg.count_flops:
                        flops += self._flop_cache[key]
                    if scaler is None:
                        with one_thread(one):  # SGD is element-wise: the same bits on one thread (.openmp)
                            opt.step()
                    else:  # fp16: unscale, skip a step with inf/NaN gradients, adapt the scale
                        scaler.step(opt)
                        scaler.update()
                    tot_loss += loss.detach() * len(b)
                    correct += (logits.detach().argmax(1) == y).sum()
                    step += 1
                    seen += len(b)
                    placement.stepped(time.perf_counter() - t_step)
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                train_seconds += time.perf_counter() - t0
                entry, flops_val = self._epoch_entry(epoch, tot_loss, correct, sum(len(b) for b in batches), opt,
                                                     val if main else None, sample_shape, dp)
                eval_flops += flops_val
                history.append(entry)
                if main:
                    epochs.report(entry)  # the run's listeners (an experiment tracker: vistabench.tracking)
                stop = main and self.callback is not None and self.callback(epoch + 1, dict(entry))
                if stop if dp is None else dp.agree(bool(stop)):
                    stopped = True
                    break
        # fits like this one may run at once, one per CPU (.lanes): its steps ran on one CPU, no draws
        self.lane_ready = dp is None and placement.on_one_cpu and untouched is not None and bool(untouched.clean)
        sampler_name = getattr(sampler, "name", type(sampler).__name__) if callable(sampler) else sampler
        conf = dict(cfg.to_dict(), sampler=sampler_name if second_sampler is None else f"{sampler_name}+second",
                    trainable=trainable if self.step is None else "custom", frozen_mode=frozen_mode)
        return self._result(history, conf, flops=flops, eval_flops=eval_flops, steps=step, seen=seen,
                            seconds=time.perf_counter() - t_start, train_seconds=train_seconds, stopped=stopped, dp=dp)

    def _epoch_entry(self, epoch: int, tot_loss: torch.Tensor, correct: torch.Tensor, images: int,
                     opt: torch.optim.Optimizer, val: tuple[np.ndarray, np.ndarray] | None,
                     sample_shape: tuple[int, ...], dp: DataParallel | None) -> tuple[dict, int]:
        """The epoch's history entry (its ``images`` summed over the ranks of a data-parallel fit;
        validation accuracy where ``val`` is given) and the validation's FLOPs; a non-finite loss
        stops the fit (:class:`TrainingDiverged`)."""
        cfg = self.cfg
        if dp is not None:
            tot_loss, correct = dp.sum_(tot_loss, correct)
            if dp.device.type == "cpu":  # per-rank batch norm (gloo): running statistics averaged
                dp.average_norm_statistics(self.model)
        m_loss = float(tot_loss) / max(1, images)
        if not math.isfinite(m_loss):
            raise TrainingDiverged(
                f"lr: training loss became {m_loss} at epoch {epoch + 1} with lr={cfg.lr}; lower the learning "
                "rate (or the method options that scale the loss)"
            )
        entry = {"epoch": epoch + 1, "loss": m_loss, "train_acc": int(correct) / max(1, images),
                 "val_acc": float("nan"), "lr": opt.param_groups[0]["lr"]}
        flops = 0
        if val is not None:
            val_images, val_labels = val
            vl = self.predict_logits(val_images)
            entry["val_acc"] = float(np.mean(vl.argmax(1) == val_labels))
            if cfg.count_flops:
                flops = self._eval_flops(len(val_labels), sample_shape, val_images)
        return entry, flops

    def _result(self, history: list[dict], conf: dict, *, flops: int, eval_flops: int, steps: int, seen: int,
                seconds: float, train_seconds: float, stopped: bool, dp: DataParallel | None) -> TrainResult:
        """The fit's :class:`TrainResult`: its work and images summed over the ranks of a data-parallel
        fit, the largest peak memory of any rank (CUDA: torch's peak allocation; CPU: the process's
        peak RSS)."""
        if self.device.type == "cuda":
            peak, kind = int(torch.cuda.max_memory_allocated(self.device)), "cuda_max_allocated"
        else:
            peak, kind = peak_rss_bytes(), "process_max_rss"
        if dp is not None:
            flops, seen = (int(v) for v in dp.sum_(flops, seen, dtype=torch.int64))
            peak = dp.max_int(peak)
        return TrainResult(
            history=history, flops=int(flops), eval_flops=int(eval_flops), steps=steps, seconds=seconds,
            train_seconds=train_seconds, images_per_second=seen / train_seconds if train_seconds > 0 else float("nan"),
            peak_memory_bytes=peak, peak_memory_kind=kind, stopped_early=stopped,
            device=str(self.device), config=conf, normaliser=self.normaliser.to_dict(),
        )

    @torch.no_grad()
    def _warm_inputs(self, images: Any) -> None:
        """A model with ``warm_inputs(x) -> bool`` (dhn's networks: a per-input cache of a fixed
        transform) gets the un-augmented in-memory training set, normalised as the batches will be,
        in batches of ``cfg.eval_batch_size`` before the first step, until it answers False; the
        steps then find their inputs computed (one large call instead of one per small batch)."""
        warm = getattr(self.model, "warm_inputs", None)
        if warm is None or not isinstance(images, np.ndarray):
            return
        bs = self.cfg.eval_batch_size
        for s in range(0, len(images), bs):
            with self.autocast():  # as the steps will run (a cache key holds the autocast state)
                if not warm(self.batch(images, slice(s, s + bs))):
                    return

    def _loss(self, x: torch.Tensor, y: torch.Tensor, x2: torch.Tensor | None, y2: torch.Tensor | None,
              epoch: int, loss_fn: Callable, trainable: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(loss, logits) of one training batch: the custom step, or ``loss_fn`` on the model's logits."""
        if self.step is not None:
            return self.step(x, y, x2, y2, epoch)
        if trainable == "all":
            logits = self._forward(x)
        else:
            with torch.no_grad():
                f = self.model.features(x)
            logits = self.model.classifier(f)
        return loss_fn(logits, y), logits

    def _eval_flops(self, n: int, sample_shape: tuple[int, ...], images: Any) -> int:
        bs = self.eval_batch(images)
        full, rest = divmod(n, bs)
        total = full * self._fwd_flops(sample_shape, bs) if full else 0
        if rest:
            total += self._fwd_flops(sample_shape, rest)
        return total
