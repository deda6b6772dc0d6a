"""Every plot of the report with more than one series has a legend that covers no data, and no two
series of one axes look alike (tests/report/conftest.py: figure_problems)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from vistabench.report.plotstyle import legend_outside, series_style  # noqa: E402


def test_every_figure_of_the_demo_report_is_labelled_and_uncovered(quick_demo):
    assert len(quick_demo.figures) >= 6, [c for c, _ in quick_demo.figures]
    bad = {caption[:60]: problems for caption, problems in quick_demo.figures if problems}
    assert not bad, bad


def test_the_check_finds_a_legend_over_data_a_missing_legend_and_lookalikes(figure_check):
    x = np.linspace(0, 1, 50)
    fig, ax = plt.subplots()
    for i in range(6):
        ax.plot(x, np.full_like(x, i / 5), label=f"s{i}")  # horizontal lines across the whole axes
    ax.legend(loc="center")
    assert any("legend covers" in p for p in figure_check(fig))
    plt.close(fig)

    fig, ax = plt.subplots()
    ax.plot(x, x)
    ax.plot(x, 1 - x)
    assert any("no legend" in p for p in figure_check(fig))
    plt.close(fig)

    fig, ax = plt.subplots()
    ax.plot(x, x, color="C0", label="a")
    ax.plot(x, 1 - x, color="C0", label="b")
    legend_outside(fig, [ax])
    assert any("looks like" in p for p in figure_check(fig))
    plt.close(fig)


def test_a_legend_outside_covers_nothing_however_many_series(figure_check):
    x = np.linspace(0, 1, 30)
    fig, axes = plt.subplots(1, 2)
    for i in range(40):  # 40 series: 10 colours x 4 line styles, none alike
        for ax in axes:
            ax.plot(x, x * i / 40, label=f"run {i}", **series_style(i))
    legend_outside(fig, list(axes))
    assert figure_check(fig) == []
    plt.close(fig)
    looks = {(s["color"], s["linestyle"]) for s in map(series_style, range(80))}
    assert len(looks) == 80


def test_twenty_runs_differ_in_colour_and_marker():
    """Up to 20 series: no colour twice, and a marker shared by two series only across different hues
    (a strong colour's light tint never carries its marker)."""
    from vistabench.report.plotstyle import COLORS, LIGHT_COLORS

    styles = [series_style(i) for i in range(20)]
    assert len({s["color"] for s in styles}) == 20
    hue = {c: j for j, c in enumerate(COLORS)} | {c: j for j, c in enumerate(LIGHT_COLORS)}
    assert len({(hue[s["color"]], s["marker"]) for s in styles}) == 20
    assert len({s["marker"] for s in styles}) == 10


def test_distinct_colors_never_repeat():
    from matplotlib.colors import to_hex

    from vistabench.report.plotstyle import distinct_colors

    for n in (1, 10, 11, 20, 21, 60):
        assert len({to_hex(c) for c in distinct_colors(n)}) == n
