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
