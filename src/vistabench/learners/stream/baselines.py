"""The Nevis'22 baselines on the search learner (registry: :mod:`.registry`).

``indep``     random init, random search over learning rate and label smoothing, keep the best trial.
``ft-prev``   as ``indep`` but every trial starts from the most recent task's network (new head).
``ft-d``      starts from the most related past network: relatedness = k-NN score of its features
              on the new task's data (charged); with ``knn_fresh`` a freshly initialised network
              is a candidate too (dm_nevis).
``ensemble``  ``indep`` whose predictor is the ensemble of all trials, weights
              ``softmax(val_score / temperature)`` (Nevis'22 Appendix I).
``pt``        every trial starts from a supplied checkpoint (a state dict loaded with
              ``torch.load(..., weights_only=True)``; its classifier is replaced); PT-MT's
              checkpoint comes from :func:`~vistabench.learners.stream.pretrain.pretrain_meta_train`.

``mt`` (:mod:`.mt`) and ``bhpo`` (:mod:`.bhpo`) build on these.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from ...errors import InputError
from ...metrics.stream import mean_average_precision
from ..tensors import Normaliser
from ..trainer import TrainConfig, Trainer
from .options import LearnerConfig
from .pretrain import pretrain_cost
from .search import SearchLearner, input_normaliser

__all__ = ["Indep", "Ensemble", "FTPrev", "FTD", "PT", "knn_score"]


class Indep(SearchLearner):
    """Random init, random search over learning rate and label smoothing, keep the best trial."""

    name = "indep"


class Ensemble(SearchLearner):
    """Indep whose predictor is the softmax(score / T)-weighted ensemble of all trials."""

    name = "ensemble"
    ensemble = True


class FTPrev(SearchLearner):
    """Every trial fine-tunes the previous task's network (new head)."""

    name = "ft-prev"

    def _init_from(self, task, data, fit_idx, state, ledger):
        if not state["models"]:
            return None, "random"
        last = state["models"][-1]
        return last["state_dict"], last["uid"]


