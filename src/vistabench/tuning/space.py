"""Search spaces: the distributions a configuration is drawn from, and their JSON form.

``{"lr": LogUniform(1e-4, 0.1), "batch_size": Choice((10, 25, 50)), "momentum": Fixed(0.9)}``
is written ``{"lr": {"loguniform": [1e-4, 0.1]}, "batch_size": {"choice": [10, 25, 50]},
"momentum": 0.9}`` (a bare value is :class:`Fixed`). Both engines translate the same space.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Union

from .._validation import check_value
from ..errors import InputError

__all__ = ["LogUniform", "Uniform", "Choice", "Fixed", "Param", "SearchSpace", "parse_space", "space_to_json",
           "check_space", "searched", "fixed"]


@dataclass(frozen=True)
class LogUniform:
    """``exp(U(ln low, ln high))``."""

    low: float
    high: float

    def __post_init__(self) -> None:
        lo = check_value(self.low, "loguniform low", low=0, low_open=True)
        hi = check_value(self.high, "loguniform high", low=0, low_open=True)
        if not lo < hi:
            raise InputError(f"loguniform: expected low < high, got [{self.low}, {self.high}]")


@dataclass(frozen=True)
class Uniform:
    """``U(low, high)``."""

    low: float
    high: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise InputError(f"uniform: expected finite low < high, got [{self.low}, {self.high}]")


@dataclass(frozen=True)
class Choice:
    """One of ``values`` (numbers, strings or booleans)."""

    values: tuple

    def __post_init__(self) -> None:
        if not isinstance(self.values, tuple) or not self.values:
            raise InputError(f"choice: expected a non-empty tuple of values, got {self.values!r}")


@dataclass(frozen=True)
class Fixed:
    """A constant (part of every configuration, not searched)."""

    value: Any


Param = Union[LogUniform, Uniform, Choice, Fixed]
SearchSpace = Mapping[str, Param]


def parse_space(spec: Mapping[str, Any]) -> dict[str, Param]:
    """Build a search space from JSON-like data.

    ``{"lr": {"loguniform": [1e-4, 0.1]}, "p": {"uniform": [0, 1]},
    "batch_size": {"choice": [10, 25, 50]}, "momentum": 0.9}`` (a bare value is :class:`Fixed`).
    """
    if not isinstance(spec, Mapping):
        raise InputError(f"search space: expected an object of name -> distribution, got {type(spec).__name__}")
    out: dict[str, Param] = {}
    for name, v in spec.items():
        if isinstance(v, Mapping):
            if len(v) != 1:
                raise InputError(f"search space {name!r}: expected one of loguniform/uniform/choice, got {sorted(v)}")
            (kind, arg), = v.items()
            if kind in ("loguniform", "uniform"):
                if not (isinstance(arg, (list, tuple)) and len(arg) == 2):
                    raise InputError(f"search space {name!r}: {kind} expects [low, high], got {arg!r}")
                ends = []
                for end in arg:
                    if isinstance(end, bool) or not isinstance(end, (int, float, str)):
                        raise InputError(f"search space {name!r}: {kind} expects two numbers, got {arg!r}")
                    try:
                        ends.append(float(end))
                    except ValueError:
                        raise InputError(f"search space {name!r}: {kind} expects two numbers, got {arg!r}") from None
                out[name] = (LogUniform if kind == "loguniform" else Uniform)(ends[0], ends[1])
            elif kind == "choice":
                if not isinstance(arg, (list, tuple)):
                    raise InputError(f"search space {name!r}: choice expects a list, got {arg!r}")
                out[name] = Choice(tuple(arg))
            else:
                raise InputError(f"search space {name!r}: unknown distribution {kind!r} "
                                 "(expected loguniform, uniform or choice)")
        else:
            out[name] = Fixed(v)
    return out


def space_to_json(space: SearchSpace) -> dict[str, Any]:
    """Inverse of :func:`parse_space`."""
    out: dict[str, Any] = {}
    for k, p in space.items():
        if isinstance(p, LogUniform):
            out[k] = {"loguniform": [p.low, p.high]}
        elif isinstance(p, Uniform):
            out[k] = {"uniform": [p.low, p.high]}
        elif isinstance(p, Choice):
            out[k] = {"choice": list(p.values)}
        else:
            out[k] = p.value
    return out


def searched(space: SearchSpace) -> dict[str, Param]:
    return {k: p for k, p in space.items() if not isinstance(p, Fixed)}


def fixed(space: SearchSpace) -> dict[str, Any]:
    return {k: p.value for k, p in space.items() if isinstance(p, Fixed)}



def check_space(space: Any) -> None:
    """Raise :class:`InputError` unless ``space`` maps names to LogUniform | Uniform | Choice | Fixed."""
    if not isinstance(space, Mapping) or not all(isinstance(p, (LogUniform, Uniform, Choice, Fixed))
                                                 for p in space.values()):
        raise InputError("space: expected a mapping of name -> LogUniform | Uniform | Choice | Fixed")
