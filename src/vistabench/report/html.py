"""The static HTML report: one self-contained file with embedded PNG plots.

Each declared protocol (:mod:`vistabench.suite`) contributes its ``section`` part: a function taking
the results store and returning a :class:`Section` (or None when the store has nothing for it).

Every table is sortable: a click on a column header sorts the rows by it (numbers by value, missing
values last; the first click puts the best end first, a second click reverses), by a small script
inlined in the page (no network). A table scrolls sideways in its own box when it is wider than the
page, its first column (the method) staying in view, with a cue above it and a faded right edge
saying so. Columns without a single value are left out, one line under the table naming them.

Plots are PNG images scaled down to the page's width: :func:`figure_html` enlarges any text of a
figure that would be smaller than :data:`MIN_TEXT_PX` on an 800 px wide page (:data:`NARROW_PAGE_PX`)
and records the smallest text's size in the image (``data-text-px``), so a browser test can check
the size as rendered.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..atomic import write_text
from ..store import ResultsStore
from .tables import Table, format_value


#: the narrowest window the report is laid out for, the width a figure gets there (the body's side
#: padding and a scroll bar taken off), and the smallest text allowed on it, plots included (CSS px)
NARROW_PAGE_PX = 800
NARROW_CONTENT_PX = 750
MIN_TEXT_PX = 9.0
FIGURE_DPI = 110


@dataclass
class Section:
    title: str
    parts: list[str] = field(default_factory=list)  # HTML fragments

    def text(self, s: str) -> "Section":
        self.parts.append(f"<p>{prose(s)}</p>")
        return self

    def html(self, s: str) -> "Section":
        self.parts.append(s)
        return self

    def subtitle(self, s: str) -> "Section":
        self.parts.append(f"<h3>{html.escape(s)}</h3>")
        return self

    def table(self, table: Table | str, *, why_empty: dict[str, str] | None = None) -> "Section":
        """A :class:`Table` (sort keys are its values) or a markdown pipe table. ``why_empty``: column
        key or group -> why it has no value, said in the line naming the columns left out."""
        if not isinstance(table, Table):
            self.parts.append(markdown_to_html(table))
            return self
        self.parts.append(table_html(table, why_empty=why_empty))
        self.parts.append(latex_html(table))
        return self

    def figure(self, fig, caption: str = "") -> "Section":
        self.parts.append(figure_html(fig, caption))
        return self


def readable_text(fig, *, dpi: float = FIGURE_DPI, width_px: float = NARROW_CONTENT_PX,
                  min_px: float = MIN_TEXT_PX) -> float:
    """Enlarge every text of ``fig`` that would show smaller than ``min_px`` once the saved image
    (``bbox_inches="tight"`` at ``dpi``) is scaled to ``width_px``; return the smallest text's size
    in the saved image, in pixels. Enlarged text widens the picture, so the check repeats (at most 4 times)."""
    from matplotlib.text import Text

    def shown() -> list:  # after a draw: tick labels are made anew when the ticks are
        return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]

    for _ in range(5):
        fig.canvas.draw()
        box = fig.get_tightbbox(fig.canvas.get_renderer())
        image_px = (box.width + 0.2) * dpi  # savefig's pad_inches=0.1 on both sides
        need_pt = min_px * 72 / dpi / min(1.0, width_px / image_px) * 1.01
        small = [t for t in shown() if t.get_fontsize() < need_pt]
        if not small:
            break
        for ax in fig.axes:  # tick labels through the axes, or new ticks would come back small
            for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
                for which, ticks in (("major", axis.get_major_ticks()), ("minor", axis.get_minor_ticks())):
                    if any(t.label1.get_fontsize() < need_pt for t in ticks):
                        ax.tick_params(axis=name, which=which, labelsize=need_pt)
        for t in small:
            t.set_fontsize(need_pt)
    fig.canvas.draw()
    return min((t.get_fontsize() for t in shown()), default=0.0) * dpi / 72


_CODE = re.compile(r"`([^`]+)`")


def prose(s: str) -> str:
    """A sentence of the report as HTML: escaped, with `code` spans (a command, an option, as the
    captions write them for the terminal too) shown as code rather than as literal backticks."""
    return _CODE.sub(r"<code>\1</code>", html.escape(s))


def figure_html(fig, caption: str = "") -> str:
    """A figure as an embedded PNG, its text readable on a narrow page (:func:`readable_text`)."""
    import matplotlib.pyplot as plt

    text_px = readable_text(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=FIGURE_DPI, bbox_inches="tight")
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    cap = f"<figcaption>{prose(caption)}</figcaption>" if caption else ""
    return (f'<figure><img alt="{html.escape(caption)}" data-text-px="{text_px:.2f}" '
            f'src="data:image/png;base64,{data}"/>{cap}</figure>')


_KEY = ' class="key"'  # the row-key (method) column: kept in view while a wide table scrolls
_TEXT = ' class="t"'  # a column without a single number: left-aligned, on one line unless long
_LONG_TEXT = ' class="t long"'
_NUMBER = re.compile(r"^[-+]?(\d[\d,]*\.?\d*|\.\d+)(e[-+]?\d+)?%?$")


def _text_columns(rows: list[list[str]]) -> dict[int, str]:
    """Columns (after the first) in which no body cell reads as a number -> their class attribute."""
    width = max(len(r) for r in rows)
    out = {}
    for j in range(1, width):
        texts = [x for r in rows if j < len(r) and (x := re.sub(r"<[^>]+>", "", r[j]).strip()) not in ("", "–")]
        if texts and not any(_NUMBER.match(x) for x in texts):
            out[j] = _LONG_TEXT if max(map(len, texts), default=0) > 16 else _TEXT
    return out


def markdown_to_html(md: str) -> str:
    """Render the pipe tables that :mod:`vistabench.report.tables` writes."""
    lines = [l for l in md.strip().splitlines()]
    caption = []
    while lines and not lines[0].startswith("|"):
        if lines[0].strip():
            caption.append(lines[0])
        lines.pop(0)

    def cell(s: str) -> str:
        s = html.escape(s.strip()).replace("&lt;u&gt;", "<u>").replace("&lt;/u&gt;", "</u>")
        s = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", s)
        return re.sub(r"\*(.+?)\*", r"<i>\1</i>", s)

    rows = [[c for c in l.strip().strip("|").split("|")] for l in lines if not set(l) <= set("|-: ")]
    if not rows:
        return ""
    out = [f'<p class="caption">{prose(" ".join(caption))}</p>'] if caption else []
    out.append('<div class="table-box"><table>')
    body = [[cell(c) for c in r] for r in rows[1:]]
    text = _text_columns(body) if body else {}
    cls = lambda j: _KEY if j == 0 else text.get(j, "")  # noqa: E731
    out.append("<thead><tr>" + "".join(f'<th data-col="{j}"{cls(j)}{_better_from_title(c)}>{cell(c)}</th>'
                                       for j, c in enumerate(rows[0])) + "</tr></thead><tbody>")
    for r in body:
        out.append("<tr>" + "".join(f"<td{cls(j)}>{c}</td>" for j, c in enumerate(r)) + "</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


_MARK_TAG = {"bold": "b", "underline": "u", "italic": "i"}


def _better(higher_is_better: bool | None) -> str:
    """The header's ``data-better`` attribute: which end the first click on it puts first."""
    return "" if higher_is_better is None else f' data-better="{"high" if higher_is_better else "low"}"'