class FTD(SearchLearner):
    """Fine-tune from the past network whose features give the best k-NN score on the new task."""

    name = "ft-d"

    def _init_from(self, task, data, fit_idx, state, ledger):
        if not state["models"]:
            return None, "random"
        return self._most_related(task, data, fit_idx, state, ledger)

    def _most_related(self, task, data, fit_idx, state, ledger):
        """The start of the new task's trials: the candidate whose penultimate features give the best
        k-NN score on the new task (charged as forward passes). Candidates: every past network, and
        with ``knn_fresh`` a freshly initialised one (dm_nevis's ``randomly_initialized_params``). When
        the fresh network wins, ``knn_fresh_wins="next-past"`` starts from the best past network, as
        dm_nevis's ``_init_from_transfer_matrix`` (it only returns past tasks' states); ``"scratch"``
        trains the task from scratch."""
        cfg = self.config
        rng = np.random.default_rng(task.seed + 1)
        idx = rng.permutation(fit_idx)
        tr_i, va_i = idx[: cfg.knn_train], idx[cfg.knn_train: cfg.knn_train + cfg.knn_val]
        if len(va_i) == 0:  # small task: hold out a third of the subset
            k = max(1, len(idx) // 3)
            tr_i, va_i = idx[k:], idx[:k]
        n, h, w, b = data.images.shape
        sub = np.concatenate([tr_i, va_i])
        norm = input_normaliser(cfg, data.images) or Normaliser.fit(data.images[sub])
        candidates = [(e["uid"], e) for e in state["models"]]
        if cfg.knn_fresh:
            candidates.append(("random", None))
        scores = []
        for uid, entry in candidates:
            if entry is None:
                model = self._build(state["models"][-1]["num_outputs"], b, h, seed=(task.seed + 2) % 2**31, init=None)
            else:
                opts = dict(cfg.arch_options, **({"width": entry["width"]} if "width" in entry else {}))
                model = self._build(entry["num_outputs"], b, h, seed=0, init=entry["state_dict"], arch_options=opts)
                model.load_state_dict(entry["state_dict"])
            f_tr, f_va = self._embed(model, norm, data.images[tr_i]), self._embed(model, norm, data.images[va_i])
            ledger.charge_forward(model, (b, h, w), len(sub), what=f"k-NN relatedness of {uid}")
            scores.append(knn_score(f_tr, data.targets[tr_i], f_va, data.targets[va_i], kind=task.kind,
                                    k=cfg.knn_k, multilabel=cfg.knn_multilabel))
        best = int(np.argmax(scores))  # ties: the earliest task (the fresh network comes last)
        if candidates[best][1] is None and cfg.knn_fresh_wins == "next-past":
            best = int(np.argmax(scores[:-1]))  # the fresh network is the last candidate
        uid, entry = candidates[best]
        self.last_relatedness = {u: s for (u, _), s in zip(candidates, scores)}
        if entry is None:
            return None, "random"
        return entry["state_dict"], entry["uid"]

    def _embed(self, model, norm, images):
        """Penultimate features; with ``knn_bn="train"`` in training-mode batch norm, batches of 128
        (dm_nevis embeds with ``is_training=True`` so that a fresh network's BN has statistics)."""
        cfg = self.config
        train_bn = cfg.knn_bn == "train"
        tr = Trainer(model, TrainConfig(epochs=1, device=cfg.device, count_flops=False,
                                        eval_batch_size=128 if train_bn else 512))
        tr.normaliser = norm
        if not train_bn:
            return tr.features(images)

        def features(x):
            model.train()
            return model.features(x)

        return tr.apply(images, features, width=int(model.feature_dim))


def knn_score(f_train: np.ndarray, y_train: np.ndarray, f_test: np.ndarray, y_test: np.ndarray, *, kind: str,
              k: int, multilabel: str = "exact-match") -> float:
    """How well a k-NN on features predicts the new task: accuracy; for a multilabel task the
    accuracy over label patterns (``"exact-match"``) or the macro AP of the per-label fraction of
    positive neighbours (``"map"``, dm_nevis's ``_MultiLabelKNNClassifier`` + sklearn's
    ``average_precision_score``; a label without positives counts 0)."""
    from sklearn.neighbors import KNeighborsClassifier, NearestNeighbors

    k = min(k, len(f_train))
    if kind == "multilabel" and multilabel == "map":
        nn_ = NearestNeighbors(n_neighbors=k).fit(f_train)
        neigh = nn_.kneighbors(f_test, return_distance=False)
        votes = np.asarray(y_train, dtype=np.float64)[neigh].mean(axis=1)
        m = mean_average_precision(np.asarray(y_test), votes, absent_labels="zero")
        return 0.0 if math.isnan(m) else float(m)
    if kind == "multilabel":  # exact-match accuracy over label patterns
        _, y = np.unique(np.concatenate([y_train, y_test]), axis=0, return_inverse=True)
        y = y.reshape(-1)
        y_train, y_test = y[: len(f_train)], y[len(f_train):]
    knn = KNeighborsClassifier(n_neighbors=k).fit(f_train, np.asarray(y_train))
    return float(np.mean(knn.predict(f_test) == np.asarray(y_test)))


class PT(SearchLearner):
    """Fine-tune every task from one pretrained checkpoint (the config's ``checkpoint``)."""

    name = "pt"

    def __init__(self, config: LearnerConfig | None = None) -> None:
        super().__init__(config)
        if not self.config.checkpoint:
            raise InputError("checkpoint: learner 'pt' needs a checkpoint file (a state dict saved with torch.save)")
        p = Path(self.config.checkpoint)
        if p.is_dir():
            raise InputError(f"checkpoint {str(p)!r}: is a folder, expected a state dict file")
        if not p.is_file():
            raise InputError(f"checkpoint {str(p)!r}: no such file")
        try:
            sd = torch.load(p, map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises UnpicklingError / RuntimeError variants; its text advises
            # an unsafe load, so it is not repeated
            raise InputError(f"checkpoint {str(p)!r}: not a weights-only state dict (tensors only, as written by "
                             "torch.save(model.state_dict(), FILE)); refusing to load other objects") from exc
        if isinstance(sd, dict) and "state_dict" in sd:
            sd = sd["state_dict"]
        if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
            raise InputError(f"checkpoint {str(p)!r}: expected a dict of tensors (a model state_dict)")
        for key, t in sd.items():
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                raise InputError(f"checkpoint {str(p)!r}: tensor {key!r} holds NaN or infinite values")
        self.pretrained = sd
        self.init_names = {id(sd): f"checkpoint {str(p)!r}"}

        self.pretrain_flops = pretrain_cost(p)  # reported apart from the stream's cFLOP

    def settings(self) -> dict:
        out = super().settings()
        out["pretrain_flops"] = self.pretrain_flops
        return out

    def _init_from(self, task, data, fit_idx, state, ledger):
        return self.pretrained, "checkpoint"
