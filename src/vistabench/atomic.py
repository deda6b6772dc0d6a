"""Every file vistabench writes is written whole or not at all (the bottom layer).

A file is written to a temporary file in the same folder (``.NAME.XXXX.tmp``), flushed to disk and
renamed over ``path`` (``os.replace``, atomic on POSIX and Windows). So a write cut short — a full
disk, a killed process, a failing writer — leaves the earlier file at ``path`` unchanged and no
partial file: the temporary file is removed on an error. Only a process killed with SIGKILL can
leave one behind (``.NAME.PID.XXXX.tmp``, never the target's name); the next write of that file
removes it once its process is gone and it is a minute old.

A full disk, a read-only file system or a folder the user may not write is one
:class:`~vistabench.errors.InputError` naming the file (``sweep file 'out/sweep.json': no space left
on device ...``): the CLI shows it in one line with exit status 2.

>>> import os, tempfile
>>> p = os.path.join(tempfile.mkdtemp(), "a.txt")
>>> write_text(p, "hello")
>>> open(p).read()
'hello'
>>> sorted(os.listdir(os.path.dirname(p)))
['a.txt']
"""

from __future__ import annotations

import errno
import os
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from .errors import InputError

__all__ = ["atomic_write", "write_text", "write_bytes", "write_with", "write_figure", "is_disk_full", "disk_error"]

#: seconds after which a temporary file of a dead process is removed by the next write of its target
_STALE_S = 60.0

#: a file system with less free space than this after a failed write is taken to be full (some writers,
#: torch's zip writer among them, turn the OSError of a full disk into an error of their own)
_NEARLY_FULL = 64 * 1024


def is_disk_full(exc: BaseException | None, folder: str | os.PathLike[str] | None = None) -> bool:
    """Whether ``exc`` (or an error it was raised from) is a full disk or quota, or — for an error a
    writer raised in its own words — ``folder``'s file system has (almost) no free space left."""
    seen = set()
    e = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(e, OSError) and e.errno is not None:
            return False  # a definite other cause (permission denied, read-only, ...)
        if "no space left on device" in str(e).lower() or "database or disk is full" in str(e).lower():
            return True
        e = e.__cause__ or e.__context__
    if folder is None:
        return False
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):  # AttributeError: no statvfs (Windows)
        return False
    return st.f_bavail * st.f_frsize < _NEARLY_FULL


def disk_error(exc: BaseException, path: str | os.PathLike[str], what: str = "file") -> InputError | None:
    """The one-line InputError for a write of ``path`` that failed because of the disk or its
    permissions (full, quota, read-only, permission denied), else None (a bug or another problem)."""
    where = f"{what} {str(path)!r}"
    folder = Path(path).parent
    if is_disk_full(exc, folder if folder.is_dir() else None):
        return InputError(f"{where}: no space left on device (nothing was written; an earlier file there is "
                          "unchanged); free some space or write elsewhere")
    if isinstance(exc, OSError):
        if exc.errno == errno.EROFS:
            return InputError(f"{where}: read-only file system; write elsewhere")
        if exc.errno in (errno.EACCES, errno.EPERM):
            return InputError(f"{where}: permission denied (cannot write in {str(folder)!r})")
    return None


def _remove_stale(path: Path) -> None:
    """Temporary files of ``path`` left by a process killed mid-write (gone, and a minute old)."""
    import time

    head = f".{path.name}."
    try:
        names = [n for n in os.listdir(path.parent) if n.startswith(head) and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        tmp = path.parent / name
        pid = name[len(head):].split(".", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        try:
            if time.time() - tmp.stat().st_mtime > _STALE_S:
                tmp.unlink()
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777  # replacing a file keeps its permissions
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


@contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "w", *, encoding: str | None = "utf-8",
                 what: str = "file") -> Iterator[IO[Any]]:
    """A file object writing to a temporary file beside ``path``, renamed over ``path`` when the
    block ends without an error; on an error the temporary file is removed and ``path`` untouched.

    ``mode``: ``"w"`` (text, ``encoding``) or ``"wb"``. ``what`` names the file in messages.
    The parent folder is created when missing.
    """
    import tempfile

    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write: mode 'w' or 'wb', got {mode!r}")  # a bug of the caller
    p = Path(path)
    tmp: str | None = None
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(p)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.{os.getpid()}.", suffix=".tmp")
        with os.fdopen(fd, mode, **({"encoding": encoding} if mode == "w" else {})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode_for(p))
        os.replace(tmp, p)
        tmp = None
    except BaseException as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if isinstance(exc, Exception) and not isinstance(exc, InputError):
            err = disk_error(exc, p, what)
            if err is not None:
                raise err from exc
        raise


def write_text(path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8", what: str = "file") -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_write(path, "w", encoding=encoding, what=what) as f:
        f.write(text)


def write_bytes(path: str | os.PathLike[str], data: bytes, *, what: str = "file") -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_write(path, "wb", what=what) as f:
        f.write(data)


def write_with(path: str | os.PathLike[str], writer: Callable[[IO[bytes]], Any], *, what: str = "file") -> None:
    """Let ``writer(f)`` write a binary file object, atomically: ``np.savez(f, ...)``,
    ``torch.save(obj, f)``, ``fig.savefig(f, format="png")``."""
    with atomic_write(path, "wb", what=what) as f:
        writer(f)


def write_figure(fig: Any, path: str | os.PathLike[str], *, what: str = "plot", **savefig: Any) -> None:
    """``fig.savefig(path, **savefig)`` atomically (the format from the suffix, PNG without one)."""
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    write_with(path, lambda f: fig.savefig(f, format=fmt, **savefig), what=what)
