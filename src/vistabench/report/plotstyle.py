"""The report's plot conventions, in one place: every series its own look and legends that hide no data.

- :func:`series_style` gives the i-th series of a plot a colour, a line style and a marker: the first
  20 series differ in colour *and* marker (10 strong colours, then their light tints, each with
  another marker), and no two of the first 80 look alike (line styles after 20), so a legend stays
  readable however many runs a store holds.
- :func:`legend_outside` puts the legend outside the axes (to the right of one axes, below a row
  of axes), so it never covers a curve; the report saves figures with ``bbox_inches="tight"``,
  which keeps the legend in the picture.
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["COLORS", "LINESTYLES", "MARKERS", "series_style", "distinct_colors", "legend_outside"]

#: matplotlib's "tab10" colours, written out so that no global style changes them.
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
#: "tab20"'s light tints of the ten colours above, in the same order: series 10 to 19
LIGHT_COLORS = ("#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5",
                "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5")
LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "D", "^", "v", "P", "*", "X", "<", ">")


def series_style(i: int, *, marker: bool = True) -> dict[str, Any]:
    """Keyword arguments for ``ax.plot`` of the ``i``-th series (0-based): colour ``i mod 20`` (the ten
    strong colours, then their tints), line style ``i div 20`` (mod 4), marker ``i mod 10`` shifted by
    five for the tints, so that a tint never carries its strong colour's marker: series 0-19 differ in
    colour and in marker from every other one of a different hue."""
    k = i % (2 * len(COLORS))
    style: dict[str, Any] = {"color": (COLORS + LIGHT_COLORS)[k],
                             "linestyle": LINESTYLES[(i // (2 * len(COLORS))) % len(LINESTYLES)]}
    if marker:
        style["marker"] = MARKERS[(k + 5 * (k // len(COLORS))) % len(MARKERS)]
    return style


def distinct_colors(n: int) -> list:
    """``n`` colours, no two alike: "tab10" up to 10, "tab20" up to 20, else evenly spaced on "viridis"."""
    from matplotlib import colormaps

    if n <= len(COLORS):
        return list(COLORS[:n])
    if n <= 20:
        return [colormaps["tab20"](i) for i in range(n)]
    return [colormaps["viridis"](i / (n - 1)) for i in range(n)]


def legend_outside(fig, axes: Sequence[Any], *, handles: Sequence[Any] | None = None,
                   labels: Sequence[str] | None = None, fontsize: float = 8, title: str | None = None):
    """One legend for ``axes`` outside them: right of a single axes, centred below a row of several.

    Without ``handles``/``labels`` the labelled artists of ``axes`` are collected (a label shared by
    several axes appears once). Returns the legend, or None when there is nothing to label.
    """
    if handles is None:
        seen: dict[str, Any] = {}
        for ax in axes:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                seen.setdefault(lab, h)
        labels, handles = list(seen), list(seen.values())
    if not handles:
        return None
    if len(axes) == 1:
        return axes[0].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                              fontsize=fontsize, title=title, title_fontsize=fontsize, frameon=False)
    fig.tight_layout()
    ncol = max(1, min(len(handles), 4))
    return fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=ncol,
                      fontsize=fontsize, title=title, title_fontsize=fontsize, frameon=False)