def _better_from_title(title: str) -> str:
    """A markdown table's column direction, from the arrow in its title (↑ higher, ↓ lower is better)."""
    return _better(True) if "↑" in title else _better(False) if "↓" in title else ""


def _empty(v) -> bool:
    return v is None or v == "" or (isinstance(v, float) and v != v)


def empty_columns(t: Table) -> list:
    """The columns of ``t`` without a single value (all missing, NaN or empty text)."""
    return [c for c in t.columns if all(_empty(r.get(c.key)) for r in t.rows)] if t.rows else []


def _empty_note(t: Table, hidden: list, why_empty: dict[str, str] | None) -> str:
    """One line naming the columns left out (whole groups by their group name) and why."""
    why = why_empty or {}
    names, reasons = [], []
    for group in dict.fromkeys(c.group for c in hidden):
        cols = [c for c in hidden if c.group == group]
        whole = bool(group) and len(cols) == sum(c.group == group for c in t.columns)
        named = [f"the {group} half"] if whole else [c.title for c in cols]
        names += named
        for key in ([group] if whole else []) + [c.key for c in cols]:
            if key in why and why[key] not in reasons:
                reasons.append(why[key])
    because = "; ".join(reasons) if reasons else "no record in the store measured them"
    return (f'<p class="note">Not shown, without a value in any row: {html.escape(", ".join(names))} '
            f"({prose(because)}).</p>")


