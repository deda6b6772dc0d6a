"""The one doctest runner: every module of the package whose docstrings hold examples runs them;
and the one check that the scoring core stays free of torch."""

import doctest
import importlib
import pkgutil
import subprocess
import sys

import pytest

import vistabench

SKIP = {"vistabench.__main__"}  # running it would start the CLI


def _modules_with_examples() -> list[str]:
    finder = doctest.DocTestFinder()
    names = []
    for info in pkgutil.walk_packages(vistabench.__path__, prefix="vistabench."):
        if info.name in SKIP:
            continue
        mod = importlib.import_module(info.name)
        if any(t.examples for t in finder.find(mod)):
            names.append(info.name)
    return names


MODULES = _modules_with_examples()


def test_examples_are_found():
    # guards the discovery itself: the metrics, the store and the registry document examples
    assert {"vistabench.metrics.longtail", "vistabench.metrics.curves", "vistabench.store",
            "vistabench.registry"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    res = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 0 and res.failed == 0


def test_metrics_import_is_torch_free():
    code = ("import sys, pkgutil, importlib, vistabench.metrics as m\n"
            "for i in pkgutil.iter_modules(m.__path__): importlib.import_module('vistabench.metrics.' + i.name)\n"
            "sys.exit('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0, "importing vistabench.metrics imported torch"
