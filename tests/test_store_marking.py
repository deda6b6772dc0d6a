"""The results store marks itself, refuses files that are not ours and opens read-only for views."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from vistabench.errors import InputError
from vistabench.store import APPLICATION_ID, SCHEMA_VERSION, Record, ResultsStore


def _rec(**kw):
    base = dict(protocol="longtail", dataset="d", method="m", seed=0, split_hash=None, settings={}, metrics={"a": 1})
    return Record(**{**base, **kw})


def _digest(p):
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_a_new_store_is_marked(tmp_path):
    with ResultsStore(tmp_path / "s.sqlite") as s:
        s.add(_rec())
    c = sqlite3.connect(tmp_path / "s.sqlite")
    assert c.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert c.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_foreign_sqlite_file_is_refused_and_left_untouched(tmp_path):
    p = tmp_path / "other_tool.db"
    c = sqlite3.connect(p)
    c.execute("CREATE TABLE customers (id, name)")
    c.execute("INSERT INTO customers VALUES (1, 'x')")
    c.commit()
    c.close()
    before = _digest(p)
    for ro in (True, False):
        with pytest.raises(InputError, match="other_tool.db.*another program"):
            ResultsStore(p, read_only=ro)
    assert _digest(p) == before
    tables = {r[0] for r in sqlite3.connect(p).execute("SELECT name FROM sqlite_master")}
    assert tables == {"customers"}  # no 'records' table was created inside it


def test_a_foreign_application_id_is_refused(tmp_path):
    p = tmp_path / "x.db"
    c = sqlite3.connect(p)
    c.execute("PRAGMA application_id = 42")
    c.commit()
    c.close()
    with pytest.raises(InputError, match="application_id 0x2a"):
        ResultsStore(p)


def test_read_only_never_creates_or_modifies(tmp_path):
    with pytest.raises(InputError, match="no such results store"):
        ResultsStore(tmp_path / "missing.sqlite", read_only=True)
    assert not (tmp_path / "missing.sqlite").exists()
    with ResultsStore(tmp_path / "s.sqlite") as s:
        s.add(_rec())
    before = _digest(tmp_path / "s.sqlite")
    with ResultsStore(tmp_path / "s.sqlite", read_only=True) as s:
        assert [r.metrics for r in s.records()] == [{"a": 1}]
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            s.add(_rec())
    assert _digest(tmp_path / "s.sqlite") == before


def test_an_unmarked_store_of_an_earlier_version_is_adopted(tmp_path, schema1_records_table):
    p = tmp_path / "old.sqlite"
    c = sqlite3.connect(p)
    c.executescript(schema1_records_table)
    c.execute("INSERT INTO records (protocol, dataset, method, settings, metrics, version, created)"
              " VALUES ('longtail', 'd', 'm', '{}', '{\"a\": 2}', '0.0', 0)")
    c.commit()
    c.close()
    with ResultsStore(p, read_only=True) as s:  # readable as is
        assert s.records()[0].metrics == {"a": 2}
    with ResultsStore(p) as s:  # marked on the first write access
        assert len(s.records()) == 1
    assert sqlite3.connect(p).execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


def test_newer_schema_corrupt_and_non_sqlite_files_are_one_line_errors(tmp_path):
    p = tmp_path / "new.sqlite"
    ResultsStore(p).close()
    c = sqlite3.connect(p)
    c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    c.commit()
    c.close()
    with pytest.raises(InputError, match="newer vistabench.*upgrade") as e:
        ResultsStore(p, read_only=True)
    (tmp_path / "bad.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00\xff" * 200)
    with pytest.raises(InputError, match="corrupted.*backup"):
        ResultsStore(tmp_path / "bad.sqlite")
    (tmp_path / "notes.txt").write_text("my notes")
    with pytest.raises(InputError, match="not a SQLite"):
        ResultsStore(tmp_path / "notes.txt")
    assert (tmp_path / "notes.txt").read_text() == "my notes"
    with pytest.raises(InputError, match="is a folder"):
        ResultsStore(tmp_path)
    assert "\n" not in str(e.value)


def test_a_record_with_broken_json_is_named(tmp_path):
    p = tmp_path / "s.sqlite"
    with ResultsStore(p) as s:
        s.add(_rec())
        rid = s.add(_rec(method="broken"))
    c = sqlite3.connect(p)
    c.execute("UPDATE records SET settings = '{\"x\": ' WHERE id = ?", (rid,))
    c.commit()
    c.close()
    with ResultsStore(p, read_only=True) as s:
        with pytest.raises(InputError, match=f"record {rid} \\(longtail/broken\\) has malformed settings JSON"):
            s.records()


def test_four_writers_creating_one_store_at_once(tmp_path):
    import os
    import subprocess
    import sys

    src = os.path.join(os.path.dirname(__file__), "..", "src")
    code = ("import sys\nfrom vistabench.store import ResultsStore, Record\n"
            "for i in range(5):\n"
            "    with ResultsStore(sys.argv[1]) as s:\n"
            "        s.add(Record(protocol='p', dataset='d', method=sys.argv[2], seed=i, split_hash=None,"
            " settings={}, metrics={'i': i}))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    path = str(tmp_path / "shared.sqlite")
    procs = [subprocess.Popen([sys.executable, "-c", code, path, w], env=env, stderr=subprocess.PIPE)
             for w in "abcd"]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errs
    with ResultsStore(path, read_only=True) as s:
        recs = s.records()
    assert sorted((r.method, r.seed) for r in recs) == [(w, i) for w in "abcd" for i in range(5)]


class _LockedFor:
    """A connection whose first ``n`` journal-mode switches find the file locked (as SQLite answers at
    once, without its busy handler, when waiting could deadlock)."""

    def __init__(self, n: int, message: str = "database is locked") -> None:
        self.left, self.message, self.calls = n, message, 0

    def execute(self, sql: str):
        import sqlite3

        assert sql == "PRAGMA journal_mode=WAL"
        self.calls += 1
        if self.left:
            self.left -= 1
            raise sqlite3.OperationalError(self.message)


def test_the_switch_to_wal_is_tried_again_while_the_file_is_locked_and_not_for_ever():
    import sqlite3

    from vistabench.store import set_wal

    conn = _LockedFor(3)
    set_wal(conn, timeout=5)
    assert conn.calls == 4  # three refusals, then the switch
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        set_wal(_LockedFor(10 ** 6), timeout=0.05)  # bounded by the timeout
    other = _LockedFor(1, "disk I/O error")
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):  # other errors are not retried
        set_wal(other, timeout=5)
    assert other.calls == 1
