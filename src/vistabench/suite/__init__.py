"""The protocol contract and the registry of protocols.

Every protocol enters and leaves vistabench the same way. It declares, in one file of this package,
a :class:`Protocol`: its name and title, and where its parts live in the layers below —

========== =================================================================== =================
part       what it does                                                        layer
========== =================================================================== =================
config     the run's typed configuration, recipe included (``RunConfig``) ``protocols/``
split      build the seeded, hashed split file content                         ``protocols/``
score      score a predictions file against a split -> a named JSON result     ``protocols/``
record     turn a result into a results-store :class:`~vistabench.store.Record` ``protocols/``
run        split -> reference learner -> predictions -> score -> record        ``protocols/``
table      the paper-style table of a list of records (or a store's)           ``report/``
section    the protocol's section of the HTML report                           ``report/``
demo       the protocol end to end on bundled data                             ``demos/``
cli        its ``vistabench <name> ...`` verbs                                  ``cli/``
========== =================================================================== =================

Parts are given as ``"module:attribute"`` references and imported on first use, so listing the
protocols (to build the command line, say) imports none of them. ``config`` and ``run`` are required;
every other part may be left out (``None``): the command line then offers ``vistabench <name> run``
generated from the config, and the table, report and demo skip the protocol. A reference is checked
when the protocol is declared (its form; the module is imported on first use). The CLI, ``vistabench demo``,
``vistabench table`` and ``vistabench report`` iterate :func:`protocols`; nothing else lists them.
A new protocol is one file here calling :func:`declare` (discovered by :func:`protocols`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any, Callable

from .._lazy import import_submodules
from ..errors import InputError
from ..registry import Registry, resolve_ref

__all__ = ["Protocol", "declare", "protocols", "get_protocol", "PARTS"]

PARTS = ("config", "split", "score", "record", "run", "table", "section", "demo", "cli")
_REQUIRED = ("config", "run")
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_REF = re.compile(r"[A-Za-z_][\w.]*(:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)?")


@dataclass(frozen=True)
class Protocol:
    """One protocol's declaration: name, title and its parts as ``"module:attribute"`` references.

    Signatures the parts follow (keyword-only options after the first arguments):

    - ``split(**options) -> dict``: sealed split-file content (has ``sha256``).
    - ``score(predictions, split, **options) -> dict``: a JSON-serialisable named result.
    - ``record(result, *, dataset, method, seed, tag, settings) -> Record | list[Record]``.
    - ``config``: a frozen :class:`~vistabench.config.RunConfig` subclass (every field typed, with
      default, help, allowed values and whether it is runtime-only; the method's recipe included).
    - ``run(config, *, store=None, work_dir=None) -> list[Record]``: the records of the run, stored
      (with their ids) when ``store`` is given; files of the run go to ``work_dir`` when given.
    - ``table(records, *, dataset=None) -> Table``; ``section(records) -> Section | None``: ``records``
      is a list of records or a results store (:func:`vistabench.report.tables.select` reads either).
    - ``demo(store, out_dir, *, quick) -> str`` (a short human summary, e.g. the table).
    - ``cli``: a module with ``register(sub)`` adding the verb group ``<name>`` with ``split``,
      ``score``, ``run`` (and any protocol-specific verbs) through :mod:`vistabench.cli.verbs`, and
      returning it; the common ``table`` verb is added for every protocol.
    """

    name: str
    title: str
    question: str
    order: int
    run: str
    config: str
    split: str | None = None
    score: str | None = None
    record: str | None = None
    table: str | None = None
    section: str | None = None
    demo: str | None = None
    cli: str | None = None
    #: the install extras its ``run`` needs (:mod:`vistabench.extras`; its other parts need none)
    run_needs: tuple[str, ...] = ("train",)
    #: the extras its ``demo`` needs (None: the same as ``run_needs``)
    demo_needs: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        """Check the declaration where it is made: a name, and every given part a reference."""
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"Protocol.name: expected a lower-case identifier (letters, digits, _), got {self.name!r}")
        for part in PARTS:
            ref = getattr(self, part)
            if ref is None and part not in _REQUIRED:
                continue
            if not isinstance(ref, str) or not _REF.fullmatch(ref):
                form = "'module'" if part == "cli" else "'module:attribute'"
                raise ValueError(f"Protocol {self.name!r}: part {part!r} must be a {form} reference"
                                 f"{'' if part in _REQUIRED else ' or left out'}, got {ref!r}")
            if part != "cli" and ":" not in ref:
                raise ValueError(f"Protocol {self.name!r}: part {part!r} must name an attribute "
                                 f"('module:attribute'), got {ref!r}")

    def needs(self, part: str) -> tuple[str, ...]:
        """The install extras the part ``"run"`` or ``"demo"`` needs (:func:`vistabench.extras.require`)."""
        if part == "demo" and self.demo_needs is not None:
            return self.demo_needs
        return self.run_needs if part in ("run", "demo") else ()

    def has(self, name: str) -> bool:
        """Whether the declaration gives the part ``name``."""
        if name not in PARTS:
            raise ValueError(f"unknown protocol part {name!r}; parts are {PARTS}")
        return getattr(self, name) is not None

    def part(self, name: str) -> Callable[..., Any]:
        """Import and return a part (``"split"``, ``"score"``, ...); a part the declaration leaves
        out raises :class:`~vistabench.errors.InputError` naming the protocol and the part."""
        if not self.has(name):
            raise InputError(f"protocol {self.name!r} has no {name!r} part (its declaration leaves it out)")
        return resolve_ref(getattr(self, name), what=f"protocol {self.name!r} part {name!r}")

    def references(self) -> dict[str, str]:
        """The parts the declaration gives, as references."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name in PARTS and getattr(self, f.name)}


_registry: Registry[Protocol] = Registry("protocol")
_loaded = False


def declare(protocol: Protocol) -> Protocol:
    """Register a protocol declaration (called once, by its file in this package)."""
    _registry.register(protocol.name)(protocol)
    return protocol


def _load() -> None:
    global _loaded
    if not _loaded:
        import_submodules(__name__)
        _loaded = True


def protocols() -> list[Protocol]:
    """Every declared protocol, in report order."""
    _load()
    return sorted((_registry.get(n) for n in _registry.names()), key=lambda p: (p.order, p.name))


def get_protocol(name: str) -> Protocol:
    """The declared protocol ``name``; unknown names raise with close-match suggestions."""
    _load()
    return _registry.get(name)
