import sys

import pytest


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    """Run the suite single-threaded: faster on a shared 2-core machine, and determinism tests
    compare runs made with the same thread count."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    """Commands like `stream run --threads N` set torch's process-wide thread count; keep it per test."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    yield
    torch = sys.modules.get("torch")
    if torch is not None and before is not None and torch.get_num_threads() != before:
        torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _work_in_tmp(tmp_path, monkeypatch):
    """Commands write their default outputs (./vistabench.sqlite, run folders) to the working
    directory: run every test in its own temporary one, never in the checkout. Worker processes
    (Ray) still import test helpers by module name, so the checkout stays on their path."""
    import os
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    monkeypatch.chdir(tmp_path)


def pytest_terminal_summary(terminalreporter):
    """The documented command lines the docs runner did not run, with the page's reason
    (tests/test_docs_commands.py, ``skip-line`` markers)."""
    lines = [v for rep in terminalreporter.stats.get("passed", [])
             for k, v in getattr(rep, "user_properties", []) if k == "docs-runner: not run"]
    if lines:
        terminalreporter.section("docs runner: documented lines not run")
        for line in lines:
            terminalreporter.line(line)
