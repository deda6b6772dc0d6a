"""What the store knows about a grid's cells: done (records present), running, failed, missing.

A cell is *done* when the store holds all of its records: each record a grid stores carries
``settings['grid_cell']`` (the cell key) and ``settings['grid_part']`` (``"i/n"``), so a driver
killed between two records of one cell leaves an incomplete cell, which is cleaned up and run
again. Running and failed cells are kept in a ``grid_cells`` table of the same SQLite file, written
only by the grid driver.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

_SCHEMA = """
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
"""

STATUSES = ("done", "running", "failed", "missing")


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
        from ..store import connect_sqlite

        self.read_only = read_only
        self._conn = connect_sqlite(Path(store_path), read_only=read_only)
        if not read_only:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.executescript(_SCHEMA)
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

    def record_parts(self, protocol: str) -> dict[str, dict[str, Any]]:
        """cell key -> {"ids": record ids, "parts": set of "i/n", "of": n} for the protocol's grid records."""
        out: dict[str, dict[str, Any]] = defaultdict(lambda: {"ids": [], "parts": set(), "of": None})
        if self.read_only and not self._has("records"):
            return {}
        for rid, settings in self._conn.execute("SELECT id, settings FROM records WHERE protocol = ? AND settings"
                                                " LIKE '%grid_cell%'", (protocol,)):
            s = json.loads(settings)
            key, part = s.get("grid_cell"), s.get("grid_part")
            if not key or not isinstance(part, str) or "/" not in part:
                continue
            e = out[key]
            e["ids"].append(rid)
            e["parts"].add(part)
            e["of"] = int(part.split("/")[1])
        return dict(out)

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
