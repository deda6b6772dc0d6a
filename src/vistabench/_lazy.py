"""Imports made on first use, declared where they are written so that the architecture check
(``tests/_archcheck.py``) reads each one as an import edge of the module that writes it.

Every import the project makes at run time by name goes through this module; nothing else calls
:func:`importlib.import_module`. The forms, and what the check reads from each:

- :func:`lazy_exports` — a package's public names, each imported from its sub-module on first use
  (PEP 562), so importing one sub-module of a package does not import its siblings. The check
  reads the ``{name: submodule}`` table (a literal) as edges from the package to each sub-module,
  and ``from package import name`` as an edge to the sub-module that defines ``name``.
- :func:`lazy_import` — one module (or ``"module:attribute"``) imported now. The target is a
  string literal, absolute or relative to ``package``; the check reads it as an edge.
- :class:`LazyModules` — a declared table ``{name: module}`` (literal), each module imported when
  its name is looked up (e.g. one module per experiment tracker). The check reads every module of
  the table as an edge.
- :func:`import_submodules` — every module of a package (a package whose files are its entries,
  e.g. one file per protocol). The check reads an edge to each module of the package.
- :func:`import_named` — a module whose name is known only at run time: a reference written in a
  registry's declaration (resolved by :func:`vistabench.registry.resolve_ref`) or given by the
  user (``--model my_module:factory``). The check allows it only where such names are resolved.

>>> getattr_, dir_ = lazy_exports("vistabench.metrics", {"normalised_auc": "curves"})
>>> getattr_("normalised_auc").__name__
'normalised_auc'
>>> lazy_import("os.path:join").__name__
'join'
>>> trackers = LazyModules({"json": "json", "decoder": ".decoder"}, package="json")
>>> sorted(trackers), trackers.targets["decoder"], trackers["decoder"].__name__
(['decoder', 'json'], 'json.decoder', 'json.decoder')
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from types import ModuleType
from typing import Any, Callable, Iterator, Mapping

__all__ = ["lazy_exports", "lazy_import", "LazyModules", "import_submodules", "import_named"]


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps each public name to the submodule
    (relative to the package) that defines it; the value is cached in the package on first use.
    Write ``exports`` as a literal (the architecture check reads it)."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__


def _absolute(module: str, package: str | None) -> str:
    """``module`` with a leading ``.`` resolved against ``package`` (as a relative import is)."""
    if not module.startswith("."):
        return module
    if not package:
        raise ValueError(f"relative module {module!r} needs package=")
    return importlib.util.resolve_name(module, package)


def lazy_import(target: str, *, package: str | None = None) -> Any:
    """The module ``target`` names (``"a.b"``, or ``".b"`` relative to ``package``), imported now;
    ``"a.b:attr"`` (dotted attributes allowed) returns that attribute of it. Write ``target`` as a
    string literal: the architecture check reads it as an import of the calling module."""
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(_absolute(module, package))
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


class LazyModules(Mapping[str, ModuleType]):
    """A declared table ``{name: module}`` whose modules are imported when their name is looked up.

    ``modules``: name -> module (absolute, or ``".x"`` relative to ``package``), written as a
    literal (the architecture check reads each module as an import of the declaring module).
    Iterating, ``len`` and ``in`` import nothing; ``targets`` holds the absolute module names.
    """

    def __init__(self, modules: Mapping[str, str], *, package: str | None = None) -> None:
        self.targets: dict[str, str] = {name: _absolute(m, package) for name, m in modules.items()}

    def load(self, name: str) -> ModuleType:
        """The module of ``name``, imported now (KeyError for a name the table does not declare)."""
        return importlib.import_module(self.targets[name])

    __getitem__ = load

    def __contains__(self, name: object) -> bool:
        return name in self.targets

    def __iter__(self) -> Iterator[str]:
        return iter(self.targets)

    def __len__(self) -> int:
        return len(self.targets)


def import_submodules(package: str) -> list[ModuleType]:
    """Every module directly in the package ``package`` (already imported), imported now, by name."""
    path = sys.modules[package].__path__
    return [importlib.import_module(f"{package}.{info.name}") for info in sorted(pkgutil.iter_modules(path),
                                                                                  key=lambda i: i.name)]


def import_named(name: str) -> ModuleType:
    """The module ``name``, known only at run time (a registry's reference, a user's module), imported
    now. The architecture check allows this only in the modules that resolve such names."""
    return importlib.import_module(name)
