"""JSON helpers shared by the results store, split files, readers and the CLI (the bottom layer:
imports nothing of the package but its error type).

JSON here never contains the invalid tokens ``NaN``/``Infinity``: undefined numbers are ``null``.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from .errors import InputError

__all__ = ["json_safe", "dumps", "read_json", "decode_user_json", "strip_bom", "UTF8_BOM"]

#: the byte-order mark some editors (Windows Notepad, Excel) write at the start of a UTF-8 file
UTF8_BOM = b"\xef\xbb\xbf"


def json_safe(obj: Any) -> Any:
    """Replace NaN/inf by None (JSON null) and numpy scalars/arrays by Python values, recursively.

    >>> json_safe({"a": float("nan"), "b": (1, 2.5)})
    {'a': None, 'b': [1, 2.5]}
    """
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return json_safe(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def dumps(obj: Any, **kw: Any) -> str:
    """JSON with NaN written as null (never the invalid token ``NaN``).

    >>> dumps([float("inf"), 1])
    '[null, 1]'
    """
    return json.dumps(json_safe(obj), allow_nan=False, **kw)


def strip_bom(data: bytes) -> bytes:
    """``data`` without a leading UTF-8 byte-order mark (the one policy for a user's files: accepted).

    >>> strip_bom(b"\\xef\\xbb\\xbf[1]"), strip_bom(b"[1]")
    (b'[1]', b'[1]')
    """
    return data[len(UTF8_BOM):] if data.startswith(UTF8_BOM) else data


def decode_user_json(data: bytes) -> Any:
    """The JSON document in the bytes of a user's file: UTF-8, a leading byte-order mark accepted (every
    reader of a user's JSON file decodes here, or strips the mark with :func:`strip_bom` before its own
    decoder). Raises ``json.JSONDecodeError`` / ``UnicodeDecodeError`` for the caller's one-line message.

    >>> decode_user_json(b'\\xef\\xbb\\xbf{"a": 1}')
    {'a': 1}
    """
    return json.loads(strip_bom(data).decode("utf-8"))


def read_json(path: str | os.PathLike[str], *, what: str) -> Any:
    """Read a user's JSON file (:func:`decode_user_json`); a missing, non-UTF-8 or malformed file is one
    line naming it."""
    from ._validation import check_json_file

    p = check_json_file(path, what)
    try:
        return decode_user_json(p.read_bytes())
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} {str(path)!r}: malformed JSON ({exc.msg} at line {exc.lineno})") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {str(path)!r}: not a UTF-8 text file") from exc
