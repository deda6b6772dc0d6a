"""Tables as markdown, LaTeX or CSV, with statistics over runs and the best values per column marked.

Statistics: a row of a protocol's table is one group of distinct results (:mod:`.results`: the same
predictions scored twice are one result, and a table never mixes scoring modes); a cell holds the
mean over the group, ``<key>_sd`` the sample standard deviation (ddof 1; None when N = 1) and the
row's ``n`` (or the cell's ``<key>_n``) the number N of distinct results. Every format shows them:
markdown / LaTeX / HTML as "mean ± SD" with an N column, CSV and JSON as their own columns.

Marking follows the long-tailed paper's Table 2: best **bold**, second underlined, third italic
(LaTeX: \\textbf, \\underline, \\textit; markdown: **x**, <u>x</u>, *x*), by the value as shown
(values equal to the printed digits are tied and marked alike). Marks mean something only when
they compare: a column is marked only when at least two rows have a value there and each of them
rests on N >= 2 results. They are by mean only (no test); a protocol with its own test passes its
marks as explicit ``styles`` (small data: Welch's t-test). :meth:`Table.note` says which applies.
LaTeX output compiles with pdflatex and xelatex in a minimal document (``booktabs`` and ``graphicx``):
symbols are written as LaTeX (math mode for ρ, α, arrows, ``AP^Old``), the needed packages are printed
as a comment at the top, and a tabular wider than the text is scaled down to ``\\linewidth`` (a narrower
one keeps its size), so a pasted table stays on the page.
"""

from __future__ import annotations

import csv
import io
import math
import re
import unicodedata
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
    tex: str = ""  # LaTeX: the header as LaTeX source (default: `title`, escaped)


#: the column of the number of distinct results a row rests on (protocol tables put it first)
N_COLUMN = Column("n", "N", None, percent=False, digits=0)


@dataclass
class Table:
    """Rows of named values; ``row_key`` is the first column (e.g. the method).

    A row may carry, for a column ``key``, ``<key>_sd`` (the standard deviation shown as "± SD") and
    ``<key>_n`` (the N of that cell, where cells of one row rest on different numbers of results);
    ``n`` is the row's N. ``footnotes``: lines printed under the table (LaTeX: below the tabular).
    """

    columns: list[Column]
    rows: list[dict[str, Any]]
    row_key: str = "method"
    row_title: str = "Method"
    caption: str = ""
    styles: dict[tuple[int, str], str] = field(default_factory=dict)  # (row, key) -> bold|italic|underline
    footnotes: list[str] = field(default_factory=list)
    ranked: bool = True  # False: the marks are the explicit ``styles`` only (a protocol's own test)

    def cell_n(self, i: int, key: str) -> int | None:
        """The N of row ``i``'s cell ``key`` (its own ``<key>_n``, else the row's ``n``; None: not given)."""
        r = self.rows[i]
        n = r.get(f"{key}_n", r.get("n"))
        return n if isinstance(n, int) and not isinstance(n, bool) else None

    def _comparable(self, key: str) -> list[int]:
        """Rows whose cell ``key`` may be marked: with a value, and N >= 2 where N is given; none when
        fewer than two rows have a value or any of them rests on a single result."""
        rows = [i for i, r in enumerate(self.rows) if _finite(r.get(key))]
        if len(rows) < 2 or any((n := self.cell_n(i, key)) is not None and n < 2 for i in rows):
            return []
        return rows

    def ranks(self, depth: int = 3, among: Sequence[int] | None = None) -> dict[tuple[int, str], int]:
        """(row, column key) -> 1/2/.. for the best ``depth`` distinct values of each ranked column, as
        shown (rounded to the column's digits: equal printed values tie), among ``among`` (default
        every row) and only where marks compare (:meth:`_comparable`)."""
        out: dict[tuple[int, str], int] = {}
        for col in self.columns:
            if col.higher_is_better is None:
                continue
            rows = [i for i in self._comparable(col.key) if among is None or i in among]
            if len(rows) < 2:
                continue
            shown = {i: shown_value(self.rows[i][col.key], col) for i in rows}
            distinct = sorted(set(shown.values()), reverse=col.higher_is_better)
            if len(distinct) < 2:  # every row ties: nothing is best
                continue
            vals = distinct[:depth]
            for i, v in shown.items():
                if v in vals:
                    out[(i, col.key)] = vals.index(v) + 1
        return out

    def marks(self) -> dict[tuple[int, str], str]:
        """(row, column key) -> "bold" | "underline" | "italic": the explicit ``styles`` when given,
        else the ranks (best bold, second underlined, third italic)."""
        if self.styles or not self.ranked:
            return dict(self.styles)
        return {k: _RANK_STYLE[r] for k, r in self.ranks().items()}

    def note(self, *, test: str | None = None) -> str:
        """The sentence a caption ends with: what a cell is, and what the marks mean (``test``: the
        protocol's significance test, when its marks come from one)."""
        has_sd = any(k.endswith("_sd") for r in self.rows for k in r)
        cells = (" Cells: mean ± sample SD over the N distinct results (seeds or predictions files; no SD "
                 "where N = 1)." if has_sd else "")
        if not any(self.marks().values()):
            return cells + " No marks: they need two or more rows with N ≥ 2."
        how = f"decided by {test}" if test else "by mean only, not by a significance test"
        return cells + f" Marks {how}; equal printed values are marked alike; rows with N = 1 are not marked."

    def text(self, i: int, col: Column) -> str:
        """Row ``i``'s cell of ``col`` as text: the value, "± SD" when the row has one, and "(n=N)" when
        the cell has its own N and the table no N column."""
        r = self.rows[i]
        s = format_value(r.get(col.key), col)
        sd = r.get(f"{col.key}_sd")
        if _finite(sd) and _finite(r.get(col.key)):
            s += " ± " + format_value(sd, col)
        n = r.get(f"{col.key}_n")
        if isinstance(n, int) and n and not any(c.key == "n" for c in self.columns):
            s += f" (n={n})"
        return s

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


