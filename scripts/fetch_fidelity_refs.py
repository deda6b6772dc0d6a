#!/usr/bin/env python
"""Fetch the reference files the executed fidelity checks (tests/fidelity/) import.

Each manifest ``tests/fidelity/refs/<name>.json`` pins one public repository::

    {"repo": "owner/name", "commit": "<40 hex digits>", "files": ["path/in/repo.py", ...]}

and every listed file is copied to ``<cache>/<name>/<path>``, the cache being
``$VISTABENCH_FIDELITY_CACHE`` (default ``~/.cache/vistabench/fidelity``). The files come either from
a local git mirror of the repository (``--mirror DIR``: a bare git directory, read with
``git show COMMIT:PATH``; ``--mirror`` may be given once per manifest as ``NAME=DIR``) or, without a
mirror, from GitHub's raw files at the pinned commit (network needed). Nothing fetched is vendored
into vistabench or committed: the tests skip, with the reason, when the cache lacks a file.

Examples::

    python scripts/fetch_fidelity_refs.py                       # download every manifest's files
    python scripts/fetch_fidelity_refs.py --only gem --mirror gem=/path/to/gem.git
    python scripts/fetch_fidelity_refs.py --list                # where each file goes; fetches nothing
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "tests" / "fidelity" / "refs"
RAW_URL = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"


def cache_dir() -> Path:
    """The cache folder: ``$VISTABENCH_FIDELITY_CACHE`` or ``~/.cache/vistabench/fidelity``."""
    env = os.environ.get("VISTABENCH_FIDELITY_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "vistabench" / "fidelity"


def load_manifest(path: Path) -> dict:
    """One manifest, checked: ``repo`` owner/name, a 40-hex ``commit``, relative ``files``."""
    try:
        m = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"error: {path}: not a readable JSON manifest ({e})") from None
    if not isinstance(m, dict) or set(m) - {"repo", "commit", "files", "note"} or not {"repo", "commit", "files"} <= set(m):
        raise SystemExit(f"error: {path}: needs exactly the keys repo, commit, files (and an optional note)")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", str(m["repo"])):
        raise SystemExit(f"error: {path}: repo {m['repo']!r} is not owner/name")
    if not re.fullmatch(r"[0-9a-f]{40}", str(m["commit"])):
        raise SystemExit(f"error: {path}: commit {m['commit']!r} is not 40 lower-case hex digits")
    files = m["files"]
    if not isinstance(files, list) or not files or any(
            not isinstance(f, str) or f.startswith("/") or ".." in Path(f).parts for f in files):
        raise SystemExit(f"error: {path}: files must be a non-empty list of relative paths inside the repository")
    return m


def read_from_mirror(mirror: Path, commit: str, path: str) -> bytes:
    r = subprocess.run(["git", f"--git-dir={mirror}", "show", f"{commit}:{path}"], capture_output=True)
    if r.returncode != 0:
        raise SystemExit(f"error: --mirror {mirror}: no {path} at {commit} ({r.stderr.decode().strip()})")
    return r.stdout


def read_from_github(repo: str, commit: str, path: str) -> bytes:
    url = RAW_URL.format(repo=repo, commit=commit, path=path)
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:  # noqa: S310 - fixed https URL
            return resp.read()
    except OSError as e:
        raise SystemExit(f"error: cannot download {url} ({e}); give a local clone with --mirror") from None


def parse_mirrors(values: list[str], names: list[str]) -> dict[str, Path]:
    """``--mirror DIR`` (only with a single manifest) or ``--mirror NAME=DIR``."""
    out: dict[str, Path] = {}
    for v in values:
        name, sep, d = v.partition("=")
        if not sep:
            if len(names) != 1:
                raise SystemExit("error: --mirror DIR needs --only NAME (or write --mirror NAME=DIR)")
            name, d = names[0], v
        if name not in names:
            raise SystemExit(f"error: --mirror {v}: no manifest called {name!r} (have: {', '.join(names)})")
        if not Path(d).is_dir():
            raise SystemExit(f"error: --mirror {v}: {d} is not a directory")
        out[name] = Path(d)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="fetch only this manifest (repeatable; default: every tests/fidelity/refs/*.json)")
    ap.add_argument("--mirror", action="append", default=[], metavar="[NAME=]DIR",
                    help="read NAME's files from this local bare git directory instead of downloading")
    ap.add_argument("--list", action="store_true", help="print where each file goes and fetch nothing")
    args = ap.parse_args(argv)
    available = sorted(p.stem for p in MANIFESTS.glob("*.json"))
    for n in args.only:
        if n not in available:
            raise SystemExit(f"error: --only {n}: no tests/fidelity/refs/{n}.json (have: {', '.join(available)})")
    names = args.only or available
    mirrors = parse_mirrors(args.mirror, names)
    cache = cache_dir()
    for name in names:
        m = load_manifest(MANIFESTS / f"{name}.json")
        for path in m["files"]:
            dest = cache / name / path
            if args.list:
                print(f"{name}: {m['repo']}@{m['commit'][:12]}:{path} -> {dest}")
                continue
            data = (read_from_mirror(mirrors[name], m["commit"], path) if name in mirrors
                    else read_from_github(m["repo"], m["commit"], path))
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        if not args.list:
            (cache / name / ".commit").write_text(m["commit"] + "\n")
            print(f"{name}: {len(m['files'])} files of {m['repo']}@{m['commit'][:12]} in {cache / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
