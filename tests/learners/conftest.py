"""Keep the learner tests single-threaded: faster on a shared 2-core machine, and the
determinism tests compare runs made with the same thread count."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
