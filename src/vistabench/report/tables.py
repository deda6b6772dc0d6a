"""Tables as markdown, LaTeX or CSV, with the best / second / third value per column marked.

Marking follows the long-tailed paper's Table 2: best **bold**, second underlined, third italic
(LaTeX: \\textbf, \\underline, \\textit; markdown: **x**, <u>x</u>, *x*). Columns declare whether
higher or lower is better. Extra per-cell styles (e.g. "not significantly worse" italics for the
small-data table) can be passed explicitly.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence, Union

from ..store import Record, ResultsStore

Format = Literal["markdown", "latex", "csv"]
FORMATS: tuple[str, ...] = ("markdown", "latex", "csv")
#: what a table is built from: a list of records (e.g. one grid's), or a results store (all its records)
Records = Union[ResultsStore, Sequence[Record]]


def select(records: Records, *, protocol: str, dataset: str | None = None, kind: str | None = None) -> list[Record]:
    """The records of ``protocol`` (only ``dataset``'s, only of ``kind``, when given), oldest first, from a
    list of records or a results store (queried, never copied)."""
    if isinstance(records, ResultsStore):
        return records.records(protocol=protocol, dataset=dataset, kind=kind)
    return [r for r in records if r.protocol == protocol and (dataset is None or r.dataset == dataset)
            and (kind is None or r.kind == kind)]


@dataclass
class Column:
    key: str
    title: str
    higher_is_better: bool | None = True  # None: not ranked
    percent: bool = True  # fractions shown as percentages with `digits` decimals
    digits: int = 2
    group: str = ""  # HTML: columns of one group share a header cell above their `short` titles
    short: str = ""  # HTML: the title under the group header (default: `title`)


@dataclass
class Table:
    """Rows of named values; ``row_key`` is the first column (e.g. the method)."""

    columns: list[Column]
    rows: list[dict[str, Any]]
    row_key: str = "method"
    row_title: str = "Method"
    caption: str = ""
    styles: dict[tuple[int, str], str] = field(default_factory=dict)  # (row, key) -> bold|italic|underline

    def ranks(self) -> dict[tuple[int, str], int]:
        """(row, column key) -> 1/2/3 for the best three distinct values of each ranked column."""
        out: dict[tuple[int, str], int] = {}
        for col in self.columns:
            if col.higher_is_better is None:
                continue
            vals = sorted({v for r in self.rows if _finite(v := r.get(col.key))},
                          reverse=col.higher_is_better)
            for i, r in enumerate(self.rows):
                v = r.get(col.key)
                if _finite(v) and v in vals[:3]:
                    out[(i, col.key)] = vals.index(v) + 1
        return out

    def marks(self) -> dict[tuple[int, str], str]:
        """(row, column key) -> "bold" | "underline" | "italic": the explicit ``styles`` when given,
        else the ranks (best bold, second underlined, third italic)."""
        if self.styles:
            return dict(self.styles)
        return {k: _RANK_STYLE[r] for k, r in self.ranks().items()}

    def render(self, fmt: Format = "markdown") -> str:
        if fmt == "csv":
            return _csv(self)
        if fmt == "latex":
            return _latex(self)
        if fmt == "markdown":
            return _markdown(self)
        raise ValueError(f"format: expected one of {FORMATS}, got {fmt!r}")


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def format_value(v: Any, col: Column) -> str:
    """A cell's text: "–" for a missing or NaN value, a fraction as a percentage (``col.percent``)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if _finite(v):
        return f"{100 * v:.{col.digits}f}" if col.percent else f"{v:.{col.digits}f}"
    return str(v)


_RANK_STYLE = {1: "bold", 2: "underline", 3: "italic"}
_STYLE_MD = {"bold": "**{}**", "italic": "*{}*", "underline": "<u>{}</u>"}
_STYLE_TEX = {"bold": "\\textbf{{{}}}", "italic": "\\textit{{{}}}", "underline": "\\underline{{{}}}"}


def _cells(t: Table, styles: dict[str, str]) -> list[list[str]]:
    marks = t.marks()
    out = []
    for i, r in enumerate(t.rows):
        row = [str(r.get(t.row_key, ""))]
        for col in t.columns:
            s = format_value(r.get(col.key), col)
            if (i, col.key) in marks:
                s = styles[marks[(i, col.key)]].format(s)
            row.append(s)
        out.append(row)
    return out


def _markdown(t: Table) -> str:
    head = [t.row_title] + [c.title for c in t.columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * len(t.columns)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in _cells(t, _STYLE_MD)]
    if t.caption:
        lines = [t.caption, ""] + lines
    return "\n".join(lines)


def _tex_escape(s: str) -> str:
    for a, b in (("\\", "\\textbackslash{}"), ("_", "\\_"), ("%", "\\%"), ("&", "\\&"), ("#", "\\#")):
        s = s.replace(a, b)
    return s


def _latex(t: Table) -> str:
    head = [t.row_title] + [c.title for c in t.columns]
    lines = ["\\begin{table}[t]", "\\centering"]
    if t.caption:
        lines.append(f"\\caption{{{_tex_escape(t.caption)}}}")
    lines += ["\\begin{tabular}{l" + "r" * len(t.columns) + "}", "\\toprule",
              " & ".join(_tex_escape(h) for h in head) + " \\\\", "\\midrule"]
    for r in _cells(t, _STYLE_TEX):
        lines.append(" & ".join([_tex_escape(r[0])] + r[1:]) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}"]
    return "\n".join(lines)


def _csv(t: Table) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([t.row_key] + [c.key for c in t.columns])
    for r in t.rows:
        w.writerow([r.get(t.row_key, "")] + [r.get(c.key) if _finite(r.get(c.key)) or isinstance(r.get(c.key), str)
                                             else "" for c in t.columns])
    return buf.getvalue().rstrip("\n")


def aggregate(values: Sequence[float | None]) -> float | None:
    v = [x for x in values if _finite(x)]
    return sum(v) / len(v) if v else None
