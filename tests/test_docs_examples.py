"""The worked examples of docs/architecture.md run as written: each ```python block that follows an
``<!-- executed by the tests -->`` line, in order, in one namespace (a module of its own, as a
user's file would be), in a temporary folder. The documented extension API cannot drift from the code.

The examples register a long-tail method, a small-data method and a protocol; the registries are
restored afterwards so that other tests see the package as shipped.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
MARK = "<!-- executed by the tests -->"


def _blocks(page: Path) -> list[tuple[int, str]]:
    text = page.read_text(encoding="utf-8")
    return [(text[: m.start()].count("\n") + 2, m.group(1))
            for m in re.finditer(re.escape(MARK) + r"\s*\n```python\n(.*?)```", text, flags=re.S)]


@pytest.fixture
def registries():
    """Snapshot and restore every registry the examples add to."""
    import vistabench.suite as suite
    from vistabench.learners.longtail import options as lt_options
    from vistabench.learners.smalldata import registry as sd_registry

    suite.protocols()  # discover the shipped protocols before the snapshot
    regs = [suite._registry, lt_options.lt_methods, sd_registry.methods]
    saved = [dict(r._items) for r in regs]
    yield
    for r, items in zip(regs, saved):
        r._items.clear()
        r._items.update(items)


def test_the_architecture_page_has_executed_examples():
    blocks = _blocks(DOCS / "architecture.md")
    assert len(blocks) >= 5
    text = "".join(code for _, code in blocks)
    for needed in ("register_method(\"cb_ce\"", "register_method(\"ce_smooth\"", "declare(Protocol(", "run_grid("):
        assert needed in text


def test_worked_examples_run(tmp_path, monkeypatch, registries):
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("docs_architecture_examples")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # dataclasses and the grid look it up
    for line, code in _blocks(DOCS / "architecture.md"):
        try:
            exec(compile(code, f"docs/architecture.md:{line}", "exec"), module.__dict__)  # noqa: S102 (our docs)
        except Exception as exc:
            raise AssertionError(f"docs/architecture.md, the example at line {line} fails: "
                                 f"{type(exc).__name__}: {exc}") from exc

    # the documented long-tail method is what it says: a beta near 0 makes the weights uniform (= plain CE)
    from vistabench.data import Dataset
    from vistabench.learners.longtail import fit_predict

    rng = np.random.default_rng(0)
    train = Dataset(rng.integers(0, 256, (60, 8, 8, 1), dtype=np.uint8),
                    np.r_[np.zeros(40, int), np.ones(15, int), np.full(5, 2)], ["a", "b", "c"])
    a = fit_predict("cb_ce", train, train.images[:5], epochs=1, batch_size=16, options={"beta": 1e-9})
    b = fit_predict("ce", train, train.images[:5], epochs=1, batch_size=16)
    np.testing.assert_allclose(a.logits, b.logits, rtol=1e-4, atol=1e-5)
