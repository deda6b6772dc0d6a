"""Reference learners for few-shot class-incremental sessions (torch).

Both learners see one session at a time (``learn``) and after each session score a test pool over
every class seen so far (``scores``):

``prototype``
    Train the backbone with cross-entropy on the base session, then freeze it. Classes are
    represented by the L2-normalised mean feature of their training images (prototypes); a test
    image goes to the class of highest cosine similarity. A novel session only adds its prototypes,
    so base accuracy never changes (the frozen-backbone baseline of the FSCIL literature, e.g.
    CEC's "decoupled" prototype classifier).
``finetune``
    Train on the base session, then for each novel session grow the linear head by the new classes
    and fine-tune the whole network on the few shots alone. Nothing protects the old classes, so it
    forgets them: the contrast the gAcc curve should make visible.
``fr``
    The paper's feature rectification on a frozen ViT (:mod:`.fr`).

Images go in as the dataset stores them (N, H, W, B); the shared :class:`~.trainer.Trainer` converts
and standardises them. Every session reuses the base session's input normalisation (a fixed
preprocessing: standardising with five images' statistics would shift every test input).
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from ...errors import InputError
from ..models import build_model
from ..recipe import Recipe
from ..schedules import step_factor
from ..tensors import resize_center_crop
from ..trainer import TrainConfig, Trainer
from . import IncrementalContext

__all__ = ["SessionTrainer", "IncrementalLearner", "PrototypeLearner", "FinetuneLearner"]


class SessionTrainer(Trainer):
    """The shared trainer, with the input normalisation frozen after the base session and the
    base session's lr schedule, read from ``base_recipe`` (the run's :class:`~..recipe.Recipe`):
    ``schedule`` ``"cosine"`` (the trainer's own) or ``"step"`` (the base lr times ``lr_factors[i]``
    from epoch ``lr_milestones[i]`` on, after the linear warm-up). ``base_recipe`` None: the
    trainer's own schedule (the novel sessions' cosine)."""

    _frozen_norm: Any = None

    def __init__(self, model: nn.Module, cfg: TrainConfig, *, base_recipe: Recipe | None, **kwargs: Any) -> None:
        super().__init__(model, cfg, **kwargs)
        self.base_recipe = base_recipe

    @property
    def normaliser(self):  # type: ignore[override]
        return self._frozen_norm if self._frozen_norm is not None else self.__dict__.get("_norm")

    @normaliser.setter
    def normaliser(self, value) -> None:
        self.__dict__["_norm"] = value

    def freeze_normaliser(self) -> None:
        self._frozen_norm = self.__dict__.get("_norm")

    def lr_at(self, step: int, total: int, steps_per_epoch: int) -> float:
        base = self.base_recipe
        if base is None or base.schedule != "step":
            return super().lr_at(step, total, steps_per_epoch)
        warm = self.cfg.warmup_epochs * steps_per_epoch
        if step < warm:
            return self.cfg.lr * (step + 1) / warm
        return self.cfg.lr * step_factor(step // steps_per_epoch, base.lr_milestones, base.lr_factors)


class IncrementalLearner:
    """Base class: ``learn(images, labels, classes, session=i)`` then ``scores(images)``.

    Built from an :class:`~vistabench.learners.incremental.IncrementalContext` (``self.cfg``).
    """

    def __init__(self, ctx: IncrementalContext) -> None:
        if not isinstance(ctx, IncrementalContext):
            raise InputError(f"ctx: expected an IncrementalContext, got {type(ctx).__name__}")
        self.cfg = ctx
        self.in_channels = int(ctx.in_channels)
        self.image_size = ctx.image_size
        self.classes: list[int] = []  # class id of each output, in learning order
        self.trainer: SessionTrainer | None = None
        self.train_results: list[Any] = []
        self.base_cache = ctx.base_cache

    def _view(self, images: np.ndarray) -> np.ndarray:
        """The images a learner scores and builds prototypes from: as stored, or (``eval_transform:
        resize_crop``) resized by 1.15 and centre-cropped, as the reference's test transform
        (Revisting_FSCIL ``dataloader/cifar100/cifar.py:82–86``; its prototypes use the same one:
        ``models/base/fscil_trainer.py:106,124``)."""
        if self.cfg.eval_transform == "resize_crop":
            return resize_center_crop(images)
        return images

    def _targets(self, labels: np.ndarray) -> np.ndarray:
        pos = {c: k for k, c in enumerate(self.classes)}
        return np.asarray([pos[int(c)] for c in labels], dtype=np.int64)

    def _add_classes(self, labels: np.ndarray, classes: Sequence[int], session: int) -> list[int]:
        new = [int(c) for c in classes]
        clash = [c for c in new if c in self.classes]
        if clash:
            raise InputError(f"session {session}: classes {clash[:5]} were already learned in an earlier session")
        missing = sorted(set(new) - set(np.unique(labels).tolist()))
        if missing:
            raise InputError(f"session {session}: no training images for classes {missing[:5]}")
        extra = sorted(set(np.unique(labels).tolist()) - set(new))
        if extra:
            raise InputError(f"session {session}: training labels {extra[:5]} are not among the session's classes")
        self.classes += new
        return new

    def _config(self, *, epochs: int, lr: float, n: int, seed: int, warmup_epochs: int = 0) -> TrainConfig:
        # the session sets its budget; the base session's schedule is the SessionTrainer's (lr_at)
        return TrainConfig.from_recipe(self.cfg.recipe, epochs=epochs, lr=lr, batch_size=min(self.cfg.batch_size, n),
                                       warmup_epochs=warmup_epochs, seed=seed, count_flops=False)

    def _base_key(self, images: np.ndarray, labels: np.ndarray) -> tuple:
        h = hashlib.sha256(np.ascontiguousarray(images).tobytes())
        h.update(np.ascontiguousarray(labels, dtype=np.int64).tobytes())
        c = self.cfg
        return (c.model, tuple(sorted(c.model_options.items())), c.epochs, c.lr, c.momentum, c.nesterov,
                c.weight_decay, c.warmup_epochs, c.schedule, c.lr_milestones, c.lr_factors, c.batch_size, c.seed,
                c.device, c.devices, c.pretrained, c.precision, c.compile, self.in_channels, self.image_size,
                tuple(self.classes), h.hexdigest())

    def _train_base(self, images: np.ndarray, labels: np.ndarray) -> None:
        """Train the backbone on the base session. With a ``base_cache`` dict, a base session
        already trained with the same settings on the same images is copied instead of retrained
        (the result is the same model: training is seeded)."""
        key = self._base_key(images, labels) if self.base_cache is not None else None
        if key is not None and key in self.base_cache:  # type: ignore[operator]
            trainer, result = self.base_cache[key]  # type: ignore[index]
            self.trainer = copy.deepcopy(trainer)
            self.train_results.append(result)
            return
        model = build_model(self.cfg.model, num_classes=len(self.classes), in_channels=self.in_channels,
                            image_size=self.image_size, seed=self.cfg.seed, pretrained=self.cfg.pretrained,
                            **self.cfg.model_options)
        cfg = self._config(epochs=self.cfg.epochs, lr=self.cfg.lr, n=len(labels), seed=self.cfg.seed,
                           warmup_epochs=self.cfg.warmup_epochs)
        self.trainer = SessionTrainer(model, cfg, base_recipe=self.cfg.recipe)
        self.train_results.append(self.trainer.fit(images, self._targets(labels)))
        self.trainer.freeze_normaliser()
        if key is not None:
            self.base_cache[key] = (copy.deepcopy(self.trainer), self.train_results[-1])  # type: ignore[index]

    def learn(self, images: np.ndarray, labels: np.ndarray, classes: Sequence[int], *, session: int) -> None:
        raise NotImplementedError  # pragma: no cover

    def scores(self, images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(N, C_seen) scores and the class id of each column."""
        raise NotImplementedError  # pragma: no cover

    def settings(self) -> dict[str, Any]:
        """Method-specific settings stored with the run's record (none for the simple learners)."""
        return {}


