"""Split files: JSON with the settings that made them, the indices, and a sha256 over the content.

The hash is over the canonical JSON (sorted keys, no whitespace, ``sha256`` key removed), so the
same seed gives a byte-identical file on any machine, and a file edited by hand fails to load.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..jsonutil import decode_user_json, json_safe


def canonical_json(content: dict[str, Any]) -> str:
    """Sorted keys, no whitespace, NaN as null; numpy values converted."""
    try:  # plain JSON types (e.g. a file just read): no per-element conversion pass
        return json.dumps(content, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return json.dumps(json_safe(content), sort_keys=True, separators=(",", ":"), allow_nan=False)


def content_hash(content: dict[str, Any]) -> str:
    """sha256 hex digest of the canonical JSON of ``content`` without its ``sha256`` key."""
    body = {k: v for k, v in content.items() if k != "sha256"}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def seal(content: dict[str, Any]) -> dict[str, Any]:
    """Return ``content`` with its ``sha256`` set."""
    out = {k: v for k, v in json_safe(content).items() if k != "sha256"}
    out["sha256"] = content_hash(out)
    return out


def write_split(path: str | os.PathLike[str], content: dict[str, Any]) -> dict[str, Any]:
    """Seal ``content`` and write it as canonical JSON (one line, sorted keys, trailing newline)."""
    from ..atomic import write_text

    sealed = seal(content)
    text = canonical_json(sealed) + "\n"
    try:
        same = Path(path).read_text(encoding="utf-8") == text  # the same seed gives the same file: keep it
    except (OSError, UnicodeDecodeError):
        same = False
    if not same:
        write_text(path, text, what=_what(sealed))
    return sealed


def _what(content: dict[str, Any]) -> str:
    kind = str(content.get("kind") or "")
    return "sweep file" if "sweep" in kind else "sessions file" if "session" in kind else "split file"


def read_split(path: str | os.PathLike[str], *, kind: str | None = None, what: str = "split file",
               require_hash: bool = True) -> dict[str, Any]:
    """Read a split file, verify its hash and (optionally) its ``kind``.

    With ``require_hash=False`` a hand-written file without a ``sha256`` key is accepted; a file that
    has one must still match it.
    """
    from .._validation import check_json_file

    p = check_json_file(path, what, expected=f"a {what} (JSON)")
    try:
        content = decode_user_json(p.read_bytes())
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} {str(p)!r}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {str(p)!r}: not a UTF-8 text file") from exc
    if not isinstance(content, dict):
        raise InputError(f"{what} {str(p)!r}: expected a JSON object, got {type(content).__name__}")
    if "sha256" not in content:
        if not require_hash:
            return content
        raise InputError(f"{what} {str(p)!r}: expected a JSON object with a 'sha256' key")
    if content_hash(content) != content["sha256"]:
        raise InputError(f"{what} {str(p)!r}: sha256 mismatch — the file was modified after it was written")
    if kind is not None and content.get("kind") != kind:
        raise InputError(f"{what} {str(p)!r}: expected kind {kind!r}, found {content.get('kind')!r}")
    return content
