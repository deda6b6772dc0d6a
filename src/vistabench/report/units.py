"""The units the report, the tables and the command line show, chosen once per protocol.

- Accuracies, errors and APs are fractions in every record and every ``--json`` output; people read
  them in % (:data:`PERCENT`), and a difference of two of them in points of % (:data:`POINTS`).
- Compute (FLOP) carries an SI prefix: one per table column (:func:`si_prefix`, chosen from the
  column's largest value, named in its title) and the same prefixes on plot axes
  (:func:`flop_axis`), so "2.1 GFLOP" reads the same in both.
"""

from __future__ import annotations

import math
from typing import Iterable

__all__ = ["PERCENT", "POINTS", "SI_PREFIXES", "si_prefix", "si_text", "flop_axis"]

PERCENT = "%"
POINTS = "points of %"
#: (factor, prefix), largest first
SI_PREFIXES = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def si_prefix(values: Iterable[float | int | None]) -> tuple[float, str]:
    """(factor, prefix) for a column of non-negative amounts: the largest prefix whose factor is at
    most the largest finite value (1, "" for none or values below 1000).

    >>> si_prefix([2.5e9, 8e8])
    (1000000000.0, 'G')
    """
    top = max((abs(float(v)) for v in values if v is not None and math.isfinite(float(v))), default=0.0)
    return next(((f, p) for f, p in SI_PREFIXES if top >= f), (1.0, ""))


def si_text(value: float | None, unit: str = "FLOP", digits: int = 2) -> str:
    """One amount with its own prefix: ``si_text(3.18e9)`` -> ``"3.18 GFLOP"``; "–" for None/NaN."""
    if value is None or not math.isfinite(float(value)):
        return "–"
    f, p = si_prefix([value])
    return f"{value / f:.{digits}f} {p}{unit}"


def flop_axis(axis, unit: str = "FLOP") -> None:
    """Label a (log) plot axis's ticks with SI prefixes (``1 GFLOP``), as the tables name them; call it
    after plotting. On an axis spanning few decades (one labelled power of ten or none) minor ticks
    are labelled too: all of them under one decade, those at 2x and 5x a power of ten up to three."""
    from matplotlib.ticker import EngFormatter, FuncFormatter, NullFormatter

    eng = EngFormatter(unit=unit, sep=" ")
    axis.set_major_formatter(eng)
    lo, hi = sorted(axis.get_view_interval())
    decades = math.log10(hi / lo) if lo > 0 else math.inf
    if decades >= 3:
        axis.set_minor_formatter(NullFormatter())
        return

    def minor(x: float, pos: int | None = None) -> str:
        mantissa = round(x / 10 ** math.floor(math.log10(x) + 1e-9), 6) if x > 0 else 0
        return eng(x) if decades < 1 or mantissa in (2, 5) else ""

    axis.set_minor_formatter(FuncFormatter(minor))
