"""The demo's HTML report as a person sees it: rendered by headless Chromium at 800 and 1280 px, the
page has no horizontal overflow (wide tables scroll inside their own box), at 1280 px every table
fits without scrolling, a method's name wraps over at most two lines, every image loads, and a
click on a column header sorts the rows by value.

Needs the ``chromium`` browser (Debian package ``chromium``; ``scripts/test.sh`` installs it on CI);
skipped with the reason when it is absent.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--virtual-time-budget=10000")

# appended to a copy of the report: after loading, write what a reader would notice into the DOM;
# last, sort the first table with an "AUC" column by it (two clicks) and record the orders
PROBE = """
<script>
window.addEventListener("load", function () {
  var de = document.documentElement, imgs = Array.from(document.images);
  function lines(el) {
    var r = document.createRange(); r.selectNodeContents(el);
    return new Set(Array.from(r.getClientRects()).map(function (q) { return Math.round(q.top); })).size;
  }
  var out = {scrollWidth: de.scrollWidth, clientWidth: de.clientWidth,
             images: imgs.map(function (i) { return {alt: i.alt, complete: i.complete, width: i.naturalWidth}; }),
             tables: Array.from(document.querySelectorAll("table")).map(function (t) {
               var r = t.getBoundingClientRect(), box = t.parentElement.getBoundingClientRect();
               return {width: Math.round(r.width), boxWidth: Math.round(t.parentElement.clientWidth),
                       boxRight: Math.round(box.right), header: t.rows[0].textContent.slice(0, 60),
                       keyLines: Math.max.apply(null, Array.from(t.querySelectorAll("td.key")).map(lines).concat([0]))}; })};
  var th = Array.from(document.querySelectorAll("th[data-col]")).filter(function (h) {
    return h.textContent.indexOf("AUC") === 0; })[0];
  if (th) {
    var table = th.closest("table"), col = +th.getAttribute("data-col");
    var read = function () { return Array.from(table.tBodies[0].rows).map(function (tr) {
      var td = tr.cells[col]; return td.hasAttribute("data-v") ? td.getAttribute("data-v") : td.textContent; }); };
    out.unsorted = read(); th.click(); out.ascending = read(); th.click(); out.descending = read();
  }
  var pre = document.createElement("pre");
  pre.id = "vb-probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


def browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def render(page: Path, tmp: Path, width: int) -> dict:
    """Load ``page`` in headless Chromium at ``width`` pixels; the probe's findings."""
    exe = browser()
    probe = tmp / f"probe-{width}.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    profile = tmp / f"profile-{width}"
    profile.mkdir()
    out = subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},900", "--dump-dom",
                          probe.as_uri()], capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="vb-probe">(.*?)</pre>', out.stdout, re.S)
    assert m, f"chromium rendered no probe (exit {out.returncode}): {out.stderr[-1500:]}"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


@pytest.fixture(scope="module")
def demo_report(quick_demo):
    if browser() is None:
        pytest.skip("no chromium on this machine (Debian: apt-get install chromium); scripts/test.sh installs it on CI")
    return quick_demo.page


@pytest.mark.parametrize("width", [1280, 800])
def test_the_demo_report_fits_the_page_and_every_image_loads(demo_report, tmp_path, width):
    found = render(demo_report, tmp_path, width)
    assert found["scrollWidth"] <= found["clientWidth"], f"the page is {found['scrollWidth']} px wide in a " \
                                                         f"{found['clientWidth']} px window"
    assert found["tables"] and all(t["boxRight"] <= found["clientWidth"] for t in found["tables"])
    if width >= 1280:  # nothing to scroll sideways: the survey layout's right half included
        wide = [(t["header"], t["width"], t["boxWidth"]) for t in found["tables"] if t["width"] > t["boxWidth"]]
        assert not wide, f"tables wider than the page at {width} px: {wide}"
    wrapped = [(t["header"], t["keyLines"]) for t in found["tables"] if t["keyLines"] > 2]
    assert not wrapped, f"method names wrapping over more than two lines at {width} px: {wrapped}"
    assert found["images"], "the demo report has plots"
    broken = [i["alt"] for i in found["images"] if not i["complete"] or i["width"] == 0]
    assert not broken, f"images that did not load: {broken}"


def test_a_click_on_a_header_sorts_by_value(demo_report, tmp_path):
    found = render(demo_report, tmp_path, 1280)
    values = [v for v in found["unsorted"] if v]
    assert len(values) >= 2 and len(set(values)) >= 2
    nums = sorted(map(float, values))
    missing = len(found["unsorted"]) - len(values)
    assert [float(v) for v in found["ascending"][:len(values)]] == nums
    assert [float(v) for v in found["descending"][:len(values)]] == nums[::-1]
    assert found["ascending"][len(values):] == found["descending"][len(values):] == [""] * missing


def test_a_table_wider_than_the_page_scrolls_in_its_own_box(tmp_path):
    """The check itself can fail: the same page without the report's table box overflows."""
    if browser() is None:
        pytest.skip("no chromium on this machine (Debian: apt-get install chromium)")
    from vistabench.report.html import Section, markdown_to_html, page_html

    header = "| method | " + " | ".join(f"column number {i}" for i in range(30)) + " |"
    md = "\n".join([header, "|---" * 31 + "|", "| ce | " + " | ".join("0.123456" for _ in range(30)) + " |"])
    boxed = markdown_to_html(md)
    assert boxed.startswith('<div class="table-box">') and Section("x").table(md).parts == [boxed]
    page = page_html("wide", boxed)
    bare = page.replace('<div class="table-box">', "<div>")
    (tmp_path / "boxed.html").write_text(page)
    (tmp_path / "bare.html").write_text(bare)
    ok = render(tmp_path / "boxed.html", tmp_path, 800)
    assert ok["scrollWidth"] <= ok["clientWidth"] < ok["tables"][0]["width"]
    (tmp_path / "b").mkdir()
    overflowing = render(tmp_path / "bare.html", tmp_path / "b", 800)
    assert overflowing["scrollWidth"] > overflowing["clientWidth"]


def test_sorting_is_numeric_and_keeps_missing_values_last(tmp_path):
    """Values whose text order differs from their numeric order (10, 2, 25, 5, 50), one missing."""
    if browser() is None:
        pytest.skip("no chromium on this machine (Debian: apt-get install chromium)")
    from vistabench.report.html import page_html, table_html
    from vistabench.report.tables import Column, Table

    rows = [{"method": f"m{v}", "auc": v} for v in (0.10, 0.02, None, 0.25, 0.05, 0.50)]
    page = page_html("sort", table_html(Table([Column("auc", "AUC")], rows)))
    (tmp_path / "t.html").write_text(page, encoding="utf-8")
    found = render(tmp_path / "t.html", tmp_path, 800)
    assert [float(v) for v in found["ascending"][:5]] == [0.02, 0.05, 0.10, 0.25, 0.50]
    assert [float(v) for v in found["descending"][:5]] == [0.50, 0.25, 0.10, 0.05, 0.02]
    assert found["ascending"][5] == found["descending"][5] == ""
