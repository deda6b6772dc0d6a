"""scripts/fetch_fidelity_refs.py: manifests checked, files copied from a local git mirror at the pinned
commit into the cache folder (never from the work tree's newer state)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("_fetch_fidelity_refs", ROOT / "scripts" / "fetch_fidelity_refs.py")
F = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(F)


def _git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("needs git")
    work = tmp_path / "work"
    (work / "pkg").mkdir(parents=True)
    _git("init", "-q", cwd=work)
    (work / "pkg" / "mod.py").write_text("VALUE = 1\n")
    _git("add", "-A", cwd=work)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one", cwd=work)
    first = _git("rev-parse", "HEAD", cwd=work)
    (work / "pkg" / "mod.py").write_text("VALUE = 2\n")
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two", cwd=work)
    return work / ".git", first


def _manifests(tmp_path, monkeypatch, **manifests):
    d = tmp_path / "refs"
    d.mkdir()
    for name, m in manifests.items():
        (d / f"{name}.json").write_text(json.dumps(m))
    monkeypatch.setattr(F, "MANIFESTS", d)
    monkeypatch.setenv("VISTABENCH_FIDELITY_CACHE", str(tmp_path / "cache"))


def test_copies_the_pinned_version_from_a_mirror(tmp_path, monkeypatch, repo, capsys):
    git_dir, first = repo
    _manifests(tmp_path, monkeypatch, toy={"repo": "o/toy", "commit": first, "files": ["pkg/mod.py"]})
    assert F.main(["--only", "toy", "--mirror", str(git_dir)]) == 0
    cached = tmp_path / "cache" / "toy"
    assert (cached / "pkg" / "mod.py").read_text() == "VALUE = 1\n"  # the pinned commit, not the newest
    assert (cached / ".commit").read_text().strip() == first
    F.main(["--list"])
    assert "o/toy@" in capsys.readouterr().out


@pytest.mark.parametrize("manifest,message", [
    ({"repo": "o/toy", "commit": "abc", "files": ["a.py"]}, "40 lower-case hex"),
    ({"repo": "not a repo", "commit": "0" * 40, "files": ["a.py"]}, "owner/name"),
    ({"repo": "o/toy", "commit": "0" * 40, "files": ["../a.py"]}, "relative paths"),
    ({"repo": "o/toy", "commit": "0" * 40}, "exactly the keys"),
])
def test_bad_manifests_are_refused_in_one_line(tmp_path, monkeypatch, manifest, message):
    _manifests(tmp_path, monkeypatch, toy=manifest)
    with pytest.raises(SystemExit, match=message):
        F.main(["--list"])


def test_unknown_names_and_missing_files(tmp_path, monkeypatch, repo):
    git_dir, first = repo
    _manifests(tmp_path, monkeypatch, toy={"repo": "o/toy", "commit": first, "files": ["pkg/other.py"]})
    with pytest.raises(SystemExit, match="no tests/fidelity/refs/nope.json"):
        F.main(["--only", "nope"])
    with pytest.raises(SystemExit, match="no pkg/other.py at"):
        F.main(["--mirror", f"toy={git_dir}"])


def test_the_shipped_manifests_are_valid():
    for path in sorted((ROOT / "tests" / "fidelity" / "refs").glob("*.json")):
        m = F.load_manifest(path)
        assert m["files"]
