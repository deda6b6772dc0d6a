"""What the store knows about a grid's cells: done (records present), running, failed, missing.

A cell is *done* when the store holds all of its records: each record a grid stores carries the
cell key in its ``grid_cell`` column (indexed) and ``"i/n"`` in ``grid_part``, so a driver killed
between two records of one cell leaves an incomplete cell, which is cleaned up and run again.
Running and failed cells are kept in a ``grid_cells`` table of the same SQLite file, written only
by the grid driver. (A store of schema 1, read-only, kept the key in ``settings``: read from there.)

Several drivers may run grids on one store at once (two shells, two machines sharing a store on a
local disk): a driver **claims** a cell before it runs it, with a lease in the ``grid_leases``
table (cell key, owner, expiry, heartbeat), in one SQLite write transaction that also checks the
cell is not done. Only the lease holder runs and stores the cell, so no cell runs or is stored
twice. A driver renews its leases every :data:`HEARTBEAT_S` seconds; a lease whose driver died is
taken over — at once when that driver ran on this machine (its process is gone), otherwise when
the lease expires (:data:`LEASE_S` seconds after its last heartbeat).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..store.schema import GRID_TABLES

STATUSES = ("done", "running", "failed", "missing")
#: seconds a cell's lease lasts after its driver's last heartbeat
LEASE_S = 120.0
#: seconds between a driver's heartbeats (renewals of its leases)
HEARTBEAT_S = 20.0
_RENEW = "UPDATE grid_leases SET expires = ?, heartbeat = ? WHERE owner = ?"


def _alive(host: str | None, pid: int | None) -> bool:
    if host != socket.gethostname() or not pid:
        return False  # another machine's driver: cannot tell; callers treat it as not running
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class GridState:
    """The grid bookkeeping of a results store file (the store's own tables are untouched)."""

    def __init__(self, store_path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        """``read_only``: for ``grid status``/``table`` (never writes; works in a read-only folder)."""
        from ..store import connect_sqlite, set_wal

        self.read_only = read_only
        self.path = Path(store_path)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.since = time.time()  # a cell that failed since then (under another driver) is not run again now
        self._conn = connect_sqlite(self.path, read_only=read_only)
        if not read_only:
            set_wal(self._conn)  # several drivers of one grid may open a new store at once
            self._conn.executescript(GRID_TABLES)
            self._conn.commit()

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "GridState":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def mark(self, key: str, protocol: str, options: dict[str, Any], status: str, error: str | None = None) -> None:
        from ..jsonutil import dumps

        with self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO grid_cells (key, protocol, options, status, error, host, pid, updated)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key, protocol, dumps(options, sort_keys=True), status, error, socket.gethostname(), os.getpid(),
                 time.time()))

    def _has(self, table: str) -> bool:
        return self._conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                  (table,)).fetchone() is not None

    def cell_rows(self) -> dict[str, dict[str, Any]]:
        if self.read_only and not self._has("grid_cells"):
            return {}  # a store no grid has run on yet
        rows = self._conn.execute("SELECT key, status, error, host, pid, updated FROM grid_cells")
        return {r[0]: {"status": r[1], "error": r[2], "host": r[3], "pid": r[4], "updated": r[5]} for r in rows}

    def _cell_rows(self, protocol: str | None = None, key: str | None = None) -> list[tuple[int, str, Any]]:
        """``(id, cell key, part)`` of the grid records of ``protocol`` (or of cell ``key``)."""
        cols = {r[1] for r in self._conn.execute("PRAGMA table_info(records)")}
        if "grid_cell" not in cols:  # a schema-1 store opened read-only: the cell is in the settings
            rows = []
            for rid, settings in self._conn.execute("SELECT id, settings FROM records WHERE protocol = ? AND settings"
                                                    " LIKE '%grid_cell%'", (protocol,)):
                s = json.loads(settings)
                rows.append((rid, s.get("grid_cell"), s.get("grid_part")))
            return rows
        if key is not None:
            return self._conn.execute("SELECT id, grid_cell, grid_part FROM records WHERE grid_cell = ?",
                                      (key,)).fetchall()
        return self._conn.execute("SELECT id, grid_cell, grid_part FROM records WHERE protocol = ? AND grid_cell"
                                  " IS NOT NULL", (protocol,)).fetchall()

    def record_parts(self, protocol: str) -> dict[str, dict[str, Any]]:
        """cell key -> {"ids": record ids, "parts": set of "i/n", "of": n} for the protocol's grid records."""
        out: dict[str, dict[str, Any]] = defaultdict(lambda: {"ids": [], "parts": set(), "of": None})
        if self.read_only and not self._has("records"):
            return {}
        for rid, key, part in self._cell_rows(protocol):
            if not key or not isinstance(part, str) or "/" not in part:
                continue
            e = out[key]
            e["ids"].append(rid)
            e["parts"].add(part)
            e["of"] = int(part.split("/")[1])
        return dict(out)

    # ------------------------------------------------------------------ leases
    def _is_done(self, key: str) -> bool:
        parts, of = set(), None
        for _rid, _key, part in self._cell_rows(key=key):
            if isinstance(part, str) and "/" in part:
                parts.add(part)
                of = int(part.split("/")[1])
        return of is not None and len(parts) == of

    def _held_by_other(self, row: tuple | None, now: float) -> bool:
        """Whether a lease row (owner, host, pid, expires) belongs to another driver that is alive."""
        if row is None or row[0] == self.owner:
            return False
        owner, host, pid, expires = row
        if host == socket.gethostname():
            return _alive(host, pid) and expires > now - LEASE_S  # a live process on this machine
        return expires > now

    def claim(self, key: str) -> bool:
        """Take the lease of cell ``key`` for this driver; False when the cell is done, failed under
        another driver since this one started (the next ``grid run`` tries it again), or another live
        driver holds it. One write transaction, so two drivers never both get it."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            now = time.time()
            row = conn.execute("SELECT owner, host, pid, expires FROM grid_leases WHERE key = ?", (key,)).fetchone()
            failed = conn.execute("SELECT 1 FROM grid_cells WHERE key = ? AND status = 'failed' AND updated >= ?"
                                  " AND NOT (host = ? AND pid = ?)",
                                  (key, self.since, socket.gethostname(), os.getpid())).fetchone()
            if self._held_by_other(row, now) or failed or self._is_done(key):
                conn.execute("ROLLBACK")
                return False
            conn.execute("INSERT OR REPLACE INTO grid_leases (key, owner, host, pid, expires, heartbeat)"
                         " VALUES (?, ?, ?, ?, ?, ?)",
                         (key, self.owner, socket.gethostname(), os.getpid(), now + LEASE_S, now))
            conn.execute("COMMIT")
            return True
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def holds(self, key: str) -> bool:
        """Whether this driver still holds the lease of ``key`` (checked before its records are stored)."""
        row = self._conn.execute("SELECT owner FROM grid_leases WHERE key = ?", (key,)).fetchone()
        return row is not None and row[0] == self.owner

    def release(self, key: str) -> None:
        with self._conn:
            self._conn.execute("DELETE FROM grid_leases WHERE key = ? AND owner = ?", (key, self.owner))

    def release_all(self) -> None:
        with self._conn:
            self._conn.execute("DELETE FROM grid_leases WHERE owner = ?", (self.owner,))

    def leased_by_others(self) -> set[str]:
        """Keys whose lease another live driver holds (their half-stored records are theirs to finish)."""
        now = time.time()
        rows = self._conn.execute("SELECT key, owner, host, pid, expires FROM grid_leases").fetchall()
        return {r[0] for r in rows if self._held_by_other(r[1:], now)}

    def keep_alive(self) -> "Heartbeat":
        """A background thread renewing this driver's leases every :data:`HEARTBEAT_S` s (a context manager)."""
        return Heartbeat(self.path, self.owner)

    def done_keys(self, protocol: str) -> set[str]:
        return {k for k, e in self.record_parts(protocol).items() if len(e["parts"]) == e["of"]}

    def incomplete_ids(self, protocol: str, keys: set[str]) -> list[int]:
        """Record ids of cells in ``keys`` whose records are only partly stored (a driver killed mid-cell)."""
        return [i for k, e in self.record_parts(protocol).items()
                if k in keys and len(e["parts"]) != e["of"] for i in e["ids"]]

    def delete_records(self, ids: list[int]) -> None:
        if ids:
            with self._conn:
                self._conn.execute(f"DELETE FROM records WHERE id IN ({','.join('?' * len(ids))})", ids)

    def status(self, protocol: str, keys: list[str]) -> dict[str, dict[str, Any]]:
        """key -> {"status": done|running|failed|missing, "error": one line or None}."""
        done = self.done_keys(protocol)
        rows = self.cell_rows()
        out = {}
        for k in keys:
            row = rows.get(k)
            if k in done:
                out[k] = {"status": "done", "error": None}
            elif row and row["status"] == "failed":
                out[k] = {"status": "failed", "error": row["error"]}
            elif row and row["status"] == "running" and (_alive(row["host"], row["pid"])
                                                         or row["host"] != socket.gethostname()):
                out[k] = {"status": "running", "error": None}
            else:
                out[k] = {"status": "missing", "error": None}
        return out


class Heartbeat:
    """Renews the leases of ``owner`` every :data:`HEARTBEAT_S` seconds from a thread of its own
    (with its own SQLite connection) while the ``with`` block runs."""

    def __init__(self, store_path: Path, owner: str) -> None:
        self.store_path, self.owner = store_path, owner
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vistabench-grid-heartbeat", daemon=True)

    def _run(self) -> None:
        from ..store import connect_sqlite

        conn = connect_sqlite(self.store_path)
        try:
            while not self._stop.wait(HEARTBEAT_S):
                now = time.time()
                try:
                    with conn:
                        conn.execute(_RENEW, (now + LEASE_S, now, self.owner))
                except Exception:  # noqa: BLE001 - a busy store: the next beat renews
                    pass
        finally:
            conn.close()

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