def _sort_value(v) -> str:
    """A cell's sort key: a number's full value; '' (sorted last) for a missing or non-finite value."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return "" if v is None else str(v)
    return repr(float(v)) if v == v and abs(v) != float("inf") else ""


def table_html(t: Table, *, why_empty: dict[str, str] | None = None) -> str:
    """A :class:`Table` as HTML: the marks of its markdown form (bold / underlined / italic), each
    cell's value as its sort key, and a two-row header where columns declare a ``group``. Columns
    without a single value are left out, named in one line after the table (``why_empty``: column
    key or group -> the reason given there)."""
    marks = t.marks()
    hidden = empty_columns(t)
    note = _empty_note(t, hidden, why_empty) if hidden else ""
    if hidden:
        t = dataclasses.replace(t, columns=[c for c in t.columns if c not in hidden])
    grouped = any(c.group for c in t.columns)
    out = [f'<p class="caption">{prose(t.caption)}</p>'] if t.caption else []
    out.append('<div class="table-box"><table>')
    span = ' rowspan="2"' if grouped else ""
    text = _text_columns([[""] + [format_value(v, c) if not _NUMBER.match(_sort_value(v := r.get(c.key))) else "0"
                                  for c in t.columns] for r in t.rows]) if t.rows else {}
    cls = lambda j: text.get(j, "")  # noqa: E731
    top = [f'<th data-col="0"{_KEY}{span}>{html.escape(t.row_title)}</th>']
    sub = []
    j = 0
    while j < len(t.columns):
        col = t.columns[j]
        if not col.group:
            top.append(f'<th data-col="{j + 1}"{cls(j + 1)}{_better(col.higher_is_better)}{span}>'
                       f'{html.escape(col.title)}</th>')
            j += 1
            continue
        k = j
        while k < len(t.columns) and t.columns[k].group == col.group:
            c = t.columns[k]
            sub.append(f'<th data-col="{k + 1}"{cls(k + 1)}{_better(c.higher_is_better)} title="{html.escape(c.title)}">'
                       f'{html.escape(c.short or c.title)}</th>')
            k += 1
        top.append(f'<th class="group" colspan="{k - j}">{html.escape(col.group)}</th>')
        j = k
    out.append("<thead><tr>" + "".join(top) + "</tr>" + (f"<tr>{''.join(sub)}</tr>" if sub else "") + "</thead><tbody>")
    for i, r in enumerate(t.rows):
        cells = [f"<td{_KEY}>{html.escape(str(r.get(t.row_key, '')))}</td>"]
        for j, col in enumerate(t.columns):
            v = r.get(col.key)
            cell = html.escape(t.text(i, col))  # the value, and "± SD" where the row has one
            if (i, col.key) in marks:
                tag = _MARK_TAG[marks[(i, col.key)]]
                cell = f"<{tag}>{cell}</{tag}>"
            cells.append(f'<td{cls(j + 1)} data-v="{html.escape(_sort_value(v))}">{cell}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    if note:
        out.append(note)
    return "\n".join(out)


def latex_html(t: Table) -> str:
    """The table's LaTeX (what ``vistabench table --format latex`` prints), folded under the table."""
    return (f'<details class="latex"><summary>LaTeX</summary><pre>{html.escape(t.render("latex"))}</pre>'
            "</details>")


# Every table sits in its own box that scrolls sideways when the table is wider than the page, so the
# page itself never overflows; the first column (the method) stays in view while the box scrolls and
# is wide enough that a name wraps at most once or twice; long words elsewhere wrap.
STYLE = """
body{font-family:system-ui,sans-serif;max-width:1400px;margin:2em auto;padding:0 1em;color:#222;
overflow-wrap:anywhere}
h1{border-bottom:2px solid #444} h2{margin-top:2em;border-bottom:1px solid #aaa} h3{margin-top:1.5em}
.table-box{max-width:100%;overflow-x:auto;margin:1em 0}
table{border-collapse:separate;border-spacing:0;font-size:0.85em} .caption{font-style:italic;font-size:0.9em;margin-bottom:0}
.caption+.table-box{margin-top:0.3em}
td,th{border:1px solid #ccc;border-width:0 1px 1px 0;padding:3px 5px;text-align:right;overflow-wrap:normal}
tr>:first-child{border-left-width:1px} thead tr:first-child>*{border-top-width:1px}
th{background:#f3f3f3} th.group{text-align:center} .t{text-align:left;white-space:nowrap}
.t.long{white-space:normal;min-width:8em}
th[data-col]{cursor:pointer;position:relative;padding-right:12px}
th[data-col]::after{content:"\\21C5";color:#aaa;font-size:9px;position:absolute;right:2px;top:3px}
th[aria-sort=ascending]::after{content:"\\25B2";color:#222} th[aria-sort=descending]::after{content:"\\25BC";color:#222}
.key{text-align:left;position:sticky;left:0;z-index:1;min-width:11em;max-width:24em;white-space:normal}
td.key{background:#fff}
figure{margin:1em 0} img{max-width:100%;height:auto} figcaption{font-size:0.85em;color:#555}
pre{max-width:100%;overflow-x:auto} nav a{margin-right:1em;display:inline-block}
.note{font-size:0.85em;color:#555;margin-top:0.2em}
details.latex{font-size:0.8em;color:#555;margin:0.2em 0 1em} details.latex pre{background:#f7f7f7;padding:0.5em}
.scroll-cue{font-size:0.8em;color:#555;margin:0.3em 0 0} .scroll-cue[hidden]{display:none}
.table-box.scrolls{border-right:2px solid #bbb}
.table-box.scrolls:not(.at-end){-webkit-mask-image:linear-gradient(to right,#000 calc(100% - 32px),rgba(0,0,0,.3));
mask-image:linear-gradient(to right,#000 calc(100% - 32px),rgba(0,0,0,.3))}
"""

