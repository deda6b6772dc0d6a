"""The demo in quick mode: every available protocol runs, the report has a section for each."""

from vistabench.demo import available, run_demo


def test_quick_demo_writes_report(tmp_path):
    names = available()
    assert "longtail" in names
    summary = run_demo(tmp_path, quick=True, log=lambda *a, **k: None)
    html = (tmp_path / "report" / "index.html").read_text()
    assert set(summary["parts"]) == set(names)
    assert "Long-tailed classification" in html and "data:image/png;base64," in html
