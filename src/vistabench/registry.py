"""Name -> object registries with close-match suggestions (methods, models, datasets, streams).

The one registry type of the package (``tests/test_architecture.py`` keeps it so): :class:`Registry`
holds named entries, imports the modules that fill it on the first lookup, and answers an unknown
name with close matches. :func:`did_you_mean` is the one "did you mean" hint (every message that
suggests a name uses it) and :func:`resolve_ref` the one ``"module:attribute"`` import.

This module imports nothing of the package but :mod:`.errors` and :mod:`._lazy` (and no third-party module).
"""

from __future__ import annotations

import difflib
from typing import Any, Callable, Generic, Iterable, Iterator, Sequence, TypeVar

from ._lazy import import_named
from .errors import InputError

__all__ = ["Registry", "close_names", "did_you_mean", "resolve_ref"]

T = TypeVar("T")


def _spelling(name: object) -> str:
    """``name`` without the differences of spelling a suggestion ignores: case, ``-`` and spaces for ``_``."""
    return str(name).casefold().replace("-", "_").replace(" ", "_")


def close_names(word: object, known: Iterable[object], *, n: int = 3, cutoff: float = 0.5) -> list[str]:
    """The names in ``known`` closest to ``word`` (best first; at most ``n``).

    Case, hyphens and spaces are compared as underscores, so a paper's spelling finds the registered
    name (the name is only suggested, never accepted in its place):

    >>> close_names("LDAM-DRW", ["ce", "ldam_drw", "focal"])
    ['ldam_drw']
    """
    by_spelling: dict[str, list[str]] = {}
    for k in known:
        by_spelling.setdefault(_spelling(k), []).append(str(k))
    close = difflib.get_close_matches(_spelling(word), list(by_spelling), n=n, cutoff=cutoff)
    return [name for c in close for name in by_spelling[c]][:n]


def did_you_mean(word: object, known: Iterable[object], *, n: int = 3, cutoff: float = 0.5,
                 quote: bool = True) -> str:
    """``"; did you mean 'a' or 'b'?"`` for the close matches of ``word`` in ``known``, else ``""``.

    >>> did_you_mean("tinny", ["tiny", "huge"])
    "; did you mean 'tiny'?"
    """
    close = close_names(word, known, n=n, cutoff=cutoff)
    if not close:
        return ""
    return f"; did you mean {' or '.join(repr(c) if quote else c for c in close)}?"


def resolve_ref(ref: str, *, what: str = "reference") -> Any:
    """The object a ``"module:attribute"`` reference names (``"module"``: the module), imported now.

    >>> resolve_ref("os.path:join").__name__
    'join'
    """
    module, _, attr = str(ref).partition(":")
    if not module:
        raise ValueError(f"{what} {ref!r}: expected 'module:attribute'")
    obj: Any = import_named(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


class Registry(Generic[T]):
    """A named registry filled by decorator (or :meth:`add`).

    >>> r = Registry("model")
    >>> @r.register("tiny")
    ... def tiny(): return 1
    >>> r.get("tiny")()
    1
    >>> r.get("tinny")
    Traceback (most recent call last):
    ...
    vistabench.errors.InputError: unknown model 'tinny'; did you mean 'tiny'? (known: tiny)
    """

    def __init__(self, kind: str, *, modules: Sequence[str] = ()) -> None:
        """``modules``: modules that register more entries into this registry; imported on the
        first lookup, so an entry may live in a module that itself imports the registry's module
        (no import cycle)."""
        self.kind = kind
        self._items: dict[str, T] = {}
        self._modules = tuple(modules)
        self._loaded = not self._modules

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            for name in self._modules:
                import_named(name)

    def add(self, name: str, obj: T) -> T:
        """Register ``obj`` under ``name`` (a name registered twice is a bug: RuntimeError)."""
        if name in self._items:
            raise RuntimeError(f"{self.kind} {name!r} registered twice")
        self._items[name] = obj
        return obj

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of :meth:`add`."""
        def deco(obj: T) -> T:
            return self.add(name, obj)

        return deco

    def get(self, name: str, *, field: str | None = None) -> T:
        """The entry ``name``; InputError with close matches otherwise (``field``: the argument
        the name came from, leading the message)."""
        self._load()
        if name in self._items:
            return self._items[name]
        lead = f"{field}: " if field else ""
        raise InputError(f"{lead}unknown {self.kind} {name!r}{did_you_mean(name, self._items)} "
                         f"(known: {', '.join(sorted(self._items))})")

    def names(self) -> list[str]:
        self._load()
        return sorted(self._items)

    def items(self) -> list[tuple[str, T]]:
        self._load()
        return sorted(self._items.items())

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
