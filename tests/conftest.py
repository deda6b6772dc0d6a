import sys

import pytest


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    """Commands like `stream run --threads 1` set torch's process-wide thread count; keep it per test."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    yield
    torch = sys.modules.get("torch")
    if torch is not None and before is not None and torch.get_num_threads() != before:
        torch.set_num_threads(before)
