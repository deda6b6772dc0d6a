"""The report page's own rules (report/html.py), without a browser: empty columns left out with a reason,
the sort direction each header declares, and plot text enlarged until it is readable on a narrow page."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from vistabench.report.html import (FIGURE_DPI, MIN_TEXT_PX, NARROW_CONTENT_PX, figure_html,  # noqa: E402
                                    markdown_to_html, readable_text, table_html)
from vistabench.report.tables import Column, Table  # noqa: E402


def _survey_like(ne_value=None):
    cols = [Column("eq_auc", "AUC↑ (eq)", group="ρ_trn=ρ_tst", short="AUC↑"),
            Column("eq_std", "STD↓ (eq)", False, group="ρ_trn=ρ_tst", short="STD↓"),
            Column("ne_auc", "AUC↑ (ne)", group="ρ_trn≠ρ_tst", short="AUC↑"),
            Column("ne_std", "STD↓ (ne)", False, group="ρ_trn≠ρ_tst", short="STD↓"),
            Column("apr", "AP_r")]
    rows = [{"method": "ce", "eq_auc": 0.5, "eq_std": 0.1, "ne_auc": ne_value, "ne_std": None, "apr": None},
            {"method": "bs", "eq_auc": 0.6, "eq_std": 0.2, "ne_auc": None, "ne_std": float("nan"), "apr": None}]
    return Table(cols, rows)


def test_columns_without_a_value_are_left_out_and_named_once_with_the_reason():
    out = table_html(_survey_like(), why_empty={"ρ_trn≠ρ_tst": "no run tested at another imbalance",
                                                "apr": "COCO data has no frequency groups"})
    assert "ρ_trn≠ρ_tst" not in out.split("</table>")[0] and "AP_r" not in out.split("</table>")[0]
    note = re.search(r'<p class="note">(.*?)</p>', out).group(1)
    assert note == ("Not shown, without a value in any row: the ρ_trn≠ρ_tst half, AP_r (no run tested at another "
                    "imbalance; COCO data has no frequency groups).")
    # one value is enough to keep a column; the rest of its group is named column by column
    out = table_html(_survey_like(ne_value=0.4))
    head = out.split("</thead>")[0]
    assert "AUC↑ (ne)" in head and "STD↓ (ne)" not in head
    assert "STD↓ (ne)" in re.search(r'<p class="note">(.*?)</p>', out).group(1)
    assert "no record in the store measured them" in out
    full = Table([Column("a", "A")], [{"method": "x", "a": 0.1}])
    assert 'class="note"' not in table_html(full)


def test_each_header_says_which_end_is_best():
    out = table_html(_survey_like(ne_value=0.4))
    assert re.search(r'<th data-col="\d+"[^>]* data-better="high"[^>]*>AUC↑</th>', out)
    assert re.search(r'<th data-col="\d+"[^>]* data-better="low"[^>]*>STD↓</th>', out)
    md = markdown_to_html("| Run | Error↓ | Acc↑ | Task |\n|---|---:|---:|---|\n| a | 1 | 2 | x |")
    assert 'data-better="low">Error↓' in md and 'data-better="high">Acc↑' in md
    assert re.search(r'<th data-col="3"[^>]*>Task</th>', md) and "data-better" not in md.split("Task")[0][-40:]


@pytest.mark.parametrize("width_in,fontsize", [(11, 8), (16, 6), (5, 10)])
def test_plot_text_is_enlarged_until_readable_at_800_px(width_in, fontsize):
    fig, axes = plt.subplots(1, 2, figsize=(width_in, 3))
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="a run")
        ax.set_xlabel("x", fontsize=fontsize)
        ax.tick_params(labelsize=fontsize)
        ax.set_title("title", fontsize=fontsize)
    fig.legend(fontsize=fontsize)
    text_px = readable_text(fig)
    fig.canvas.draw()
    box = fig.get_tightbbox(fig.canvas.get_renderer())
    shown = text_px * min(1.0, NARROW_CONTENT_PX / ((box.width + 0.2) * FIGURE_DPI))
    assert shown >= MIN_TEXT_PX - 1e-6
    assert text_px == pytest.approx(min(t.get_fontsize() for t in fig.findobj(matplotlib.text.Text)
                                        if t.get_visible() and t.get_text().strip()) * FIGURE_DPI / 72)
    if width_in == 5 and fontsize == 10:  # already readable: nothing changed
        assert text_px == pytest.approx(10 * FIGURE_DPI / 72)
    html = figure_html(fig, "cap")
    assert f'data-text-px="{text_px:.2f}"' in html


def test_backticked_options_in_captions_and_text_are_code_not_literal_backticks():
    from vistabench.report.html import Section, prose

    assert prose("other modes: `--mode` <b> & x") == "other modes: <code>--mode</code> &lt;b&gt; &amp; x"
    assert prose("no code here") == "no code here"
    sec = Section("t").text("run `longtail run --test-imbalance` first")
    assert "<code>longtail run --test-imbalance</code>" in sec.parts[-1] and "`" not in sec.parts[-1]


def test_every_report_table_carries_its_latex_folded_underneath():
    """A section's table is followed by what `vistabench table --format latex` prints for it (escaped,
    in a closed <details>), so a reader of the report copies the paper's table from the page."""
    import html as html_lib

    from vistabench.report.html import Section

    t = Table([Column("acc", "Acc↑")], [{"method": "ce & co", "n": 2, "acc": 0.5, "acc_sd": 0.01},
                                         {"method": "bs", "n": 2, "acc": 0.6, "acc_sd": 0.02}], caption="ρ = 10")
    page = "".join(Section("S").table(t).parts)
    folded = re.search(r'<details class="latex"><summary>LaTeX</summary><pre>(.*?)</pre></details>', page, re.S)
    assert folded and html_lib.unescape(folded.group(1)) == t.render("latex")
    assert "\\usepackage{booktabs}" in folded.group(1) and "ce \\&amp; co" in folded.group(1)
    assert page.index("<table>") < page.index('<details class="latex">')
    assert "<details" not in "".join(Section("S").table("| a |\n|---|\n| 1 |").parts)  # markdown text: no LaTeX
