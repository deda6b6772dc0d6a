"""SQLite results store: one record per scored run.

One file, WAL journal, one transaction per insert. Tables, significance tests, plots and the HTML
report are views of the store.

>>> import tempfile, os
>>> s = ResultsStore(os.path.join(tempfile.mkdtemp(), "r.sqlite"))
>>> rid = s.add(Record(protocol="longtail", dataset="digits", method="ce", seed=0,
...                    split_hash="abc", settings={"imbalance": 10}, metrics={"avg": 0.9}))
>>> s.records(protocol="longtail")[0].metrics["avg"]
0.9
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from . import __version__
from .jsonutil import dumps, json_safe

DEFAULT_STORE = "vistabench.sqlite"

_SCHEMA = """
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
    tag TEXT
);
CREATE INDEX IF NOT EXISTS records_protocol ON records(protocol, dataset, method);
"""


@dataclass
class Record:
    """One scored run. ``metrics`` and ``settings`` are JSON-serialisable dicts."""

    protocol: str
    dataset: str
    method: str
    seed: int | None
    split_hash: str | None
    settings: dict[str, Any]
    metrics: dict[str, Any]
    tag: str | None = None
    version: str = __version__
    created: float = field(default_factory=time.time)
    id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return json_safe(asdict(self))


class ResultsStore:
    """A results store at ``path`` (created on first use)."""

    def __init__(self, path: str | os.PathLike[str] = DEFAULT_STORE) -> None:
        self.path = Path(path)
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(self.path), timeout=30.0)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.executescript(_SCHEMA)
        self._conn.commit()

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "ResultsStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, record: Record) -> int:
        """Insert a record atomically and return its id."""
        with self._conn:  # one transaction
            cur = self._conn.execute(
                "INSERT INTO records (protocol, dataset, method, seed, split_hash, settings, metrics,"
                " version, created, tag) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.protocol,
                    record.dataset,
                    record.method,
                    record.seed,
                    record.split_hash,
                    dumps(record.settings, sort_keys=True),
                    dumps(record.metrics, sort_keys=True),
                    record.version,
                    record.created,
                    record.tag,
                ),
            )
        record.id = int(cur.lastrowid)
        return record.id

    def add_many(self, records: Iterable[Record]) -> list[int]:
        return [self.add(r) for r in records]

    def records(
        self,
        *,
        protocol: str | None = None,
        dataset: str | None = None,
        method: str | None = None,
        tag: str | None = None,
        ids: Iterable[int] | None = None,
    ) -> list[Record]:
        """Records matching every given filter, oldest first."""
        where, args = [], []
        for col, val in (("protocol", protocol), ("dataset", dataset), ("method", method), ("tag", tag)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        if ids is not None:
            ids = list(ids)
            where.append(f"id IN ({','.join('?' * len(ids))})")
            args.extend(ids)
        sql = "SELECT id, protocol, dataset, method, seed, split_hash, settings, metrics, version, created, tag FROM records"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id"
        out = []
        for row in self._conn.execute(sql, args):
            out.append(
                Record(
                    id=row[0], protocol=row[1], dataset=row[2], method=row[3], seed=row[4],
                    split_hash=row[5], settings=json.loads(row[6]), metrics=json.loads(row[7]),
                    version=row[8], created=row[9], tag=row[10],
                )
            )
        return out

    def delete(self, *, protocol: str, tag: str | None = None) -> int:
        with self._conn:
            if tag is None:
                cur = self._conn.execute("DELETE FROM records WHERE protocol = ?", (protocol,))
            else:
                cur = self._conn.execute("DELETE FROM records WHERE protocol = ? AND tag = ?", (protocol, tag))
        return cur.rowcount
