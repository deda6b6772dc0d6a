"""What a stored record is as a result: its scoring mode, its identity, and the distinct results of a list.

A table counts results, not records: the same predictions scored twice (say ``longtail score`` run
again on one file) are one result, and results of different scoring modes (long-tail resampled vs
exact, incremental exact vs compat gAcc) are never averaged together. docs/store.md says which
fields of a record these come from.

* :func:`record_mode`: the scoring mode a record was scored in (``metrics["mode"]`` for longtail,
  ``settings["mode"]`` for incremental; None for a protocol without modes).
* :func:`result_key`: what identifies the result: protocol, dataset, method, kind, the settings it
  was made with, mode (where the protocol's table shows one mode at a time: :data:`MODES`), the hash of
  its split / sweep (``split_hash``, and ``settings["sweep_sha256"]`` where a run keeps its sweep
  apart) and the hash of its predictions (``settings["predictions_sha256"]``,
  :func:`vistabench.data.predictions.predictions_sha256`). A record stored
  before vistabench wrote that hash is identified by what it has instead: its seed, its
  ``settings["predictions"]`` path and its scored numbers (``metrics`` without timings; an
  incremental record's accuracy matrix), so a file
  scored twice with the same numbers is still one result, and runs that measured different numbers
  stay apart.
* :func:`distinct_results`: one record per result (the newest: a re-score replaces the earlier one).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from ..store import Record

__all__ = ["MODES", "DEFAULT_MODE", "record_mode", "result_key", "distinct_results", "check_mode"]

#: the scoring modes of each protocol whose table shows one mode at a time (the first is the default).
#: Incremental runs are scored in one gAcc formula (``settings["mode"]``: exact or compat), but its
#: table recomputes both formulas from the stored accuracy matrix and shows them as two columns, so
#: the formula a run was scored with changes no cell: it is not part of the result's identity.
MODES: dict[str, tuple[str, ...]] = {"longtail": ("resampled", "exact")}
DEFAULT_MODE = {name: modes[0] for name, modes in MODES.items()}


def check_mode(protocol: str, mode: str | None) -> str:
    """``mode`` checked against the protocol's :data:`MODES` (None: the default mode)."""
    from ..errors import InputError

    if mode is None:
        return DEFAULT_MODE[protocol]
    if mode not in MODES[protocol]:
        raise InputError(f"mode: expected one of {', '.join(MODES[protocol])} for {protocol}, got {mode!r}")
    return mode


def record_mode(r: Record) -> str | None:
    """The scoring mode of a record (None where its protocol has no modes)."""
    if r.protocol == "longtail":
        return str(r.metrics.get("mode") or "resampled")
    if r.protocol == "incremental":
        return str(r.settings.get("mode") or "exact")
    return None


#: settings that say how a record was scored, not what was made: they never split one result in two
#: (incremental's gAcc formula and the compat formula's beta_max; the mode is part of the key where
#: the protocol's table shows one mode at a time)
_SCORING_ONLY = ("mode", "beta_max")


def _volatile(key: str) -> bool:
    """What a run cost, or where it ran (``placement``: alone, in lanes, as a job), not what it found."""
    return "seconds" in key or key in ("images_per_second", "peak_memory_bytes", "record_id", "placement")


def result_key(r: Record) -> tuple[Any, ...]:
    """The identity of the result a record holds (see the module's docstring)."""
    sweep = r.settings.get("sweep_sha256") if isinstance(r.settings, dict) else None
    mode = record_mode(r) if r.protocol in MODES else None
    # the settings a run was made with (checkpoint selection, recipe, ...): two runs whose predictions
    # happen to be equal but whose tables show them as different rows stay two results (the scoring
    # mode is not one of them: it is decided above, per protocol)
    made_with = json.dumps({k: v for k, v in r.settings.items() if not _volatile(k) and k not in _SCORING_ONLY},
                           sort_keys=True, default=str) \
        if isinstance(r.settings, dict) else None
    base = (r.protocol, r.dataset, r.method, r.kind, mode, r.split_hash, sweep, made_with)
    pred = r.settings.get("predictions_sha256") if isinstance(r.settings, dict) else None
    if pred:
        return base + ("sha256", pred)
    if r.protocol == "incremental" and "matrix" in r.metrics:  # the same in either gAcc formula
        scored: Any = r.metrics["matrix"]
    else:
        scored = {k: v for k, v in r.metrics.items() if not _volatile(k)}
    path = r.settings.get("predictions") if isinstance(r.settings, dict) else None
    return base + ("stored", r.seed, path, json.dumps(scored, sort_keys=True, default=str))


def distinct_results(records: Sequence[Record]) -> list[Record]:
    """One record per :func:`result_key`, the newest of each (by id, else by position), in the order
    the results first appear."""
    newest: dict[tuple[Any, ...], Record] = {}
    for r in records:
        k = result_key(r)
        old = newest.get(k)
        if old is None or (r.id or 0) >= (old.id or 0):
            newest[k] = r
    order = list(dict.fromkeys(result_key(r) for r in records))
    return [newest[k] for k in order]
