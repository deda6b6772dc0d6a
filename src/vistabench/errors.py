"""Exception types raised on bad user input, and the one-line description of user-caused errors.

Both exception types subclass the builtin they refine, so ``except ValueError`` keeps working; the
CLI catches them (and the OS / file-format errors :func:`user_error_message` recognises) and prints one
line on stderr with exit status :data:`USER_ERROR`.
"""

from __future__ import annotations

import errno
import json
import re

#: Exit status of every user-caused error (argparse uses the same for bad options).
USER_ERROR = 2
#: Exit status of an internal error (a bug): the traceback is shown with a request to report it.
INTERNAL_ERROR = 70
#: Exit status when the reader of the output left early (``vistabench ... | head``): 128 + SIGPIPE, the
#: status a shell gives a program a closed pipe stopped (``cat``, ``grep``); nothing is printed.
OUTPUT_CLOSED = 141


#: the field a message names at its start: ``n_max: ...``, ``method_options.lr: ...``, ``data 'x': ...``,
#: ``n_max=5: ...``
_LEADING_FIELD = re.compile(r"([A-Za-z_]\w*(?:\.\w+)*)(?=: | '|=|:$)")


def leading_field(message: str) -> str | None:
    """The field name a message starts with (``n_max: expected ...`` -> ``n_max``), else None."""
    m = _LEADING_FIELD.match(message)
    return m.group(1) if m else None


class InputError(ValueError):
    """Bad user input: the message names the argument, what was expected and what came in.

    ``field`` is the argument (a parameter or config field) the message is about: given, or else
    read from the message's start (``n_max: expected an integer, got 'x'`` -> ``n_max``; the
    convention of every message here). The command line shows it as the flag the user typed.
    """

    def __init__(self, *args: object, field: str | None = None) -> None:
        super().__init__(*args)
        if field is None and args and isinstance(args[0], str):
            field = leading_field(args[0])
        self.field = field


class InputTypeError(InputError, TypeError):
    """Input of the wrong type."""


class InputKeyError(InputError, KeyError):
    """A missing field or an unknown id, where the tool a drop-in replaces raises ``KeyError``
    (so ``except KeyError`` keeps working); its text is the one line, unquoted."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InputIndexError(InputError, IndexError):
    """Bad input where the tool a drop-in replaces raises ``IndexError`` (an empty list it indexes,
    labels that do not match the ranges they name)."""


class InputAssertionError(InputError, AssertionError):
    """Bad input where the tool a drop-in replaces fails an ``assert`` (pycocotools' "Results do not
    correspond to current coco set")."""


def named_as_builtin(cls: type) -> type:
    """Give an input-error class the ``__name__`` of the builtin exception it refines (``KeyError``),
    keeping its own ``__qualname__`` (what tracebacks print and pickle looks up): code that compares
    exception type *names* with the replaced tool's — detectron2's ``test_coco_evaluation.py`` does —
    sees the tool's name, as ``except KeyError`` sees its type."""
    builtin = next(b for b in cls.__mro__ if b.__module__ == "builtins" and b is not ValueError
                   and issubclass(b, Exception))
    cls.__name__ = builtin.__name__
    return cls


for _cls in (InputTypeError, InputKeyError, InputIndexError, InputAssertionError):
    named_as_builtin(_cls)


def one_line(text: str) -> str:
    """Join a multi-line message into one line (``"; "`` between the non-empty lines)."""
    return "; ".join(s.strip() for s in str(text).splitlines() if s.strip())


def _os_message(exc: OSError) -> str | None:
    name = exc.filename
    if name is None:
        return None
    where = repr(str(name))
    if isinstance(exc, IsADirectoryError):
        return f"{where}: is a folder, expected a file"
    if isinstance(exc, NotADirectoryError):
        return f"{where}: a part of the path is a file, not a folder"
    if isinstance(exc, FileNotFoundError):
        return f"{where}: no such file or folder"
    if isinstance(exc, FileExistsError):
        return f"{where}: already exists and is not a folder"
    if isinstance(exc, PermissionError):
        return f"{where}: permission denied"
    if exc.errno in (errno.ENOSPC, errno.EROFS, errno.ENAMETOOLONG, errno.ELOOP, errno.EDQUOT):
        return f"{where}: {exc.strerror}"
    return None


def user_error_message(exc: BaseException) -> str | None:
    """One line describing a user-caused error, or None when ``exc`` is (probably) a bug.

    User-caused: :class:`InputError`; OS errors on a named path (missing, a folder where a file is
    expected, permission denied, disk full); malformed JSON; a SQLite file that is not a database;
    an image PIL cannot identify.
    """
    if isinstance(exc, InputError):
        return one_line(str(exc))
    if isinstance(exc, json.JSONDecodeError):
        return f"malformed JSON ({exc.msg} at line {exc.lineno})"
    import sys

    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is not None and isinstance(exc, sqlite3.DatabaseError) and not isinstance(
            exc, (sqlite3.ProgrammingError, sqlite3.InterfaceError)):
        if "locked" in str(exc) or "busy" in str(exc):
            return f"results store busy: another process has held it locked for over 30 s ({exc})"
        if "disk is full" in str(exc):
            return "results store: no space left on device (nothing was stored); free some space"
        return one_line(f"results store: {exc} (is it a vistabench results store?)")
    pil = sys.modules.get("PIL")
    if pil is not None:
        from PIL import UnidentifiedImageError

        if isinstance(exc, UnidentifiedImageError):
            return one_line(f"{exc} (corrupt or not an image)")
    if isinstance(exc, OSError):
        return _os_message(exc)
    return None
