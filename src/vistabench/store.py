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
from .atomic import is_disk_full
from .errors import InputError
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


#: ``PRAGMA application_id`` of a vistabench store (ASCII "VBst"): foreign SQLite files are refused.
APPLICATION_ID = 0x56427374
#: ``PRAGMA user_version``: the schema this version writes; a newer one is refused with advice.
SCHEMA_VERSION = 1
_SQLITE_MAGIC = b"SQLite format 3\x00"
_RECORD_COLUMNS = {"id", "protocol", "dataset", "method", "seed", "split_hash", "settings", "metrics",
                   "version", "created", "tag"}


def can_write(path: str | os.PathLike[str]) -> bool:
    """Whether this process may write ``path`` and create files beside it (SQLite's ``-wal``/``-shm``)."""
    p = Path(path).resolve()
    return os.access(p.parent, os.W_OK) and (not p.exists() or os.access(p, os.W_OK))


def connect_sqlite(path: str | os.PathLike[str], *, read_only: bool = False,
                   timeout: float = 30.0) -> sqlite3.Connection:
    """A connection to the SQLite file ``path``; ``read_only`` never creates or changes a file.

    Read-only opening uses ``mode=ro``; where the file or its folder is not writable (a shared
    results folder, a mounted archive), ``immutable=1`` as well, since even a read-only connection
    to a WAL database would create a ``-shm`` file beside it; the same where that fails because
    the disk is full (the side files it began are removed). (An immutable reader does not see what
    a crashed writer left in a ``-wal`` file; a store closed normally has none.)
    """
    if not read_only:
        return sqlite3.connect(str(path), timeout=timeout)
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    if not can_write(path):
        return sqlite3.connect(uri + "&immutable=1", uri=True, timeout=timeout)
    side = [Path(str(path) + suffix) for suffix in ("-wal", "-shm")]
    existed = [p.exists() for p in side]
    conn = sqlite3.connect(uri, uri=True, timeout=timeout)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens the WAL index (-shm)
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        if not is_disk_full(exc, Path(path).resolve().parent):
            raise
    for p, was in zip(side, existed):
        if not was:
            p.unlink(missing_ok=True)  # begun by the failed attempt
    return sqlite3.connect(uri + "&immutable=1", uri=True, timeout=timeout)


def no_space(where: str) -> InputError:
    """The one-line error of a store write on a full disk."""
    return InputError(f"{where}: no space left on device (nothing was stored); free some space or give "
                      "the store another file")


