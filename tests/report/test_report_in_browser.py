"""The demo's HTML report as a person sees it: rendered by headless Chromium at 800 and 1280 px, the
page has no horizontal overflow (wide tables scroll inside their own box, and such a box shows its
scroll cue), at 1280 px every table fits without scrolling, a method's name wraps over at most two
lines, no text is smaller than 9 px (the page's text by its computed size; a plot's text by its size
in the image times the image's rendered / natural width), every image loads, and the first click on
a column header puts the best end first (higher-is-better columns descending), the second reverses.
A legend over data cannot be seen in a PNG: every figure the report draws is checked for it before it
becomes one (tests/report/conftest.py, ``figure_problems``; asserted here too).

Needs the ``chromium`` browser (Debian package ``chromium``; ``scripts/test.sh`` installs or finds it,
locally and on CI, and names these tests when it cannot); skipped with the reason when it is absent.
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

#: the smallest text a reader is asked to read, page and plots alike (CSS px)
MIN_TEXT_PX = 9.0

# appended to a copy of the report: after loading, write what a reader would notice into the DOM;
# last, sort the first table with an "AUC" column by it (two clicks) and record the orders
PROBE = """
<script>
var MIN_PX = %MIN_PX%;
window.addEventListener("load", function () {
  var de = document.documentElement, imgs = Array.from(document.images);
  function lines(el) {
    var r = document.createRange(); r.selectNodeContents(el);
    return new Set(Array.from(r.getClientRects()).map(function (q) { return Math.round(q.top); })).size;
  }
  var small = [];
  Array.from(document.body.querySelectorAll("*")).forEach(function (el) {
    var own = Array.from(el.childNodes).some(function (n) { return n.nodeType === 3 && n.textContent.trim(); });
    var cs = getComputedStyle(el), px = parseFloat(cs.fontSize);
    if (own && el.getClientRects().length && cs.visibility !== "hidden" && px < MIN_PX)
      small.push(el.tagName + " " + px + "px: " + el.textContent.trim().slice(0, 40));
    if (el.tagName === "TH" && px < MIN_PX) small.push("TH " + px + "px");
    var after = getComputedStyle(el, "::after");  // the sort arrows of the headers
    if (after.content && after.content !== "none" && after.content !== "normal" && parseFloat(after.fontSize) < MIN_PX)
      small.push(el.tagName + "::after " + after.fontSize);
  });
  var out = {scrollWidth: de.scrollWidth, clientWidth: de.clientWidth, smallText: small.slice(0, 20),
             images: imgs.map(function (i) { return {alt: i.alt.slice(0, 60), complete: i.complete, width: i.naturalWidth,
               shown: i.getBoundingClientRect().width, textPx: i.hasAttribute("data-text-px") ?
                 parseFloat(i.getAttribute("data-text-px")) : null}; }),
             tables: Array.from(document.querySelectorAll("table")).map(function (t) {
               var r = t.getBoundingClientRect(), box = t.parentElement.getBoundingClientRect();
               var cue = t.parentElement.previousElementSibling;
               var cued = !!cue && cue.classList.contains("scroll-cue") && !cue.hidden && cue.getClientRects().length > 0
                          && t.parentElement.classList.contains("scrolls");
               return {width: Math.round(r.width), boxWidth: Math.round(t.parentElement.clientWidth),
                       boxRight: Math.round(box.right), header: t.rows[0].textContent.slice(0, 60), cued: cued,
                       font: parseFloat(getComputedStyle(t).fontSize),
                       keyLines: Math.max.apply(null, Array.from(t.querySelectorAll("td.key")).map(lines).concat([0]))}; })};
  var th = Array.from(document.querySelectorAll("th[data-col]")).filter(function (h) {
    return h.textContent.indexOf("AUC") === 0; })[0];
  if (th) {
    var table = th.closest("table"), col = +th.getAttribute("data-col");
    var read = function () { return Array.from(table.tBodies[0].rows).map(function (tr) {
      var td = tr.cells[col]; return td.hasAttribute("data-v") ? td.getAttribute("data-v") : td.textContent; }); };
    out.better = th.getAttribute("data-better");
    out.unsorted = read(); th.click(); out.first = read(); th.click(); out.second = read();
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
    script = PROBE.replace("%MIN_PX%", str(MIN_TEXT_PX))
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8")
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
        pytest.skip("no chromium on this machine (Debian: apt-get install chromium); scripts/test.sh installs it "
                    "when it can and says so when it cannot")
    return quick_demo.page


@pytest.mark.parametrize("width", [1280, 800])
def test_the_demo_report_fits_the_page_and_every_image_loads(demo_report, tmp_path, width):
    found = render(demo_report, tmp_path, width)
    assert found["scrollWidth"] <= found["clientWidth"], f"the page is {found['scrollWidth']} px wide in a " \
                                                         f"{found['clientWidth']} px window"
    assert found["tables"] and all(t["boxRight"] <= found["clientWidth"] for t in found["tables"])
    uncued = [(t["header"], t["width"], t["boxWidth"]) for t in found["tables"]
              if t["width"] > t["boxWidth"] + 1 and not t["cued"]]  # the page allows 1 px (rounding)
    assert not uncued, f"tables that scroll sideways without the scroll cue at {width} px: {uncued}"
    cued_fitting = [t["header"] for t in found["tables"] if t["cued"] and t["width"] <= t["boxWidth"]]
    assert not cued_fitting, f"a scroll cue on tables that fit at {width} px: {cued_fitting}"
    assert not found["smallText"], f"text below {MIN_TEXT_PX} px at {width} px: {found['smallText']}"
    assert min(t["font"] for t in found["tables"]) >= 12, "table text shrunk to fit"
    if width >= 1280:  # nothing to scroll sideways: the survey layout's right half included
        wide = [(t["header"], t["width"], t["boxWidth"]) for t in found["tables"] if t["width"] > t["boxWidth"]]
        assert not wide, f"tables wider than the page at {width} px: {wide}"
    wrapped = [(t["header"], t["keyLines"]) for t in found["tables"] if t["keyLines"] > 2]
    assert not wrapped, f"method names wrapping over more than two lines at {width} px: {wrapped}"
    assert found["images"], "the demo report has plots"
    broken = [i["alt"] for i in found["images"] if not i["complete"] or i["width"] == 0]
    assert not broken, f"images that did not load: {broken}"
    unmeasured = [i["alt"] for i in found["images"] if i["textPx"] is None]
    assert not unmeasured, f"plots without their text size (data-text-px): {unmeasured}"
    tiny = [(i["alt"], round(i["textPx"] * i["shown"] / i["width"], 2)) for i in found["images"]
            if i["textPx"] * i["shown"] / i["width"] < MIN_TEXT_PX]
    assert not tiny, f"plots whose smallest text renders below {MIN_TEXT_PX} px at {width} px: {tiny}"


def test_no_legend_of_the_report_covers_data(quick_demo):
    """The figures behind the report's PNGs, checked before they became images (tests/_figures.py figure_problems)."""
    bad = {caption[:60]: problems for caption, problems in quick_demo.figures if problems}
    assert quick_demo.figures and not bad, bad


def test_a_click_on_a_header_sorts_by_value_best_first(demo_report, tmp_path):
    found = render(demo_report, tmp_path, 1280)
    assert found["better"] == "high"  # AUC↑
    values = [v for v in found["unsorted"] if v]
    assert len(values) >= 2 and len(set(values)) >= 2
    nums = sorted(map(float, values))
    missing = len(found["unsorted"]) - len(values)
    assert [float(v) for v in found["first"][:len(values)]] == nums[::-1]  # the best (highest) first
    assert [float(v) for v in found["second"][:len(values)]] == nums
    assert found["first"][len(values):] == found["second"][len(values):] == [""] * missing


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
    assert ok["tables"][0]["cued"], "a table wider than the page shows the scroll cue"
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
    up = [0.50, 0.25, 0.10, 0.05, 0.02]
    for higher_is_better, first in ((True, up), (False, up[::-1])):  # either way: the best end first
        page = page_html("sort", table_html(Table([Column("auc", "AUC", higher_is_better)], rows)))
        (tmp_path / f"t{higher_is_better}.html").write_text(page, encoding="utf-8")
        (tmp_path / str(higher_is_better)).mkdir()
        found = render(tmp_path / f"t{higher_is_better}.html", tmp_path / str(higher_is_better), 800)
        assert [float(v) for v in found["first"][:5]] == first
        assert [float(v) for v in found["second"][:5]] == first[::-1]
        assert found["first"][5] == found["second"][5] == ""
        assert not found["tables"][0]["cued"]  # it fits: no cue
