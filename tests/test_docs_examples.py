"""The worked examples of docs/architecture.md run as written (each ```python block that follows an
``<!-- executed by the tests -->`` line), one page's blocks in order in one namespace, in a temporary
folder, so the documented extension API cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
MARK = "<!-- executed by the tests -->"


def _blocks(page: Path) -> list[tuple[int, str]]:
    text = page.read_text(encoding="utf-8")
    out = []
    for m in re.finditer(re.escape(MARK) + r"\s*\n```python\n(.*?)```", text, flags=re.S):
        out.append((text[: m.start()].count("\n") + 1, m.group(1)))
    return out


def test_the_architecture_page_has_executed_examples():
    assert len(_blocks(DOCS / "architecture.md")) >= 3


@pytest.mark.parametrize("page", ["architecture.md"])
def test_worked_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs_{page.replace('.', '_')}"}
    for line, code in _blocks(DOCS / page):
        try:
            exec(compile(code, f"docs/{page}:{line}", "exec"), namespace)  # noqa: S102 (our own docs)
        except Exception as exc:  # pragma: no cover - the message says which block broke
            raise AssertionError(f"docs/{page}, the example at line {line} fails: {type(exc).__name__}: {exc}") from exc