class ResultsStore:
    """A results store at ``path`` (created on first use unless ``read_only``).

    The file is marked as ours (``PRAGMA application_id`` = :data:`APPLICATION_ID`, ``user_version``
    = :data:`SCHEMA_VERSION`). Opening refuses, with one-line :class:`~vistabench.errors.InputError`:
    a file that is not SQLite, a SQLite file of another program, a corrupted file and a store of a
    newer schema. ``read_only=True`` (tables, reports) never creates or modifies the file, and reads a
    store in a folder it may not write (a shared results folder, a mounted archive): see
    :func:`connect_sqlite`.
    """

    def __init__(self, path: str | os.PathLike[str] = DEFAULT_STORE, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        where = f"results store {str(self.path)!r}"
        if self.path.is_dir():
            raise InputError(f"{where}: is a folder, expected a results store file")
        existed = {suffix: Path(str(self.path) + suffix).exists() for suffix in ("", "-wal", "-shm", "-journal")}
        exists = self.path.is_file() and self.path.stat().st_size > 0
        if read_only and not self.path.is_file():
            raise InputError(f"{where}: no such results store (run a protocol or `vistabench demo` first)")
        if exists:
            try:
                with open(self.path, "rb") as f:
                    head = f.read(len(_SQLITE_MAGIC))
            except OSError as exc:
                raise InputError(f"{where}: cannot read ({exc.strerror})") from exc
            if head != _SQLITE_MAGIC:
                raise InputError(f"{where}: not a SQLite results store (the file holds something else); "
                                 "give the store a new file name")
        elif not read_only and not self.path.parent.is_dir():
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InputError(f"{where}: cannot create its folder ({exc.strerror})") from exc
        try:
            self._conn = connect_sqlite(self.path, read_only=read_only)
            self._check_and_init(where)
        except sqlite3.OperationalError as exc:
            full = is_disk_full(exc, self.path.resolve().parent)
            if full:
                if not read_only:
                    self._remove_new_files(existed)
                raise no_space(where) from exc
            if "locked" in str(exc) or "busy" in str(exc):
                raise
            raise InputError(f"{where}: cannot open ({exc})") from exc
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{where}: corrupted SQLite file ({exc}); restore it from a backup or give "
                             "the store a new file name") from exc

    def _remove_new_files(self, existed: dict[str, bool]) -> None:
        """The files (the store, its side files) that a failed opening began: nothing of them is left."""
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()
        for suffix, was in existed.items():
            if not was:
                Path(str(self.path) + suffix).unlink(missing_ok=True)

    def _check_and_init(self, where: str) -> None:
        conn = self._conn
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if app_id == APPLICATION_ID:
            if version > SCHEMA_VERSION:
                raise InputError(f"{where}: written by a newer vistabench (schema {version}, this version reads "
                                 f"up to {SCHEMA_VERSION}); upgrade vistabench to read it")
        elif app_id != 0:
            raise InputError(f"{where}: a SQLite file of another program (application_id {app_id:#x}), not a "
                             "vistabench results store; give the store a new file name")
        elif tables - {"records", "sqlite_sequence"}:
            raise InputError(f"{where}: a SQLite file of another program (tables {sorted(tables)[:5]}), not a "
                             "vistabench results store; give the store a new file name")
        elif "records" in tables:  # a store written before stores were marked: check its columns
            cols = {r[1] for r in conn.execute("PRAGMA table_info(records)")}
            if cols != _RECORD_COLUMNS:
                raise InputError(f"{where}: its 'records' table is not vistabench's (columns {sorted(cols)}); "
                                 "give the store a new file name")
        if self.read_only:
            return
        conn.execute("PRAGMA journal_mode=WAL")
        if app_id != APPLICATION_ID or version != SCHEMA_VERSION or "records" not in tables:
            with conn:
                conn.executescript(_SCHEMA)
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "ResultsStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, record: Record) -> int | None:
        """Insert a record atomically and return its id (a full disk: one line naming the store).

        Under ``torchrun`` (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` set) every process runs the
        same command and trains the same model together (``TrainConfig.devices``); only rank 0
        writes, the others return None and leave ``record.id`` None."""
        if all(k in os.environ for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")) and os.environ["RANK"] != "0":
            return None
        try:
            return self._add(record)
        except sqlite3.OperationalError as exc:
            if is_disk_full(exc, self.path.resolve().parent):
                raise no_space(f"results store {str(self.path)!r}") from exc
            raise

    def _add(self, record: Record) -> int:
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
        try:
            rows = self._conn.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise InputError(f"results store {str(self.path)!r}: cannot read records ({exc}); restore it "
                             "from a backup or give the store a new file name") from exc
        for row in rows:
            loaded = {}
            for col, text in (("settings", row[6]), ("metrics", row[7])):
                try:
                    loaded[col] = json.loads(text)
                except (TypeError, json.JSONDecodeError) as exc:
                    raise InputError(f"results store {str(self.path)!r}: record {row[0]} ({row[1]}/{row[3]}) has "
                                     f"malformed {col} JSON; delete that record") from exc
            out.append(
                Record(
                    id=row[0], protocol=row[1], dataset=row[2], method=row[3], seed=row[4],
                    split_hash=row[5], settings=loaded["settings"], metrics=loaded["metrics"],
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
