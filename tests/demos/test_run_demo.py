"""`vistabench demo` in quick mode: every declared protocol runs and has its report section."""

import pytest

from vistabench.demos import run_demo
from vistabench.errors import InputError
from vistabench.store import ResultsStore
from vistabench.suite import protocols


def test_quick_demo_runs_every_protocol_and_writes_the_report(tmp_path):
    summary = run_demo(tmp_path, quick=True, log=lambda *a, **k: None)
    declared = [p.name for p in protocols()]
    assert list(summary["parts"]) == declared  # in report order
    html = (tmp_path / "report" / "index.html").read_text()
    for proto in protocols():
        assert f'id="{proto.name}"' in html, f"no report section for {proto.name}"
    with ResultsStore(summary["store"]) as store:
        for name in declared:
            assert store.records(protocol=name), f"the {name} demo stored no record"
    assert "data:image/png;base64," in html


def test_only_takes_protocol_names_with_suggestions(tmp_path):
    with pytest.raises(InputError, match="did you mean 'longtail'"):
        run_demo(tmp_path, only=["longtial"], log=lambda *a, **k: None)
