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
the listeners of that process only. Work running beside the main thread (a lane of
:mod:`vistabench.learners.lanes`) collects its entries instead (:func:`collected`), and the main
thread reports them in order.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

__all__ = ["listen", "report", "collected"]

Listener = Callable[[dict[str, Any]], None]

_LISTENERS: list[Listener] = []
_THREAD = threading.local()  # .into: this thread's entries go to that list (collected)


def report(entry: dict[str, Any]) -> None:
    """Hand one epoch's history entry to every listener (each gets its own copy); inside
    :func:`collected`, to that list instead."""
    into = getattr(_THREAD, "into", None)
    if into is not None:
        into.append(dict(entry))
        return
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


@contextmanager
def collected() -> Iterator[list[dict[str, Any]]]:
    """The entries this thread reports inside the ``with`` block go to the list it yields, not to
    the listeners (for the caller to :func:`report` later, in the order it chooses)."""
    before = getattr(_THREAD, "into", None)
    _THREAD.into = entries = []
    try:
        yield entries
    finally:
        _THREAD.into = before