class PrototypeLearner(IncrementalLearner):
    """Frozen backbone + cosine classifier over class-mean prototypes."""

    def __init__(self, ctx: IncrementalContext) -> None:
        super().__init__(ctx)
        self.prototypes = np.zeros((0, 0), dtype=np.float64)

    def _prototypes(self, images: np.ndarray, labels: np.ndarray, classes: Sequence[int]) -> np.ndarray:
        feats = self.trainer.features(self._view(images)).astype(np.float64)  # type: ignore[union-attr]
        protos = np.stack([feats[labels == c].mean(axis=0) for c in classes])
        norms = np.linalg.norm(protos, axis=1, keepdims=True)
        return protos / np.where(norms > 0, norms, 1.0)

    def learn(self, images: np.ndarray, labels: np.ndarray, classes: Sequence[int], *, session: int) -> None:
        labels = np.asarray(labels, dtype=np.int64)
        new = self._add_classes(labels, classes, session)
        if self.trainer is None:
            self._train_base(images, labels)
            self.prototypes = self._prototypes(images, labels, new)
        else:
            self.prototypes = np.vstack([self.prototypes, self._prototypes(images, labels, new)])

    def scores(self, images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.trainer is None:
            raise InputError("scores: learn the base session first")
        f = self.trainer.features(self._view(images)).astype(np.float64)
        n = np.linalg.norm(f, axis=1, keepdims=True)
        f = f / np.where(n > 0, n, 1.0)
        return (f @ self.prototypes.T).astype(np.float32), np.asarray(self.classes, dtype=np.int64)


class FinetuneLearner(IncrementalLearner):
    """Grow the linear head and fine-tune everything on each novel session's shots (forgets)."""

    def learn(self, images: np.ndarray, labels: np.ndarray, classes: Sequence[int], *, session: int) -> None:
        labels = np.asarray(labels, dtype=np.int64)
        self._add_classes(labels, classes, session)
        if self.trainer is None:
            self._train_base(images, labels)
            return
        model = self.trainer.model
        old: nn.Linear = model.classifier  # type: ignore[assignment]
        with torch.random.fork_rng(devices=[]):  # seeded init of the new rows; global RNG untouched
            torch.manual_seed(self.cfg.seed * 1000 + session)
            head = nn.Linear(old.in_features, len(self.classes))
        head = head.to(old.weight.device)
        with torch.no_grad():
            head.weight[: old.out_features] = old.weight
            head.bias[: old.out_features] = old.bias
        model.classifier = head
        model.num_classes = len(self.classes)
        self.trainer.cfg = self._config(epochs=self.cfg.novel_epochs, lr=self.cfg.novel_lr, n=len(labels),
                                        seed=self.cfg.seed + session)
        self.trainer.base_recipe = None  # novel sessions: the trainer's own cosine from novel_lr
        self.train_results.append(self.trainer.fit(images, self._targets(labels)))

    def scores(self, images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.trainer is None:
            raise InputError("scores: learn the base session first")
        return self.trainer.predict_logits(self._view(images)), np.asarray(self.classes, dtype=np.int64)