# Click a header to sort its table by that column: numbers by value, text alphabetically, missing
# values ("–") last in both directions. The first click puts the best end first (descending for a
# column where higher is better, data-better="high"; ascending for "low" and for unranked columns);
# a second click reverses. Ties keep their order.
# A table wider than its box (the page) gets the "scroll-cue" line above it and a faded right edge
# (class "scrolls") until it is scrolled to its end ("at-end"); checked on load and on resize.
SORT_SCRIPT = """
document.addEventListener("click", function (e) {
  var th = e.target.closest && e.target.closest("th[data-col]");
  if (!th) return;
  var table = th.closest("table"), body = table.tBodies[0], col = +th.getAttribute("data-col");
  var now = th.getAttribute("aria-sort");
  var asc = now ? now !== "ascending" : th.getAttribute("data-better") !== "high";
  table.querySelectorAll("th[aria-sort]").forEach(function (h) { h.removeAttribute("aria-sort"); });
  th.setAttribute("aria-sort", asc ? "ascending" : "descending");
  function key(tr) {
    var td = tr.cells[col];
    if (!td) return null;
    var v = (td.hasAttribute("data-v") ? td.getAttribute("data-v") : td.textContent).trim();
    if (v === "" || v === "\u2013" || v === "-") return null;
    var n = Number(v.replace(/%$/, ""));
    return isNaN(n) ? v.toLowerCase() : n;
  }
  var rows = Array.from(body.rows).map(function (tr, i) { return [key(tr), i, tr]; });
  rows.sort(function (a, b) {
    if (a[0] === null || b[0] === null) return ((a[0] === null) - (b[0] === null)) || a[1] - b[1];
    var c = typeof a[0] !== typeof b[0] ? (typeof a[0] === "number" ? -1 : 1)
          : a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
    return (asc ? c : -c) || a[1] - b[1];
  });
  rows.forEach(function (r) { body.appendChild(r[2]); });
});
function vbScrollCues() {
  document.querySelectorAll(".table-box").forEach(function (box) {
    var cue = box.previousElementSibling;
    if (!cue || !cue.classList.contains("scroll-cue")) {
      cue = document.createElement("p");
      cue.className = "scroll-cue";
      cue.textContent = "\u21C6 This table is wider than the page: scroll it sideways (the first column stays).";
      box.parentNode.insertBefore(cue, box);
      box.addEventListener("scroll", function () {
        box.classList.toggle("at-end", box.scrollLeft + box.clientWidth >= box.scrollWidth - 1); });
    }
    var wide = box.scrollWidth > box.clientWidth + 1;
    box.classList.toggle("scrolls", wide);
    box.classList.toggle("at-end", !wide || box.scrollLeft + box.clientWidth >= box.scrollWidth - 1);
    cue.hidden = !wide;
  });
}
window.addEventListener("load", vbScrollCues);
window.addEventListener("resize", vbScrollCues);
"""


def page_html(title: str, body: str) -> str:
    """A whole page: ``body`` (HTML) under the report's stylesheet :data:`STYLE`."""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<style>{STYLE}</style><script>{SORT_SCRIPT}</script></head><body>{body}</body></html>")


def build_report(store: ResultsStore, out_dir: str | Path, *, title: str = "vistabench report") -> Path:
    """Write ``out_dir/index.html`` from every section that has data; return its path."""
    from ..suite import protocols

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    built = []
    for proto in (p for p in protocols() if p.has("section")):
        sec = proto.part("section")(store)
        if sec is not None:
            built.append((proto.name, sec))
    body = [f"<h1>{html.escape(title)}</h1>",
            f"<p>vistabench {__version__} · store <code>{html.escape(str(store.path))}</code> · "
            f"{time.strftime('%Y-%m-%d %H:%M')}</p>"]
    body.append("<nav>" + "".join(f'<a href="#{n}">{html.escape(s.title)}</a>' for n, s in built) + "</nav>")
    if not built:
        body.append("<p>The store holds no records yet: run <code>vistabench demo</code>.</p>")
    for name, sec in built:
        body.append(f'<h2 id="{name}">{html.escape(sec.title)}</h2>')
        body.extend(sec.parts)
    page = page_html(title, "".join(body))
    path = out / "index.html"
    write_text(path, page, what="report")
    return path
