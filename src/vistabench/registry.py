"""Name -> object registries with close-match suggestions (methods, models, datasets, streams)."""

from __future__ import annotations

import difflib
import importlib
from typing import Callable, Generic, Iterator, Sequence, TypeVar

from .errors import InputError

T = TypeVar("T")


class Registry(Generic[T]):
    """A named registry filled by decorator.

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
                importlib.import_module(name)

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items:
                raise RuntimeError(f"{self.kind} {name!r} registered twice")
            self._items[name] = obj
            return obj

        return deco

    def get(self, name: str) -> T:
        self._load()
        if name in self._items:
            return self._items[name]
        close = difflib.get_close_matches(name, list(self._items), n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise InputError(f"unknown {self.kind} {name!r}{hint} (known: {', '.join(sorted(self._items))})")

    def names(self) -> list[str]:
        self._load()
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
