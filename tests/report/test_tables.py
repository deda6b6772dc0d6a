import math

from vistabench.report.tables import Column, Table


def _table():
    cols = [Column("acc", "Acc"), Column("err", "Err", higher_is_better=False)]
    rows = [{"method": "a", "acc": 0.5, "err": 0.1}, {"method": "b", "acc": 0.7, "err": 0.3},
            {"method": "c", "acc": 0.6, "err": math.nan}, {"method": "d", "acc": 0.4, "err": 0.2}]
    return Table(cols, rows)


def test_ranks_best_second_third():
    r = _table().ranks()
    assert r[(1, "acc")] == 1 and r[(2, "acc")] == 2 and r[(0, "acc")] == 3 and (3, "acc") not in r
    assert r[(0, "err")] == 1 and r[(3, "err")] == 2 and r[(1, "err")] == 3 and (2, "err") not in r


def test_markdown_latex_csv():
    t = _table()
    md = t.render("markdown")
    assert "| b | **70.00** |" in md and "<u>60.00</u>" in md and "*50.00*" in md and "–" in md
    tex = t.render("latex")
    assert "\\textbf{70.00}" in tex and "\\underline{20.00}" in tex and "\\toprule" in tex
    csv = t.render("csv").splitlines()
    assert csv[0] == "method,acc,err" and csv[2] == "b,0.7,0.3" and csv[3] == "c,0.6,"  # NaN -> empty


def test_explicit_styles_override_ranks():
    t = _table()
    t.styles = {(0, "acc"): "italic"}
    md = t.render("markdown")
    assert "*50.00*" in md and "**70.00**" not in md
