"""Package attributes imported on first use (PEP 562), so that importing one submodule of a package
does not import its siblings.

>>> getattr_, dir_ = lazy_exports("vistabench.metrics", {"normalised_auc": "curves"})
>>> getattr_("normalised_auc").__name__
'normalised_auc'
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps each public name to the submodule
    (relative to the package) that defines it; the value is cached in the package on first use."""

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
