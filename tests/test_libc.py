"""vistabench.libc.process_libc: the process's C library, looked up once."""

from __future__ import annotations

import os

import pytest

from vistabench.libc import process_libc


def test_the_same_library_each_time_and_it_is_this_process_s():
    lib = process_libc()
    if lib is None:
        pytest.skip("ctypes cannot open this process's C library here")
    assert process_libc() is lib
    assert lib.getpid() == os.getpid()