def shown_value(v: float, col: Column) -> float:
    """The value as a cell shows it (percent, rounded to ``col.digits``): what ranks and ties compare."""
    return round(100 * v if col.percent else v, col.digits)


def format_value(v: Any, col: Column) -> str:
    """A cell's text: "–" for a missing or NaN value, a fraction as a percentage (``col.percent``)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if _finite(v):
        return f"{100 * v:.{col.digits}f}" if col.percent else f"{v:.{col.digits}f}"
    return str(v)


def mean_sd(values: Sequence[Any]) -> tuple[float | None, float | None, int]:
    """(mean, sample standard deviation with ddof 1, N) of the finite ``values``; the SD is None when
    N < 2, the mean None when N = 0."""
    v = [float(x) for x in values if _finite(x)]
    if not v:
        return None, None, 0
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else None
    return m, sd, len(v)


def put_stats(row: dict[str, Any], key: str, values: Sequence[Any], *, cell_n: bool = False) -> None:
    """Set ``row[key]`` (mean), ``row[key + "_sd"]`` (SD) of ``values`` (:func:`mean_sd`); with
    ``cell_n`` also ``row[key + "_n"]`` (this cell's N, where the cells of a row differ)."""
    m, sd, n = mean_sd(values)
    row[key], row[f"{key}_sd"] = m, sd
    if cell_n:
        row[f"{key}_n"] = n


_RANK_STYLE = {1: "bold", 2: "underline", 3: "italic"}
_STYLE_MD = {"bold": "**{}**", "italic": "*{}*", "underline": "<u>{}</u>"}
_STYLE_TEX = {"bold": "\\textbf{{{}}}", "italic": "\\textit{{{}}}", "underline": "\\underline{{{}}}"}


def _cells(t: Table, styles: dict[str, str], text=None) -> list[list[str]]:
    marks = t.marks()
    out = []
    for i, r in enumerate(t.rows):
        row = [str(r.get(t.row_key, ""))]
        for col in t.columns:
            s = t.text(i, col) if text is None else text(t.text(i, col))
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
    if t.footnotes:
        lines += [""] + t.footnotes
    return "\n".join(lines)


#: text symbols -> LaTeX that pdflatex and xelatex both typeset with no package beyond the kernel
_TEX_SYMBOLS = {"↑": "$\\uparrow$", "↓": "$\\downarrow$", "→": "$\\rightarrow$", "≠": "$\\neq$", "≥": "$\\geq$",
                "≤": "$\\leq$", "±": "$\\pm$", "×": "$\\times$", "·": "$\\cdot$", "≈": "$\\approx$", "∞": "$\\infty$",
                "†": "$^\\dagger$", "–": "--", "—": "---", "…": "\\dots{}", "’": "'", "‘": "`", "“": "``", "”": "''",
                "−": "$-$", "√": "$\\surd$", "°": "$^\\circ$", "²": "$^2$", "⁻": "$^-$",
                "\u2060": "{}", "`": ""}  # a word joiner keeps ASCII "--" two hyphens; `code` marks dropped
_TEX_SPECIAL = {"\\": "\\textbackslash{}", "_": "\\_", "%": "\\%", "&": "\\&", "#": "\\#",
                "{": "\\{", "}": "\\}", "~": "\\textasciitilde{}", "^": "\\textasciicircum{}", "<": "$<$", ">": "$>$",
                "|": "$|$"}
#: ``AP^Old``, ``AP^Old_r``, ``ρ_trn``: a name with a super- / subscript, written in math mode
_SCRIPTS = re.compile(r"\^([A-Za-z0-9]+)(?:_([A-Za-z0-9]+))?|(?<=[\u0370-\u03ff])_([A-Za-z]{1,4})\b")
_MATH = "\x00"  # a math-mode delimiter until the pieces are joined (an escaped \$ stays a dollar)


def _tex_char(c: str) -> str:
    if c == "$":
        return "\\$"
    if c in _TEX_SPECIAL:
        return _TEX_SPECIAL[c].replace("$", _MATH)
    if c in _TEX_SYMBOLS:
        return _TEX_SYMBOLS[c].replace("$", _MATH)
    if ord(c) < 128:
        return c
    greek = re.fullmatch(r"GREEK (SMALL|CAPITAL) LETTER ([A-Z]+)", unicodedata.name(c, ""))
    if greek:
        letter = greek.group(2).lower().replace("lamda", "lambda")
        if greek.group(1) == "CAPITAL":
            letter = letter.capitalize()
            if letter not in ("Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi", "Psi",
                              "Omega"):
                return letter[0]  # the others look like Latin capitals
        return "o" if letter == "omicron" else f"{_MATH}\\{letter}{_MATH}"
    plain = unicodedata.normalize("NFKD", c).encode("ascii", "ignore").decode()
    return plain or "?"  # an accented letter loses its accent; a symbol with no LaTeX here becomes "?"


def _tex_escape(s: str) -> str:
    """LaTeX source of a plain text: specials escaped, symbols and Greek letters in math mode,
    ``X^Sup_sub`` / ``ρ_trn`` as math super- and subscripts; only ASCII comes out."""
    out, pos = [], 0
    s = re.sub(r"-(?=-)", "-\u2060", s)  # "--mode" stays two hyphens (TeX would make "--" an en dash)
    for m in _SCRIPTS.finditer(s):
        out.append("".join(map(_tex_char, s[pos:m.start()])))
        if m.group(3):
            out.append(f"{_MATH}_{{\\mathrm{{{m.group(3)}}}}}{_MATH}")
        else:
            out.append(f"{_MATH}^{{\\mathrm{{{m.group(1)}}}}}" + (f"_{{\\mathrm{{{m.group(2)}}}}}" if m.group(2) else "")
                       + _MATH)
        pos = m.end()
    out.append("".join(map(_tex_char, s[pos:])))
    return "".join(out).replace(_MATH * 2, "").replace(_MATH, "$")  # adjacent math pieces join into one


#: the packages the LaTeX of :meth:`Table.render` needs (printed as a comment at its top)
TEX_PACKAGES = ("booktabs", "graphicx")
#: scales the tabular down to the text width when it is wider, never up (graphicx's ``\width`` is its natural width)
_FIT_TO_TEXT = "\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{%"


def _latex(t: Table) -> str:
    head = [_tex_escape(t.row_title)] + [c.tex or _tex_escape(c.title) for c in t.columns]
    lines = ["% needs in the preamble: " + " ".join(f"\\usepackage{{{p}}}" for p in TEX_PACKAGES),
             "\\begin{table}[t]", "\\centering"]
    if t.caption:
        lines.append(f"\\caption{{{_tex_escape(t.caption)}}}")
    lines += [_FIT_TO_TEXT, "\\begin{tabular}{l" + "r" * len(t.columns) + "}", "\\toprule", " & ".join(head) + " \\\\",
              "\\midrule"]
    for r in _cells(t, _STYLE_TEX, text=_tex_escape):
        lines.append(" & ".join([_tex_escape(r[0])] + r[1:]) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}}"]
    if t.footnotes:
        lines += ["\\par\\smallskip\\footnotesize"] + [_tex_escape(f) + " \\\\" for f in t.footnotes[:-1]]
        lines.append(_tex_escape(t.footnotes[-1]))
    lines.append("\\end{table}")
    return "\n".join(lines)


def _csv(t: Table) -> str:
    """One column per value, then ``<key>_sd`` / ``<key>_n`` where rows carry them."""
    keys: list[str] = []
    for c in t.columns:
        keys.append(c.key)
        keys += [f"{c.key}_{x}" for x in ("sd", "n") if any(f"{c.key}_{x}" in r for r in t.rows)]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([t.row_key] + keys)
    for r in t.rows:
        w.writerow([r.get(t.row_key, "")] + [r.get(k) if _finite(r.get(k)) or isinstance(r.get(k), str) else ""
                                             for k in keys])
    return buf.getvalue().rstrip("\n")


def aggregate(values: Sequence[float | None]) -> float | None:
    v = [x for x in values if _finite(x)]
    return sum(v) / len(v) if v else None
