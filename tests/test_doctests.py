"""Run the docstring examples of the numpy-only modules."""

import doctest
import importlib

import pytest

MODULES = ["vistabench.metrics.longtail", "vistabench.registry", "vistabench.store",
           "vistabench.protocols.longtail_sweep"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    mod = importlib.import_module(name)
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0


def test_metrics_import_is_torch_free():
    import subprocess
    import sys

    code = "import sys, vistabench.metrics; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
