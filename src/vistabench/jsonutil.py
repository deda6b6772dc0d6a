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

__all__ = ["json_safe", "dumps", "read_json"]


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


def read_json(path: str | os.PathLike[str], *, what: str) -> Any:
    """Read a user's JSON file; a missing, non-UTF-8 or malformed file is one line naming it."""
    from ._validation import check_json_file

    p = check_json_file(path, what)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} {str(path)!r}: malformed JSON ({exc.msg} at line {exc.lineno})") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {str(path)!r}: not a UTF-8 text file") from exc
