"""What a reader would be misled by in a figure (:func:`figure_problems`): the check the root conftest's
``quick_demo`` applies to every figure the report draws before it becomes a PNG, and the report tests'
``figure_check``. Loaded by file, as ``_archcheck``."""

from __future__ import annotations

import numpy as np


def _drawn_points(artist, renderer) -> np.ndarray:
    """Display coordinates of an artist's data: a line's vertices and, between them, points every
    few pixels (a legend over a segment hides it too); a collection's offsets."""
    from matplotlib.collections import Collection
    from matplotlib.lines import Line2D

    if isinstance(artist, Line2D):
        xy = artist.get_transform().transform(np.asarray(artist.get_xydata(), dtype=float))
        xy = xy[np.isfinite(xy).all(axis=1)]
        if artist.get_linestyle() in ("None", "", " ") or len(xy) < 2:
            return xy
        pieces = [xy]
        for a, b in zip(xy[:-1], xy[1:]):
            n = int(np.hypot(*(b - a)) // 3) + 1
            pieces.append(a + np.linspace(0, 1, n + 1)[:, None] * (b - a))
        return np.concatenate(pieces)
    if isinstance(artist, Collection):
        offs = np.asarray(artist.get_offsets(), dtype=float)
        if len(offs):
            return artist.get_offset_transform().transform(offs)
    return np.zeros((0, 2))


def _series(ax) -> list:
    from matplotlib.collections import PathCollection

    lines = [ln for ln in ax.get_lines() if np.isfinite(np.asarray(ln.get_xydata(), dtype=float)).all(axis=1).any()]
    return lines + [c for c in ax.collections if isinstance(c, PathCollection) and len(c.get_offsets())]


def figure_problems(fig) -> list[str]:
    """What a reader would be misled by in a figure (empty when fine):

    - an axes with more than one series and no legend anywhere in the figure;
    - a labelled series of such an axes missing from the legends;
    - two labelled series of one axes drawn alike (colour, line style and marker);
    - a legend drawn over data (any line vertex, point on a segment or marker inside the legend's box,
      within the axes' area where it is visible).
    """
    from matplotlib.colors import to_hex

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    texts = {t.get_text() for lg in legends for t in lg.get_texts()}
    boxes = [lg.get_window_extent(renderer) for lg in legends]
    problems = []
    for k, ax in enumerate(fig.axes):
        series = _series(ax)
        name = ax.get_title() or f"axes {k}"
        if len(series) > 1:
            if not legends:
                problems.append(f"{name}: {len(series)} series and no legend")
            labelled = [s for s in series if not s.get_label().startswith("_")]
            missing = [s.get_label() for s in labelled if s.get_label() not in texts]
            if missing:
                problems.append(f"{name}: not in the legend: {missing}")
            looks: dict[tuple, str] = {}
            for s in labelled:
                if hasattr(s, "get_linestyle") and hasattr(s, "get_marker"):
                    look = (to_hex(s.get_color()), str(s.get_linestyle()), str(s.get_marker()))
                    if look in looks:
                        problems.append(f"{name}: {s.get_label()!r} looks like {looks[look]!r} {look}")
                    looks[look] = s.get_label()
        area = ax.get_window_extent(renderer)
        for s in series:
            pts = _drawn_points(s, renderer)
            pts = pts[(pts[:, 0] >= area.x0) & (pts[:, 0] <= area.x1) & (pts[:, 1] >= area.y0) & (pts[:, 1] <= area.y1)]
            for box in boxes:
                inside = (pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1)
                if inside.any():
                    problems.append(f"{name}: the legend covers {int(inside.sum())} drawn points of "
                                    f"{s.get_label()!r}")
    return problems
