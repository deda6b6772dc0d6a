"""The report's units (report/units.py): one SI prefix per FLOP column, the same prefixes on plot axes."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from vistabench.report.units import flop_axis, si_prefix, si_text  # noqa: E402


@pytest.mark.parametrize("values,expected", [
    ([2.5e9, 8e8], (1e9, "G")), ([999.0], (1.0, "")), ([1000], (1e3, "k")), ([3e12, None, float("nan")], (1e12, "T")),
    ([], (1.0, "")), ([None], (1.0, "")), ([5e6, 2e5], (1e6, "M")),
])
def test_si_prefix_is_chosen_by_the_largest_value(values, expected):
    assert si_prefix(values) == expected


def test_si_text():
    assert si_text(3.18e9) == "3.18 GFLOP" and si_text(986.68e6) == "986.68 MFLOP"
    assert si_text(None) == si_text(math.nan) == "–" and si_text(12.0, "B", 0) == "12 B"


@pytest.mark.parametrize("lo,hi,want", [(1.5e9, 4e9, "2 GFLOP"), (2e8, 4e10, "10 GFLOP"), (1e6, 1e12, "1 GFLOP")])
def test_the_axis_names_flop_with_the_tables_prefixes(lo, hi, want):
    fig, ax = plt.subplots()
    ax.plot([lo, hi], [1, 2])
    ax.set_xscale("log")
    flop_axis(ax.xaxis)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels(minor=False) + ax.get_xticklabels(minor=True) if t.get_text()]
    plt.close(fig)
    assert want in labels and all(label.endswith("FLOP") for label in labels)
    assert len(labels) <= 12  # readable: not every minor tick of a wide axis
