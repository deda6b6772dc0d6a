"""What a search is (settings), what it leaves (trial records, result) and how it scores and selects.

Both engines share these, so a search gives the same record whichever engine ran it.

Scoring and selection follow gem (Brigato et al.'s benchmark code) by default:

- a trial's *score* after epoch k is the mean of the last ``score_window`` reported values,
  ``mean(curve[max(0, k − w):k])`` (gem's ``accuracy_avg5``: w = 5; fewer than w epochs average
  what there is). ASHA compares trials by this score at its rungs, and a trial's ``value`` is
  its score after its last epoch;
- the best configuration is the highest value among ``select="all"`` trials (stopped ones
  included, as Ray Tune's ``get_best_trial(scope="last")`` does in gem) or among
  ``select="complete"`` trials only; ties go to the earlier trial.

``score_window=1``, ``select="complete"`` is the plain "last epoch of a finished trial" rule.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, Literal, Protocol, Sequence

from .._validation import check_value
from ..engine import Engine
from ..errors import InputError

__all__ = ["TuneSettings", "TrialRecord", "TuneResult", "Report", "Objective", "window_score", "select_best"]


@dataclass
class TuneSettings:
    """How to search (defaults: gem's protocol).

    Attributes
    ----------
    trials : int
        Configurations to try (the budget every method gets).
    max_epochs : int
        Epochs of an unstopped trial (ASHA's ``max_t``).
    grace_period : int
        ASHA's minimum epochs before a trial can be stopped (Optuna's ``min_resource``).
    reduction_factor : int
        ASHA's η: rung k is at ``grace_period · η^k`` epochs and keeps the top 1/η (gem: 2).
    scheduler : {"asha", "none"}
        "none" trains every trial for ``max_epochs`` (plain search).
    sampler : {"random", "tpe"}
        How configurations are proposed (gem: random search).
    score_window : int
        The score after an epoch is the mean of the last ``score_window`` reported values (gem: 5).
    select : {"all", "complete"}
        Which trials the best configuration is chosen from (gem: all, stopped ones included).
    seed : int
    engine : Engine
        :class:`~vistabench.engine.Engine`: ``engine`` local (Optuna) or ray (Ray Tune), and ``ray_address``,
        a running Ray cluster (``ray://host:10001`` or ``host:6379``); None starts a local instance with
        ``ray_num_cpus`` CPUs.
    ray_num_cpus : int, optional
    ray_cpus_per_trial, ray_gpus_per_trial : float
        Resources each Ray trial asks for.
    """

    trials: int
    max_epochs: int
    grace_period: int = 1
    reduction_factor: int = 2
    scheduler: Literal["asha", "none"] = "asha"
    sampler: Literal["random", "tpe"] = "random"
    score_window: int = 5
    select: Literal["all", "complete"] = "all"
    seed: int = 0
    engine: Engine = field(default_factory=Engine)
    ray_num_cpus: int | None = None
    ray_cpus_per_trial: float = 1.0
    ray_gpus_per_trial: float = 0.0

    def __post_init__(self) -> None:
        self.trials = check_value(self.trials, "trials", type=int, low=0, low_open=True)
        self.max_epochs = check_value(self.max_epochs, "max_epochs", type=int, low=0, low_open=True)
        self.grace_period = check_value(self.grace_period, "grace_period", type=int, low=0, low_open=True)
        self.reduction_factor = check_value(self.reduction_factor, "reduction_factor", type=int, low=0, low_open=True)
        self.score_window = check_value(self.score_window, "score_window", type=int, low=0, low_open=True)
        if self.reduction_factor < 2:
            raise InputError(f"reduction_factor: expected an integer >= 2, got {self.reduction_factor}")
        if self.grace_period > self.max_epochs:
            raise InputError(f"grace_period: expected at most `max_epochs` ({self.max_epochs}), got {self.grace_period}")
        for name, val, ok in (("scheduler", self.scheduler, ("asha", "none")),
                              ("sampler", self.sampler, ("random", "tpe")),
                              ("select", self.select, ("all", "complete"))):
            if val not in ok:
                raise InputError(f"{name}: expected one of {list(ok)}, got {val!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise InputError(f"seed: expected an integer, got {self.seed!r}")
        if not isinstance(self.engine, Engine):
            raise TypeError(f"engine: expected an Engine, got {type(self.engine).__name__}")  # a caller's bug

    def to_dict(self) -> dict[str, Any]:
        """Every setting, the engine's kind and address flat (as stored before the engine was a value)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "engine":
                out.update(engine=self.engine.engine, ray_address=self.engine.ray_address)
            else:
                out[f.name] = getattr(self, f.name)
        return out


def window_score(curve: Sequence[float], window: int) -> float:
    """Mean of the last ``window`` values of ``curve`` (all of them when there are fewer)."""
    if not curve:
        return float("nan")
    tail = [float(v) for v in curve[-window:]]
    return math.fsum(tail) / len(tail)


@dataclass
class TrialRecord:
    """One trial: ``curve[k]`` is the value reported after epoch k+1; ``value`` its score after its
    last epoch (:func:`window_score`; None for a failed trial)."""

    number: int
    config: dict[str, Any]
    state: Literal["complete", "pruned", "failed"]
    value: float | None
    curve: list[float]
    epochs: int
    seconds: float | None = None
    error: str | None = None


def select_best(trials: Sequence[TrialRecord], select: str) -> TrialRecord | None:
    """The trial with the highest finite value among ``select`` ("all": complete and pruned;
    "complete": complete only); ties go to the lower trial number. None when none qualifies."""
    ok = ("complete", "pruned") if select == "all" else ("complete",)
    cands = [t for t in trials if t.state in ok and t.value is not None and math.isfinite(t.value)]
    return max(cands, key=lambda t: (t.value, -t.number)) if cands else None


@dataclass
class TuneResult:
    """A finished (or resumed-and-finished) search."""

    best_config: dict[str, Any] | None
    best_value: float | None
    best_trial: int | None
    trials: list[TrialRecord]
    settings: dict[str, Any]
    space: dict[str, Any]
    study_name: str
    engine: str
    total_epochs: int
    resumed_trials: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def epochs_to_reach(self, target: float) -> int | None:
        """Training epochs spent (trials in order) until some trial first reported ``>= target``."""
        spent = 0
        for t in sorted(self.trials, key=lambda t: t.number):
            for v in t.curve:
                spent += 1
                if v is not None and math.isfinite(v) and v >= target:
                    return spent
        return None


class Report(Protocol):
    def __call__(self, epoch: int, value: float) -> None: ...


Objective = Callable[[dict, Report], float]


def make_result(trials: list[TrialRecord], space_json: dict[str, Any], settings: TuneSettings,
                study_name: str, resumed: int) -> TuneResult:
    """Number the trials 0..n−1 in their order and pick the best one."""
    trials = list(trials)
    for i, r in enumerate(trials):
        r.number = i
    best = select_best(trials, settings.select)
    return TuneResult(
        best_config=dict(best.config) if best else None,
        best_value=best.value if best else None,
        best_trial=best.number if best else None,
        trials=trials, settings=settings.to_dict(), space=space_json, study_name=study_name,
        engine=settings.engine.engine, total_epochs=sum(t.epochs for t in trials), resumed_trials=resumed,
    )
