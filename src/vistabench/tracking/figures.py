"""A run's figures: its protocol's report section, rendered for the run's own records.

The section is the one the HTML report shows (:mod:`vistabench.report`), built on a view that
holds only the run's records; the page is kept whole (``report.html``, self-contained) and each
embedded figure is also taken out as a PNG, named after its caption.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass

from ..store import Record, ResultsStore

__all__ = ["RunFigures", "run_figures"]

#: an embedded figure of the section: its caption (alt) and PNG; other attributes may stand between them
_IMG = re.compile(r'<img alt="([^"]*)"[^>]*? src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


@dataclass
class RunFigures:
    page: str | None               # the section as a whole HTML page (None: the protocol has no section)
    images: list[tuple[str, bytes]]  # (file stem, PNG bytes), in the section's order


def _stem(i: int, caption: str) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", html.unescape(caption).lower()).strip("-")[:60].rstrip("-")
    return f"{i:02d}-{words}" if words else f"{i:02d}-figure"


def run_figures(protocol: str, records: list[Record]) -> RunFigures:
    """The report section of ``protocol`` for exactly ``records`` (as the report would show them)."""
    from ..report.html import page_html
    from ..suite import get_protocol

    decl = get_protocol(protocol)
    if not decl.section or not records:
        return RunFigures(None, [])
    with ResultsStore(":memory:") as view:
        for r in records:
            d = r.to_dict()
            d.pop("id")
            view.add(Record(**d))
        section = decl.part("section")(view)
    if section is None:
        return RunFigures(None, [])
    body = "".join(section.parts)
    page = page_html(section.title, f"<h1>{html.escape(section.title)}</h1>{body}")
    images = [(_stem(i, alt), base64.b64decode(data)) for i, (alt, data) in enumerate(_IMG.findall(body), 1)]
    return RunFigures(page, images)
