"""Fixtures of the tracking tests: a real local MLflow server, and a small tracked long-tail run."""

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


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """``mlflow server`` with an SQLite backend and a local artifact folder on a free port: its URI."""
    pytest.importorskip("mlflow", reason="mlflow not installed (pip install 'vistabench[track]')")
    root = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
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
        yield uri
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the server and the workers it started (its own group)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
