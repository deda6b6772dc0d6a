"""Files written whole or not at all (vistabench.atomic)."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

from vistabench.atomic import atomic_write, disk_error, is_disk_full, write_bytes, write_text, write_with
from vistabench.errors import InputError


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing(tmp_path):
    p = tmp_path / "out.json"
    p.write_text("old")
    with pytest.raises(RuntimeError, match="writer broke"):
        with atomic_write(p) as f:
            f.write("new, half wri")
            raise RuntimeError("writer broke")
    assert p.read_text() == "old"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.json"]


def test_writes_replace_whole_files_and_keep_permissions(tmp_path):
    p = tmp_path / "sub" / "a.txt"
    write_text(p, "one")  # the folder is created
    assert p.read_text() == "one"
    os.chmod(p, 0o640)
    write_bytes(p, b"two")
    assert p.read_bytes() == b"two" and stat.S_IMODE(p.stat().st_mode) == 0o640
    write_with(tmp_path / "a.npz", lambda f: np.savez(f, x=np.arange(3)))
    assert np.load(tmp_path / "a.npz")["x"].tolist() == [0, 1, 2]
    assert sorted(x.name for x in (tmp_path / "sub").iterdir()) == ["a.txt"]


def test_a_full_disk_is_one_line_naming_the_file(tmp_path):
    p = tmp_path / "sweep.json"
    p.write_text("old")

    with pytest.raises(InputError, match=r"sweep file '.*sweep.json': no space left on device") as exc:
        with atomic_write(p, what="sweep file") as f:
            f.write("x")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert "\n" not in str(exc.value)
    assert p.read_text() == "old" and len(list(tmp_path.iterdir())) == 1
    # a writer that words the full disk in its own way (torch's zip writer): recognised by the chain
    wrapped = RuntimeError("file write failed")
    wrapped.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    assert is_disk_full(wrapped)
    assert not is_disk_full(RuntimeError("file write failed"))
    assert disk_error(PermissionError(errno.EACCES, "denied"), p, "report") is not None
    assert disk_error(ValueError("a bug"), p) is None


def test_temporary_files_of_a_killed_writer_are_cleaned_up(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    p = tmp_path / "checkpoint.pt"
    left = tmp_path / f".checkpoint.pt.{dead.pid}.abcd.tmp"  # what SIGKILL mid-write leaves
    left.write_bytes(b"half")
    fresh = tmp_path / f".checkpoint.pt.{os.getppid()}.efgh.tmp"  # a live writer's: kept
    fresh.write_bytes(b"busy")
    old = time.time() - 3600
    os.utime(left, (old, old))
    os.utime(fresh, (old, old))
    write_bytes(p, b"whole")
    assert sorted(x.name for x in tmp_path.iterdir()) == sorted(["checkpoint.pt", fresh.name])
