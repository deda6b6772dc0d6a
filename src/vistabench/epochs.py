"""Per-epoch training curves, handed to whoever listens (an experiment tracker, a test).

The shared trainer (:class:`vistabench.learners.trainer.Trainer`) calls :func:`report` after every
epoch with that epoch's history entry (``epoch`` 1-based, ``loss``, ``train_acc``, ``val_acc``,
``lr``); so every protocol whose learners train with it reports its curves through this one
interface, without a callback threaded through each protocol. :func:`listen` registers a listener
for the duration of a ``with`` block::

    >>> seen = []
    >>> with listen(seen.append):
    ...     report({"epoch": 1, "loss": 0.5})
    >>> seen
    [{'epoch': 1, 'loss': 0.5}]
    >>> report({"epoch": 2, "loss": 0.4})  # nobody listens: nothing happens
    >>> len(seen)
    1

Listeners live in this process: epochs trained in another process (a job runner's worker) reach
the listeners of that process only.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

__all__ = ["listen", "report"]

Listener = Callable[[dict[str, Any]], None]

_LISTENERS: list[Listener] = []


def report(entry: dict[str, Any]) -> None:
    """Hand one epoch's history entry to every listener (each gets its own copy)."""
    for listener in list(_LISTENERS):
        listener(dict(entry))


@contextmanager
def listen(listener: Listener) -> Iterator[None]:
    """Call ``listener(entry)`` for every epoch reported inside the ``with`` block."""
    _LISTENERS.append(listener)
    try:
        yield
    finally:
        _LISTENERS.remove(listener)
