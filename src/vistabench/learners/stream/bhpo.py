"""``bhpo``: the Nevis'22 Bayesian hyper-parameter optimisation baseline.

Like ``indep`` (random initialisation, keep the best trial), but the trials are chosen one after
another by Bayesian optimisation: a Gaussian process (BoTorch ``SingleTaskGP``, hyper-parameters
fitted by marginal likelihood) on the validation scores of the trials so far, and the next
configuration maximises the upper confidence bound ``mu + sqrt(beta) * sigma`` (BoTorch
``UpperConfidenceBound``, ``beta = ucb_beta``) over the unit cube that encodes the search space.
The first ``bhpo_startup`` trials of a task are drawn at random (a GP needs data). Optuna's
``GPSampler`` was the first choice but offers only log-EI, not UCB.

Search spaces (``search_space``):

``default``  learning rate (log-uniform in ``lr_range``) and label smoothing (``label_smoothing_range``),
             the 2-D space of the other baselines;
``large``    the larger space the paper describes (five more dimensions): the schedule (cosine, or
             piece-wise constant: x0.1 at 50 % and x0.01 at 75 % of the steps), the batch size
             (x0.5, x1, x2 of the size-based default), the architecture (the paper: VGG or
             ResNet34; here the width x0.5, x1, x2 of ``arch_options["width"]``, when the
             architecture has one), and the two augmentations, random crop (zero padding H/8) and
             horizontal flip, each on or off.

Every trial is charged like a random-search trial; the GP itself costs no network FLOPs and is not
charged (as the paper counts network compute only). The sequence is seeded: the task seed drives
the random start and the seed of BoTorch's acquisition optimiser (run inside ``torch.random.fork_rng``).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from .search import SearchLearner

__all__ = ["BHPO", "search_space"]


def search_space(config: Any) -> list[tuple[str, str, Any]]:
    """The dimensions of a config's BHPO space: ``(name, kind, domain)``; kind is log, linear or choice."""
    dims: list[tuple[str, str, Any]] = [("lr", "log", tuple(config.lr_range)),
                                        ("label_smoothing", "linear", tuple(config.label_smoothing_range))]
    if config.search_space == "large":
        dims += [("schedule", "choice", ("cosine", "piecewise")),
                 ("batch_scale", "choice", (0.5, 1.0, 2.0))]
        w = config.arch_options.get("width") if isinstance(config.arch_options, dict) else None
        if isinstance(w, int) and w >= 2:
            dims.append(("width", "choice", (max(1, w // 2), w, 2 * w)))
        dims += [("crop", "choice", (False, True)), ("flip", "choice", (False, True))]
    return dims


def decode(u: np.ndarray, dims: list[tuple[str, str, Any]]) -> dict:
    """A point of the unit cube -> a configuration (a choice of k options splits [0, 1] in k equal cells)."""
    out: dict[str, Any] = {}
    for x, (name, kind, dom) in zip(np.clip(u, 0.0, 1.0), dims):
        if kind == "log":
            out[name] = float(min(dom[1], max(dom[0], math.exp(math.log(dom[0]) + x * (math.log(dom[1]) - math.log(dom[0]))))))
        elif kind == "linear":
            out[name] = float(dom[0] + x * (dom[1] - dom[0]))
        else:
            v = dom[min(len(dom) - 1, int(math.floor(x * len(dom))))]
            out[name] = v.item() if hasattr(v, "item") else v
    return out


def ucb_proposal(u: np.ndarray, scores: np.ndarray, *, beta: float, seed: int) -> np.ndarray:
    """The maximiser of GP-UCB over ``[0, 1]^d`` given observed points ``u`` (n, d) and ``scores`` (n,)."""
    import torch
    from botorch.acquisition import UpperConfidenceBound
    from botorch.exceptions import ModelFittingError
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.optim import optimize_acqf
    from gpytorch.mlls import ExactMarginalLogLikelihood

    d = u.shape[1]
    y = scores.astype(np.float64)
    y = (y - y.mean()) / (y.std() if y.std() > 0 else 1.0)
    with torch.random.fork_rng(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BoTorch warns about tiny / un-normalised training sets
        torch.manual_seed(seed)
        x_t = torch.as_tensor(u, dtype=torch.float64)
        y_t = torch.as_tensor(y, dtype=torch.float64).unsqueeze(-1)
        gp = SingleTaskGP(x_t, y_t, outcome_transform=None)
        try:
            fit_gpytorch_mll(ExactMarginalLogLikelihood(gp.likelihood, gp))
        except (ModelFittingError, RuntimeError, ValueError):
            gp.eval()  # a failed fit keeps the prior kernel hyper-parameters (still a GP)
        acq = UpperConfidenceBound(gp, beta=beta)
        bounds = torch.stack([torch.zeros(d, dtype=torch.float64), torch.ones(d, dtype=torch.float64)])
        cand, _ = optimize_acqf(acq, bounds=bounds, q=1, num_restarts=4, raw_samples=128)
    return cand.detach().numpy().reshape(-1)


class BHPO(SearchLearner):
    """Independent learner whose trials are chosen sequentially by GP-UCB Bayesian optimisation."""

    name = "bhpo"

    parallel_trials = False  # each proposal depends on the scores of the trials before it

    def _propose(self, rng: np.random.Generator, trial: int, history: list[tuple[dict, float]]) -> dict:
        cfg = self.config
        dims = search_space(cfg)
        if trial < cfg.bhpo_startup or not history:
            u = rng.random(len(dims))
            how = "random"
        else:
            us = np.array([h["u"] for h, _ in history], dtype=np.float64)
            sc = np.array([s for _, s in history], dtype=np.float64)
            u = ucb_proposal(us, sc, beta=cfg.ucb_beta, seed=int(rng.integers(2**31)))
            how = "gp-ucb"
        hp = decode(u, dims)
        hp["u"] = [float(v) for v in u]
        hp["proposed_by"] = how
        return hp
