"""The static HTML report: one self-contained file with embedded PNG plots.

Each declared protocol (:mod:`vistabench.suite`) contributes its ``section`` part: a function taking
the results store and returning a :class:`Section` (or None when the store has nothing for it).
"""

from __future__ import annotations

import base64
import html
import io
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..store import ResultsStore


@dataclass
class Section:
    title: str
    parts: list[str] = field(default_factory=list)  # HTML fragments

    def text(self, s: str) -> "Section":
        self.parts.append(f"<p>{html.escape(s)}</p>")
        return self

    def html(self, s: str) -> "Section":
        self.parts.append(s)
        return self

    def table(self, markdown_table: str) -> "Section":
        self.parts.append(markdown_to_html(markdown_table))
        return self

    def figure(self, fig, caption: str = "") -> "Section":
        self.parts.append(figure_html(fig, caption))
        return self


def figure_html(fig, caption: str = "") -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
    return f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}"/>{cap}</figure>'


def markdown_to_html(md: str) -> str:
    """Render the pipe tables that :mod:`vistabench.report.tables` writes."""
    import re

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
    out = ['<div class="table-box"><table>']
    if caption:
        out.append(f"<caption>{html.escape(' '.join(caption))}</caption>")
    out.append("<tr>" + "".join(f"<th>{cell(c)}</th>" for c in rows[0]) + "</tr>")
    for r in rows[1:]:
        out.append("<tr>" + "".join(f"<td>{cell(c)}</td>" for c in r) + "</tr>")
    out.append("</table></div>")
    return "\n".join(out)


# Every table sits in its own box that scrolls sideways when the table is wider than the page (the
# long-tail survey layout has a dozen columns), so the page itself never overflows; long words wrap.
STYLE = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;
overflow-wrap:anywhere}
h1{border-bottom:2px solid #444} h2{margin-top:2em;border-bottom:1px solid #aaa}
.table-box{max-width:100%;overflow-x:auto;margin:1em 0}
table{border-collapse:collapse;font-size:0.9em} caption{text-align:left;font-style:italic}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;overflow-wrap:normal}
td:first-child,th:first-child{text-align:left}
figure{margin:1em 0} img{max-width:100%;height:auto} figcaption{font-size:0.85em;color:#555}
pre{max-width:100%;overflow-x:auto} nav a{margin-right:1em;display:inline-block}
"""


def page_html(title: str, body: str) -> str:
    """A whole page: ``body`` (HTML) under the report's stylesheet :data:`STYLE`."""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{body}</body></html>")


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
    path.write_text(page, encoding="utf-8")
    return path
