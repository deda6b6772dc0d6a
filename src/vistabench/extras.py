"""The optional parts of vistabench's install ("extras") and the one check that a command has them.

``pip install vistabench`` is the scoring core: every ``score``, ``eval``, ``table``, ``report`` and
``stats`` command and the compat drop-ins run with it. Training a reference learner needs the
``train`` extra (PyTorch and the learners' own packages), searching hyper-parameters the ``tune``
extra, a Ray cluster the ``ray`` extra (pyproject.toml lists what each installs; a test keeps this
table and that file in step).

A command that needs an extra calls :func:`require` at its start (the protocols declare what their
``run`` needs, :attr:`vistabench.suite.Protocol.run_needs`); a module of an extra missing deeper down
(``--learner bhpo`` needs botorch) is named by :func:`missing_extra_message`, which the CLI's error
handler uses. Both give one line with the ``pip install`` to run.
"""

from __future__ import annotations

import importlib.util

from .errors import InputError

#: extra -> the top-level modules it provides (import names, not distribution names)
EXTRAS: dict[str, tuple[str, ...]] = {
    "train": ("torch", "kymatio", "mlxtend"),
    "tune": ("optuna", "botorch"),
    "ray": ("ray",),
}
#: modules an extra's packages install with them (botorch -> gpytorch)
_PULLED_IN = {"gpytorch": "tune"}

#: what each module is, for the message
_WHAT = {"torch": "PyTorch", "ray": "Ray"}


class MissingExtraError(InputError):
    """A command needs an optional part of the install that is not there."""


def extra_of(module: str) -> str | None:
    """The extra that provides ``module`` (``"torch.nn"`` -> ``"train"``), or None."""
    top = module.partition(".")[0]
    return next((extra for extra, mods in EXTRAS.items() if top in mods), _PULLED_IN.get(top))


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken install counts as missing
        return False


def missing(*extras: str) -> list[str]:
    """The modules of ``extras`` that are not installed (none imported: only looked up)."""
    unknown = [e for e in extras if e not in EXTRAS]
    if unknown:
        raise ValueError(f"unknown extras {unknown}; extras are {sorted(EXTRAS)}")
    return [m for e in extras for m in EXTRAS[e] if not _installed(m)]


def _message(what: str, modules: list[str], extras: list[str]) -> str:
    names = [_WHAT.get(m, m) for m in dict.fromkeys(modules)]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    wanted = ",".join(dict.fromkeys(extras))
    return f"{what} needs {listed} (not installed): pip install 'vistabench[{wanted}]'"


def require(*extras: str, what: str) -> None:
    """Raise :class:`MissingExtraError` (one line naming the ``pip install``) unless every module of
    ``extras`` is installed; ``what`` names the command (``"`vistabench longtail run`"``)."""
    absent = missing(*extras)
    if absent:
        raise MissingExtraError(_message(what, absent, [e for e in extras if set(EXTRAS[e]) & set(absent)]))


def missing_extra_message(exc: BaseException, *, what: str = "this command") -> str | None:
    """The one line for an ``ImportError`` of a module an extra provides, else None (a real bug)."""
    name = getattr(exc, "name", None)
    if not isinstance(exc, ImportError) or not name:
        return None
    extra = extra_of(name)
    if extra is None:
        return None
    return _message(what, [name.partition(".")[0]], [extra])
