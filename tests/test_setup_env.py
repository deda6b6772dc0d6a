"""scripts/setup-env.sh (what both quickstart commands run): pip runs on the first set-up and again
only when pyproject.toml, the venv's Python or the torch version changed.

The script runs for real on a copy of the checkout whose ``.venv`` is a real virtualenv with a
stand-in ``pip`` module that records its calls (no network, no install) and a torch distribution
record of the pinned version."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_FAKE_PIP = """
import json, os, sys
with open(os.environ["PIP_CALLS"], "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
"""


@pytest.fixture
def checkout(tmp_path):
    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    co = tmp_path / "co"
    (co / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup-env.sh", co / "scripts")
    shutil.copy(ROOT / "pyproject.toml", co)
    (co / "src" / "vistabench").mkdir(parents=True)
    (co / "src" / "vistabench" / "__init__.py").write_text("")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(co / ".venv")], check=True)
    purelib = subprocess.run([str(co / ".venv" / "bin" / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    site = Path(purelib)
    (site / "pip").mkdir()
    (site / "pip" / "__init__.py").write_text("")
    (site / "pip" / "__main__.py").write_text(_FAKE_PIP)
    (site / "checkout.pth").write_text(str(co / "src") + "\n")  # as the editable install does
    dist = site / "torch-2.13.0+cpu.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0+cpu\n")
    return co


def _setup(co: Path, **env) -> list[list[str]]:
    import os

    calls = co / "pip-calls.jsonl"
    calls.unlink(missing_ok=True)
    run_env = {k: v for k, v in os.environ.items() if k != "TORCH_VERSION"}
    run_env.update(PIP_CALLS=str(calls), **env)
    proc = subprocess.run(["bash", "scripts/setup-env.sh"], cwd=co, env=run_env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def test_pip_runs_once_and_again_only_when_something_changed(checkout):
    first = _setup(checkout)
    assert ["install", "-q", "--disable-pip-version-check", "-e", ".[all,test]"] in first
    assert not any("torch==2.13.0" in c for c in first)  # the pinned torch is there already
    stamp = (checkout / ".venv" / "vistabench-setup.stamp").read_text()
    assert "torch 2.13.0" in stamp and f"python {sysconfig.get_python_version()}" in stamp

    assert _setup(checkout) == []  # nothing changed: no pip at all

    with open(checkout / "pyproject.toml", "a") as fh:
        fh.write("\n# a change\n")
    assert ["install", "-q", "--disable-pip-version-check", "-e", ".[all,test]"] in _setup(checkout)
    assert _setup(checkout) == []

    other = _setup(checkout, TORCH_VERSION="2.14.0")  # another torch pin: installed, then the rest
    assert ["install", "-q", "--disable-pip-version-check", "torch==2.14.0"] in other


def test_a_stamp_without_the_install_behind_it_runs_pip(checkout):
    _setup(checkout)
    (checkout / ".venv" / "vistabench-setup.stamp").write_text("pyproject.toml 0\n")  # stale
    assert _setup(checkout) != []
    for pth in checkout.glob(".venv/lib/*/site-packages/checkout.pth"):
        pth.unlink()  # vistabench no longer importable from this checkout
    assert _setup(checkout) != []
