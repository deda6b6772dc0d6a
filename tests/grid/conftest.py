"""The toy protocol (vb_toy_protocol.py) declared for a test: ``toy`` fixture."""

import importlib
import os
from pathlib import Path

import pytest

HERE = str(Path(__file__).resolve().parent)


@pytest.fixture
def toy(monkeypatch):
    """Declare the toy protocol for this test (and for worker processes: this folder on PYTHONPATH)."""
    import vistabench.suite as suite
    from vistabench.suite import Protocol

    monkeypatch.syspath_prepend(HERE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")])))
    mod = importlib.import_module("vb_toy_protocol")
    decl = Protocol(name="toy", title="toy", question="?", order=99, run="vb_toy_protocol:run",
                    table="vb_toy_protocol:table", config="vb_toy_protocol:ToyConfig")
    get, listed = suite.get_protocol, suite.protocols
    monkeypatch.setattr(suite, "get_protocol", lambda name: decl if name == "toy" else get(name))
    monkeypatch.setattr(suite, "protocols", lambda: [*listed(), decl])
    return mod
