"""The long-tail extension example of docs/architecture.md, executed: it registers ``cb_ce`` and
the same method then runs through the typed config and the protocol's run."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def _example() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Adding a method"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_documented_method_registers_and_runs():
    from vistabench.learners.longtail import fit_predict, lt_methods
    from vistabench.learners.longtail.options import method_options
    from vistabench.protocols.longtail import run
    from vistabench.protocols.longtail_config import LongtailConfig

    if "cb_ce" not in method_options:  # one registration per process
        import sys
        import types

        module = types.ModuleType("docs_architecture_example")  # dataclasses need their module registered
        sys.modules[module.__name__] = module
        exec(compile(_example(), str(DOC), "exec"), module.__dict__)
    assert "cb_ce" in lt_methods.names()
    config = LongtailConfig.from_dict({"data": "digits", "method": "cb_ce", "imbalance": 10, "epochs": 1,
                                       "points": 3, "repeats": 2, "method_options": {"beta": 0.99}})
    assert config.method_options.beta == 0.99
    (record,) = run(config)
    assert record.method == "cb_ce" and record.settings["options"] == {"beta": 0.99}
    assert 0 <= record.metrics["auc"] <= 1
    # the class weights are the example's formula: a beta near 0 makes them uniform (= plain CE)
    from vistabench.data import Dataset
    rng = np.random.default_rng(0)
    train = Dataset(rng.integers(0, 256, (60, 8, 8, 1), dtype=np.uint8),
                    np.r_[np.zeros(40, int), np.ones(15, int), np.full(5, 2)], ["a", "b", "c"])
    a = fit_predict("cb_ce", train, train.images[:5], epochs=1, batch_size=16, options={"beta": 1e-9})
    b = fit_predict("ce", train, train.images[:5], epochs=1, batch_size=16)
    np.testing.assert_allclose(a.logits, b.logits, rtol=1e-4, atol=1e-5)
