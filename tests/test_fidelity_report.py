"""scripts/fidelity_report.py: each status comes from running the checks (synthetic check modules in a
temporary tests/fidelity folder: passing, passing under an option, failing, skipping), the read-only
table is appended, and a bad --only is refused in one line."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def report(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("_fidelity_report", ROOT / "scripts" / "fidelity_report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tests = tmp_path / "fidelity"
    (tests / "refs").mkdir(parents=True)
    (tests / "refs" / "demo.json").write_text(json.dumps({"repo": "o/demo", "commit": "a" * 40, "files": ["x.py"]}))
    (tests / "test_demo_equal.py").write_text("def test_a():\n    assert 1 + 1 == 2\n")
    (tests / "test_demo_option.py").write_text('FIDELITY_OPTION = "knob: on"\n\ndef test_a():\n    assert True\n')
    (tests / "test_demo_failing.py").write_text("def test_bad():\n    assert 1 == 2\n")
    (tests / "test_demo_skipped.py").write_text(
        "import pytest\n\ndef test_s():\n    pytest.skip('reference not in the cache')\n")
    monkeypatch.setattr(mod, "TESTS", tests)
    return mod


def test_statuses_come_from_the_run(report, capsys):
    rc = report.main(["--json"])
    out = json.loads(capsys.readouterr().out)
    status = {r["component"]: r["status"] for r in out["components"]}
    assert status["demo_equal"] == "executed and equal"
    assert status["demo_option"] == "executed and different: knob: on"
    assert status["demo_failing"] == "executed and failing: test_bad"
    assert status["demo_skipped"] == "read only (not executed: reference not in the cache)"
    assert {r["reference"] for r in out["components"] if r["component"].startswith("demo")} == {"o/demo@aaaaaaaaaaaa"}
    assert sum(r["status"] == "read only" for r in out["components"]) == len(report.READ_ONLY)
    assert rc == 1  # a failing check fails the report


def test_only_selects_components_and_refuses_unknown_names(report, capsys):
    assert report.main(["--only", "demo_equal"]) == 0
    out = capsys.readouterr().out
    assert "demo_equal" in out and "executed and equal" in out and "read only" not in out
    with pytest.raises(SystemExit) as e:
        report.main(["--only", "nothing"])
    assert e.value.code == 2
    assert "--only: no component starts with nothing" in capsys.readouterr().err
