"""Fixtures of the tracking tests: a real local MLflow server, a listener that never answers, a small
file system to fill, and the settings of a small tracked long-tail run."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

#: the fast long-tail settings of tests/protocols/test_longtail_run.py (bundled digits, tiny epochs)
FAST = ["--data", "digits", "--method", "ce", "--imbalance", "10", "--epochs", "2", "--points", "3",
        "--repeats", "2"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_mlflow_server(root):
    """``mlflow server`` with an SQLite backend and a local artifact folder under ``root`` on a free port,
    in a process group of its own, once it answers: ``(process, URI, log file)``."""
    port = _free_port()
    root.mkdir(parents=True, exist_ok=True)
    log = open(root / "server.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
         "--artifacts-destination", str(root / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, cwd=root, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited ({proc.returncode}): "
                                   f"{(root / 'server.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("mlflow server did not answer within 120 s")
            time.sleep(0.5)
    except BaseException:
        stop_mlflow_server(proc, log)
        raise
    return proc, uri, log


def stop_mlflow_server(proc, log, sig=signal.SIGTERM):
    """Stop the server and the workers it started (its own process group)."""
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    log.close()


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """``mlflow server`` with an SQLite backend and a local artifact folder on a free port: its URI."""
    pytest.importorskip("mlflow", reason="mlflow not installed (pip install 'vistabench[track]')")
    proc, uri, log = start_mlflow_server(tmp_path_factory.mktemp("mlflow"))
    try:
        yield uri
    finally:
        stop_mlflow_server(proc, log)


@pytest.fixture
def silent_server():
    """A listener on loopback that accepts connections and never answers: its ``http://`` URI."""
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    srv.settimeout(0.2)
    held, stop = [], threading.Event()

    def accept():
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for c in held:
            c.close()
        srv.close()


@pytest.fixture
def disk(tmp_path):
    """A 4 MiB file system of its own (tmpfs, as tests/cli/test_full_disk.py), unmounted at the end."""
    where = tmp_path / "disk"
    where.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a small tmpfs to fill ({exc})")
    if done.returncode != 0:
        pytest.skip(f"mounting a small tmpfs is not permitted here ({done.stderr.strip() or done.returncode})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def fill(disk) -> None:
    """Take every free byte of ``disk``."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
