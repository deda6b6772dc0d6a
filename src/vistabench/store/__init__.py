"""SQLite results store: the records of scored runs (schema 2: docs/store.md).

One file, WAL journal, one transaction per insert. Tables, significance tests, plots and the HTML
report are views of the store (or of any list of its records). Each record has a ``kind`` (what it
is: :data:`~.schema.KINDS`), a ``run_id`` (the run it belongs to), the ``grid_cell``/``grid_part``
of the grid cell that stored it, and ``tag``, the user's free-form tag. What a run needs to resume
(a stream's checkpoint, a search's study, a grid cell's files) lives in the run's work folder,
never in the store. A store of schema 1 is read as it is and migrated on the first write access
(a copy kept beside it: :func:`~.schema.backup_path`).

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

from .. import __version__
from ..atomic import is_disk_full
from ..errors import InputError
from ..jsonutil import dumps, json_safe
from .schema import (INDEXES, KINDS, RECORD_COLUMNS, SCHEMA1_COLUMNS, SCHEMA_VERSION, TABLE, backup_path, check_kind,
                     migrate, new_run_id, read_schema1_rows, schema1_fields)

__all__ = ["DEFAULT_STORE", "APPLICATION_ID", "SCHEMA_VERSION", "KINDS", "Record", "ResultsStore", "new_run_id",
           "backup_path", "connect_sqlite", "set_wal", "can_write", "no_space"]

DEFAULT_STORE = "vistabench.sqlite"

_SCHEMA = TABLE + INDEXES


@dataclass
class Record:
    """One record of the store. ``metrics`` and ``settings`` are JSON-serialisable dicts.

    ``kind``: what it is (:data:`~.schema.KINDS`: ``run``, ``tune``, ``final``, ``highres``,
    ``event``); ``run_id``: the run it belongs to (None: the store gives it a run of its own);
    ``grid_cell``/``grid_part``: the grid cell that stored it and ``"i/n"``; ``tag``: the user's
    free-form tag.
    """

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
    kind: str = "run"
    run_id: str | None = None
    grid_cell: str | None = None
    grid_part: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return json_safe(asdict(self))

    def schema1_dict(self) -> dict[str, Any]:
        """The record as schema 1 held it (one ``tag`` for the user's tag, the smalldata kind and the
        stream run id; the grid cell in the settings): a record migrated to schema 2 gives the dict it
        gave before, so keys computed from it (``vistabench export``'s) stay the same."""
        d = self.to_dict()
        for name in ("kind", "run_id", "grid_cell", "grid_part"):
            d.pop(name)
        if self.kind == "event":
            d["tag"] = self.run_id
        elif self.kind in ("tune", "final", "highres") and self.tag is None:
            d["tag"] = self.kind
        if self.grid_cell is not None:
            d["settings"] = {**d["settings"], "grid_cell": self.grid_cell, "grid_part": self.grid_part}
        return d


#: ``PRAGMA application_id`` of a vistabench store (ASCII "VBst"): foreign SQLite files are refused.
APPLICATION_ID = 0x56427374
_SQLITE_MAGIC = b"SQLite format 3\x00"
_SELECT = ("SELECT id, protocol, dataset, method, seed, split_hash, settings, metrics, version, created, tag, kind, "
           "run_id, grid_cell, grid_part FROM records")


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


def set_wal(conn: Any, *, timeout: float = 30.0) -> None:
    """``PRAGMA journal_mode=WAL``, tried again while another connection holds the lock it needs.

    SQLite may answer "database is locked" at once, without waiting in its busy handler, where waiting
    could deadlock (several processes opening one new store at the same instant: the switch to WAL
    needs the file to itself); it documents that the application then tries again. The mode is the
    file's, so the first writer's switch serves every later one.
    """
    deadline = time.monotonic() + timeout
    wait = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not ("locked" in str(exc) or "busy" in str(exc)) or time.monotonic() + wait > deadline:
                raise
        time.sleep(wait)
        wait = min(2 * wait, 0.2)


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
        cols = {r[1] for r in conn.execute("PRAGMA table_info(records)")}
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
        elif "records" in tables and cols not in (SCHEMA1_COLUMNS, RECORD_COLUMNS):  # unmarked: schema 1, or
            # a store another writer is creating this instant
            raise InputError(f"{where}: its 'records' table is not vistabench's (columns {sorted(cols)}); "
                             "give the store a new file name")
        #: the schema of the records table as it is now (1: read through schema1_fields)
        self.schema = 1 if cols == SCHEMA1_COLUMNS else SCHEMA_VERSION
        if self.read_only:
            return
        set_wal(conn)
        if self.schema == 1:
            self.backup = self._migrate(where)
            self.schema = SCHEMA_VERSION
        if app_id != APPLICATION_ID or version != SCHEMA_VERSION or "records" not in tables:
            conn.execute("BEGIN IMMEDIATE")  # tables and marks at once: another writer sees both or neither
            try:
                for statement in filter(str.strip, _SCHEMA.split(";")):
                    conn.execute(statement)
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _migrate(self, where: str) -> Path | None:
        """Schema 1 -> 2 (a copy of the store kept first: :func:`~.schema.migrate`)."""
        try:
            return migrate(self._conn, self.path)
        except OSError as exc:
            raise InputError(f"{where}: cannot keep a copy before migrating it to schema {SCHEMA_VERSION} "
                             f"({exc.strerror or exc}); free some space or make its folder writable") from exc

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "ResultsStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, record: Record) -> int:
        """Insert a record atomically and return its id (a full disk: one line naming the store).

        Every call writes: under ``torchrun`` the caller opens a store on rank 0 only (the command
        line's ``run`` verbs do: :func:`vistabench.cli.verbs.writes_records`)."""
        try:
            return self._add(record)
        except sqlite3.OperationalError as exc:
            if is_disk_full(exc, self.path.resolve().parent):
                raise no_space(f"results store {str(self.path)!r}") from exc
            raise

    def _add(self, record: Record, *, commit: bool = True) -> int:
        if record.run_id is None:
            record.run_id = new_run_id(record.protocol)  # a record of no larger run is a run of its own
        check_kind(record.kind)
        values = (record.protocol, record.dataset, record.method, record.seed, record.split_hash,
                  dumps(record.settings, sort_keys=True), dumps(record.metrics, sort_keys=True), record.version,
                  record.created, record.tag, record.kind, record.run_id, record.grid_cell, record.grid_part)
        sql = ("INSERT INTO records (protocol, dataset, method, seed, split_hash, settings, metrics, version, created,"
               " tag, kind, run_id, grid_cell, grid_part) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        if commit:
            with self._conn:  # one transaction
                cur = self._conn.execute(sql, values)
        else:
            cur = self._conn.execute(sql, values)
        record.id = int(cur.lastrowid)
        return record.id

    def add_many(self, records: Iterable[Record]) -> list[int]:
        return [self.add(r) for r in records]

    def replace_run(self, records: list[Record], *, protocol: str, run_id: str) -> list[int]:
        """Make ``records`` all the records of run ``run_id`` of ``protocol``, in one transaction (a run
        that went further since it last stored them, e.g. a resumed stream run): a stored record with
        the same measurements as one of ``records`` (kind, dataset, method, seed, split, metrics, tag,
        grid cell) stays as it is, with its id and settings (a resumed run may differ in runtime-only
        settings, e.g. ``max_tasks``); the others are inserted; the run's stored records that are not
        among them are deleted. Returns the ids in the order of ``records`` (each record's ``id``,
        ``created`` and ``settings`` set to the stored ones)."""
        def content(kind, dataset, method, seed, split_hash, metrics, tag, grid_cell, grid_part):
            return (kind, dataset, method, seed, split_hash, metrics, tag, grid_cell, grid_part)

        try:
            with self._conn:
                stored: dict[tuple, list[tuple[int, float]]] = {}
                for row in self._conn.execute(
                        "SELECT id, created, settings, kind, dataset, method, seed, split_hash, metrics, tag, grid_cell,"
                        " grid_part FROM records WHERE protocol = ? AND run_id = ? ORDER BY id", (protocol, run_id)):
                    stored.setdefault(content(*row[3:]), []).append((row[0], row[1], row[2]))
                ids = []
                for r in records:
                    r.run_id = run_id
                    same = stored.get(content(r.kind, r.dataset, r.method, r.seed, r.split_hash,
                                              dumps(r.metrics, sort_keys=True), r.tag, r.grid_cell, r.grid_part))
                    if same:
                        r.id, r.created, settings = same.pop(0)
                        r.settings = json.loads(settings)
                        ids.append(r.id)
                    else:
                        ids.append(self._add(r, commit=False))
                gone = [i for left in stored.values() for i, _, _ in left]
                if gone:
                    self._conn.execute(f"DELETE FROM records WHERE id IN ({','.join('?' * len(gone))})", gone)
                return ids
        except sqlite3.OperationalError as exc:
            if is_disk_full(exc, self.path.resolve().parent):
                raise no_space(f"results store {str(self.path)!r}") from exc
            raise

    def records(
        self,
        *,
        protocol: str | None = None,
        dataset: str | None = None,
        method: str | None = None,
        tag: str | None = None,
        kind: str | None = None,
        run_id: str | None = None,
        grid_cell: str | None = None,
        ids: Iterable[int] | None = None,
    ) -> list[Record]:
        """Records matching every given filter, oldest first."""
        filters = {"protocol": protocol, "dataset": dataset, "method": method, "tag": tag, "kind": kind,
                   "run_id": run_id, "grid_cell": grid_cell}
        filters = {k: v for k, v in filters.items() if v is not None}
        ids = None if ids is None else list(ids)
        try:
            if self.schema == 1:  # an unmigrated store opened read-only
                return self._schema1_records(filters, ids)
            where, args = [f"{col} = ?" for col in filters], list(filters.values())
            if ids is not None:
                where.append(f"id IN ({','.join('?' * len(ids))})")
                args.extend(ids)
            sql = _SELECT + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
            rows = self._conn.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise InputError(f"results store {str(self.path)!r}: cannot read records ({exc}); restore it "
                             "from a backup or give the store a new file name") from exc
        return [self._record(row) for row in rows]

    def _record(self, row: tuple) -> Record:
        loaded = {}
        for col, text in (("settings", row[6]), ("metrics", row[7])):
            if isinstance(text, dict):  # a schema-1 row, read already
                loaded[col] = text
                continue
            try:
                loaded[col] = json.loads(text)
            except (TypeError, json.JSONDecodeError) as exc:
                raise InputError(f"results store {str(self.path)!r}: record {row[0]} ({row[1]}/{row[3]}) has "
                                 f"malformed {col} JSON; delete that record") from exc
        return Record(id=row[0], protocol=row[1], dataset=row[2], method=row[3], seed=row[4], split_hash=row[5],
                      settings=loaded["settings"], metrics=loaded["metrics"], version=row[8], created=row[9],
                      tag=row[10], kind=row[11], run_id=row[12], grid_cell=row[13], grid_part=row[14])

    def _schema1_records(self, filters: dict[str, Any], ids: list[int] | None) -> list[Record]:
        """A schema-1 store's records as schema 2 reads them (each protocol's rows read whole, so a
        run's id does not depend on the filters)."""
        rows = read_schema1_rows(self._conn, filters.get("protocol"))
        parsed = {}
        for r in rows:
            try:
                parsed[r[0]] = json.loads(r[6])
            except (TypeError, json.JSONDecodeError):
                parsed[r[0]] = r[6]  # named by _record when the record is read
        fields = {}
        for proto in dict.fromkeys(r[1] for r in rows):
            fields.update(schema1_fields((r[0], r[1], r[10], parsed[r[0]]) for r in rows if r[1] == proto))
        out = []
        for r in rows:
            f = fields[r[0]]
            settings = f["settings"] if isinstance(f["settings"], dict) else r[6]
            rec = self._record((*r[:6], settings, r[7], r[8], r[9], f["tag"], f["kind"], f["run_id"],
                                f["grid_cell"], f["grid_part"]))
            if all(getattr(rec, k) == v for k, v in filters.items()) and (ids is None or rec.id in ids):
                out.append(rec)
        return out

    def delete(self, *, protocol: str, run_id: str | None = None, tag: str | None = None) -> int:
        """Delete the records of ``protocol`` (only run ``run_id``'s, only those tagged ``tag``); how many."""
        where, args = ["protocol = ?"], [protocol]
        for col, val in (("run_id", run_id), ("tag", tag)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        with self._conn:
            cur = self._conn.execute("DELETE FROM records WHERE " + " AND ".join(where), args)
        return cur.rowcount
