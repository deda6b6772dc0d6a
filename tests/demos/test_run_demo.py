"""`vistabench demo` in quick mode: every declared protocol runs and has its report section."""

import pytest

from vistabench.demos import SMOKE_NOTE, run_demo
from vistabench.errors import InputError
from vistabench.store import ResultsStore
from vistabench.suite import protocols


def test_quick_demo_runs_every_protocol_and_writes_the_report(quick_demo):
    """The suite's one quick demo run (conftest ``quick_demo``; the report tests read it too)."""
    summary = quick_demo.summary
    declared = [p.name for p in protocols()]
    assert list(summary["parts"]) == declared  # in report order
    assert str(quick_demo.store) == str(summary["store"])
    html = quick_demo.page.read_text()
    for proto in protocols():
        assert f'id="{proto.name}"' in html, f"no report section for {proto.name}"
    with ResultsStore(summary["store"]) as store:
        for name in declared:
            assert store.records(protocol=name), f"the {name} demo stored no record"
    assert "data:image/png;base64," in html
    # a smoke run says so, in every table it prints and in the report's title
    assert summary["quick"] is True
    assert all(part["text"].startswith(SMOKE_NOTE) for part in summary["parts"].values())
    assert "<h1>vistabench demo report — SMOKE RUN (--quick)" in html


def test_only_takes_protocol_names_with_suggestions(tmp_path):
    with pytest.raises(InputError, match="did you mean 'longtail'"):
        run_demo(tmp_path, only=["longtial"], log=lambda *a, **k: None)


def test_a_partial_or_smoke_run_keeps_out_of_the_full_demos_folder(tmp_path, monkeypatch, capsys):
    from vistabench.cli import main
    from vistabench.cli.common import demo_folder

    assert demo_folder(None, quick=False) == "vistabench-demo"
    assert demo_folder(None, quick=True) == "vistabench-demo-quick"
    assert demo_folder(["longtail"], quick=True) == "vistabench-demo-longtail-quick"
    assert demo_folder(["detection", "stream"], quick=False) == "vistabench-demo-detection-stream"

    monkeypatch.chdir(tmp_path)
    full = tmp_path / "vistabench-demo"
    (full / "report").mkdir(parents=True)
    (full / "results.sqlite").write_bytes(b"the full demo's store")
    (full / "report" / "index.html").write_text("the full demo's report")
    assert main(["demo", "--only", "detection", "--quick"]) == 0
    assert (full / "results.sqlite").read_bytes() == b"the full demo's store"
    assert (full / "report" / "index.html").read_text() == "the full demo's report"
    smoke = tmp_path / "vistabench-demo-detection-quick"
    assert "SMOKE RUN" in (smoke / "report" / "index.html").read_text()
    out, err = capsys.readouterr()
    assert out.startswith("=== detection ===\n" + SMOKE_NOTE) and "vistabench-demo-detection-quick/report" in err
