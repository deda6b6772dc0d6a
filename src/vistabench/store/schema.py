"""The results store's schema (version 2): its tables (the records; the grid's bookkeeping), its record
kinds, and the reading of schema-1 stores.

Schema 2 (``PRAGMA user_version = 2``) has one ``records`` table (each column in docs/store.md):
``kind`` says what a record is (:data:`KINDS`), ``run_id`` which run it belongs to, ``grid_cell``
/ ``grid_part`` which grid cell stored it (indexed), and ``tag`` is only the user's free-form tag.

Schema 1 (vistabench up to 0.x, ``user_version`` 1 or unmarked) had no kind, run id or grid
columns: ``tag`` meant three things (the user's tag; the smalldata record type ``tune`` /
``final`` / ``highres``; a stream run's id) and grid records kept their cell in
``settings['grid_cell']`` / ``settings['grid_part']``. :func:`schema1_fields` turns a schema-1 row
into the schema-2 fields; :func:`migrate` rewrites a schema-1 store in place (after a copy beside
it), and a read-only store of schema 1 is read through the same function without being changed.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable

from ..jsonutil import dumps

#: ``PRAGMA user_version``: the schema this version writes; a newer one is refused with advice.
SCHEMA_VERSION = 2

#: What a record is. ``run``: one scored run (longtail, incremental, detection; the default);
#: ``tune``: one smalldata hyper-parameter search (its trials inside); ``final``: one smalldata final
#: training (Table 3); ``highres``: its high-resolution fine-tune; ``event``: one task of a stream run.
KINDS = ("run", "tune", "final", "highres", "event")

#: the columns of a schema-1 ``records`` table (a store of an earlier version is recognised by them)
SCHEMA1_COLUMNS = frozenset({"id", "protocol", "dataset", "method", "seed", "split_hash", "settings", "metrics",
                             "version", "created", "tag"})
#: the columns schema 2 adds (after the schema-1 columns, so a migrated table equals a new one)
ADDED_COLUMNS = ("kind", "run_id", "grid_cell", "grid_part")
RECORD_COLUMNS = SCHEMA1_COLUMNS | set(ADDED_COLUMNS)

TABLE = """
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    protocol TEXT NOT NULL,
    dataset TEXT NOT NULL,
    method TEXT NOT NULL,
    seed INTEGER,
    split_hash TEXT,
    settings TEXT NOT NULL,
    metrics TEXT NOT NULL,
    version TEXT NOT NULL,
    created REAL NOT NULL,
    tag TEXT,
    kind TEXT NOT NULL DEFAULT 'run',
    run_id TEXT,
    grid_cell TEXT,
    grid_part TEXT
);
"""
INDEXES = """
CREATE INDEX IF NOT EXISTS records_protocol ON records(protocol, dataset, method);
CREATE INDEX IF NOT EXISTS records_kind ON records(protocol, kind);
CREATE INDEX IF NOT EXISTS records_run ON records(run_id);
CREATE INDEX IF NOT EXISTS records_grid_cell ON records(grid_cell);
"""

#: the grid's bookkeeping in the same file (written by :mod:`vistabench.grid.state` only, docs/store.md):
#: each cell's status (``grid_cells``) and the cell each driver has claimed (``grid_leases``)
GRID_TABLES = """
CREATE TABLE IF NOT EXISTS grid_cells (
    key TEXT PRIMARY KEY,
    protocol TEXT NOT NULL,
    options TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    host TEXT,
    pid INTEGER,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS grid_leases (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    expires REAL NOT NULL,
    heartbeat REAL NOT NULL
);
"""

_SMALLDATA_KINDS = ("tune", "final", "highres")


def new_run_id(protocol: str) -> str:
    """A fresh run id: ``PROTOCOL-YYYYmmdd-HHMMSS-<8 hex>`` (unique; sorts by start time)."""
    return f"{protocol}-{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(4).hex()}"


def check_kind(kind: Any) -> str:
    from ..errors import InputError

    if kind not in KINDS:
        raise InputError(f"kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    return kind


def backup_path(path: str | Path) -> Path:
    """Where the copy of a schema-1 store is kept before it is migrated: ``<store>.schema1.bak``."""
    return Path(str(path) + ".schema1.bak")


def schema1_fields(rows: Iterable[tuple[int, str, str | None, dict[str, Any]]]) -> dict[int, dict[str, Any]]:
    """Schema-2 fields of schema-1 rows ``(id, protocol, tag, settings)`` given in id order:
    ``{id: {"kind", "run_id", "tag", "grid_cell", "grid_part", "settings"}}``.

    * ``kind``: ``event`` for the stream protocol; for smalldata ``tune``/``final``/``highres`` when
      the tag starts with that word (any other smalldata tag, e.g. a ``smalldata score --tag``, was
      in no table: ``run``); else ``run``.
    * ``tag``: the user's tag only (None where schema 1's tag was a kind or a stream run id).
    * ``grid_cell``/``grid_part``: taken out of ``settings``.
    * ``run_id``: a stream event's tag (its run id); records of one grid cell share
      ``schema1-<first id>``, as do consecutive smalldata records of one run (same dataset, method,
      seed and ``run_config``); any other record is its own run, ``schema1-<id>``.
    """
    out: dict[int, dict[str, Any]] = {}
    cells: dict[str, str] = {}
    last_smalldata: tuple[Any, str] | None = None
    for rid, protocol, tag, settings in rows:
        settings = dict(settings) if isinstance(settings, dict) else settings
        cell = part = None
        if isinstance(settings, dict) and isinstance(settings.get("grid_cell"), str):
            cell = settings.pop("grid_cell")
            part = settings.pop("grid_part", None)
            part = part if isinstance(part, str) else None
        kind, user_tag, run_id = "run", tag, None
        if protocol == "stream":
            kind, user_tag, run_id = "event", None, tag or None
        elif protocol == "smalldata":
            word = next((k for k in _SMALLDATA_KINDS if (tag or "").startswith(k)), None)
            if word is not None:
                kind, user_tag = word, None
        if run_id is None and cell is not None:
            run_id = cells.setdefault(cell, f"schema1-{rid}")
        if run_id is None and kind in _SMALLDATA_KINDS:
            s = settings if isinstance(settings, dict) else {}
            key = (s.get("run_config"), s.get("model"))
            group = json.dumps(key, sort_keys=True, default=str)
            if last_smalldata is not None and last_smalldata[0] == group:
                run_id = last_smalldata[1]
            else:
                run_id = f"schema1-{rid}"
            last_smalldata = (group, run_id)
        elif protocol == "smalldata":
            last_smalldata = None
        out[rid] = {"kind": kind, "run_id": run_id or f"schema1-{rid}", "tag": user_tag, "grid_cell": cell,
                    "grid_part": part, "settings": settings}
    return out


def read_schema1_rows(conn: sqlite3.Connection, protocol: str | None = None) -> list[tuple]:
    """The rows of a schema-1 ``records`` table (all, or one protocol's), in id order, settings parsed
    where they are valid JSON (a malformed one stays text: the reader names that record)."""
    sql = ("SELECT id, protocol, dataset, method, seed, split_hash, settings, metrics, version, created, tag"
           " FROM records")
    args: tuple = ()
    if protocol is not None:
        sql, args = sql + " WHERE protocol = ?", (protocol,)
    return conn.execute(sql + " ORDER BY id", args).fetchall()


def _parsed(text: Any) -> Any:
    try:
        return json.loads(text)
    except (TypeError, json.JSONDecodeError):
        return text


def migrate(conn: sqlite3.Connection, path: Path) -> Path | None:
    """Rewrite the schema-1 store open on ``conn`` as schema 2, in one transaction.

    Before anything changes, a consistent copy of the store (SQLite's backup, the WAL included) is
    written to :func:`backup_path` unless that file exists already (an earlier copy is never
    overwritten). Returns the copy's path (None when it existed). Every record keeps its id,
    creation time, settings and metrics; :func:`schema1_fields` fills the new columns.
    """
    bak, made = backup_path(path), None
    if not bak.exists():
        tmp = bak.with_name(f".{bak.name}.{os.urandom(4).hex()}.part")  # one per writer: two may copy at once
        dest = sqlite3.connect(str(tmp))
        try:
            conn.backup(dest)  # a consistent copy (WAL included), taken before the migration's transaction
            copied = {r[1] for r in dest.execute("PRAGMA table_info(records)")}
        finally:
            dest.close()
        if copied == SCHEMA1_COLUMNS and not bak.exists():
            tmp.replace(bak)
            made = bak
        else:  # another writer made the copy, or migrated the store, meanwhile
            tmp.unlink(missing_ok=True)
    conn.execute("BEGIN IMMEDIATE")  # one migrating writer; another one waits, then finds schema 2
    if {r[1] for r in conn.execute("PRAGMA table_info(records)")} != SCHEMA1_COLUMNS:
        conn.execute("COMMIT")
        return None
    try:
        rows = read_schema1_rows(conn)
        fields = schema1_fields((r[0], r[1], r[10], _parsed(r[6])) for r in rows)
        for col in ADDED_COLUMNS:
            conn.execute(f"ALTER TABLE records ADD COLUMN {col} TEXT"
                         + (" NOT NULL DEFAULT 'run'" if col == "kind" else ""))
        for rid, f in fields.items():
            conn.execute("UPDATE records SET kind = ?, run_id = ?, tag = ?, grid_cell = ?, grid_part = ? WHERE id = ?",
                         (f["kind"], f["run_id"], f["tag"], f["grid_cell"], f["grid_part"], rid))
            if f["grid_cell"] is not None:  # the cell's key and part leave the settings for their columns
                conn.execute("UPDATE records SET settings = ? WHERE id = ?", (dumps(f["settings"], sort_keys=True), rid))
        for statement in filter(str.strip, INDEXES.split(";")):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return made
