"""Store schema 2: kinds and run ids; a schema-1 store read as it is (read-only) and migrated on the
first write access, a copy kept beside it; a store of a newer schema refused in one line."""

import hashlib
import sqlite3

import pytest

from vistabench.errors import InputError
from vistabench.store import KINDS, SCHEMA_VERSION, Record, ResultsStore, backup_path
from vistabench.tracking.session import record_key


def _row(i, protocol, tag=None, settings=None, method="m", metrics=None):
    return {"id": i, "protocol": protocol, "dataset": "d", "method": method, "seed": 0, "split_hash": "h",
            "settings": settings or {}, "metrics": metrics or {"score": i / 10}, "version": "0.9", "created": 1000.0 + i,
            "tag": tag}


RC = {"method": "ce", "seed": 0}
ROWS = [
    _row(1, "longtail", tag="ablation"),                                    # the user's tag
    _row(2, "smalldata", tag="tune", settings={"run_config": RC}),          # one smalldata run: tune, finals, highres
    _row(3, "smalldata", tag="final", settings={"run_config": RC, "repeat": 0}),
    _row(4, "smalldata", tag="final", settings={"run_config": RC, "repeat": 1}),
    _row(5, "smalldata", tag="highres", settings={"run_config": RC}),
    _row(6, "smalldata", tag="final", settings={"run_config": {**RC, "seed": 1}}),  # another run
    _row(7, "smalldata", tag="mine", settings={"run_config": RC}),           # `smalldata score --tag mine`: no table
    _row(8, "stream", tag="s-indep-t1", metrics={"task_index": 0}),          # a stream run's events
    _row(9, "stream", tag="s-indep-t1", metrics={"task_index": 1}),
    _row(10, "toy", settings={"x": 1, "grid_cell": "abc", "grid_part": "1/2"}),  # a grid cell of two records
    _row(11, "toy", settings={"x": 1, "grid_cell": "abc", "grid_part": "2/2"}),
    _row(12, "incremental"),                                                # no tag
]
EXPECTED = {  # id: (kind, tag, run id, grid cell, grid part)
    1: ("run", "ablation", "schema1-1", None, None),
    2: ("tune", None, "schema1-2", None, None),
    3: ("final", None, "schema1-2", None, None),
    4: ("final", None, "schema1-2", None, None),
    5: ("highres", None, "schema1-2", None, None),
    6: ("final", None, "schema1-6", None, None),
    7: ("run", "mine", "schema1-7", None, None),
    8: ("event", None, "s-indep-t1", None, None),
    9: ("event", None, "s-indep-t1", None, None),
    10: ("run", None, "schema1-10", "abc", "1/2"),
    11: ("run", None, "schema1-10", "abc", "2/2"),
    12: ("run", None, "schema1-12", None, None),
}


def _fields(records):
    return {r.id: (r.kind, r.tag, r.run_id, r.grid_cell, r.grid_part) for r in records}


def _schema1_key(row):
    """`vistabench export`'s record key as the schema-1 code computed it (the record's dict)."""
    from vistabench.jsonutil import dumps

    return hashlib.sha256(dumps(row, sort_keys=True).encode()).hexdigest()[:16]


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_schema1_store_reads_the_same_before_and_after_its_migration(tmp_path, schema1_store):
    p = tmp_path / "old.sqlite"
    schema1_store(p, ROWS)
    before = _digest(p)
    with ResultsStore(p, read_only=True) as s:  # read as it is: nothing written
        assert s.schema == 1
        old = s.records()
        assert _fields(old) == EXPECTED
        assert [r.id for r in s.records(protocol="smalldata", kind="final")] == [3, 4, 6]
        assert [r.id for r in s.records(run_id="s-indep-t1")] == [8, 9]
        assert [r.id for r in s.records(tag="ablation")] == [1]
    assert _digest(p) == before and not backup_path(p).exists()

    with ResultsStore(p) as s:  # the first write access migrates
        assert s.schema == SCHEMA_VERSION and s.backup == backup_path(p)
        new = s.records()
        assert [r.id for r in s.records(grid_cell="abc")] == [10, 11]
    assert [r.to_dict() for r in new] == [r.to_dict() for r in old]
    by_id = {r["id"]: r for r in ROWS}
    for r in new:  # every record as schema 1 held it, settings and metrics included; its export key unchanged
        assert r.schema1_dict() == by_id[r.id]
        assert record_key(r) == _schema1_key(by_id[r.id])
        assert "grid_cell" not in r.settings
    c = sqlite3.connect(p)
    assert c.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    plan = " ".join(str(x) for x in c.execute("EXPLAIN QUERY PLAN SELECT id FROM records WHERE grid_cell = 'abc'"))
    assert "records_grid_cell" in plan  # grid cells are found through an index, not a scan of the settings
    c.close()

    bak = sqlite3.connect(backup_path(p))  # the copy is the schema-1 store as it was
    assert bak.execute("PRAGMA user_version").fetchone()[0] == 1
    assert [r[0] for r in bak.execute("SELECT tag FROM records ORDER BY id")] == [r["tag"] for r in ROWS]
    assert "kind" not in {r[1] for r in bak.execute("PRAGMA table_info(records)")}
    bak.close()


def test_the_copy_is_never_overwritten_and_a_migrated_store_is_written_on(tmp_path, schema1_store):
    p = tmp_path / "old.sqlite"
    schema1_store(p, ROWS[:2])
    backup_path(p).write_text("an earlier copy")
    with ResultsStore(p) as s:
        assert s.backup is None
        rid = s.add(Record(protocol="stream", dataset="d", method="m", seed=0, split_hash=None, settings={},
                           metrics={}, kind="event", run_id="r2"))
        assert rid == 3 and [r.id for r in s.records(protocol="stream", kind="event", run_id="r2")] == [3]
    assert backup_path(p).read_text() == "an earlier copy"
    with ResultsStore(p) as s:  # opened again: nothing to migrate
        assert [r.kind for r in s.records()] == ["run", "tune", "event"]


def test_new_records_get_a_run_and_a_kind(tmp_path):
    with ResultsStore(tmp_path / "s.sqlite") as s:
        a, b = (Record(protocol="longtail", dataset="d", method="m", seed=0, split_hash=None, settings={},
                       metrics={}) for _ in range(2))
        s.add(a)
        s.add(b)
        assert a.kind == "run" and a.run_id.startswith("longtail-") and a.run_id != b.run_id
        with pytest.raises(InputError, match="^kind: expected one of run, tune, final, highres, event, got 'trial'$"):
            s.add(Record(protocol="p", dataset="d", method="m", seed=0, split_hash=None, settings={}, metrics={},
                         kind="trial"))
        assert len(s.records()) == 2
    assert KINDS == ("run", "tune", "final", "highres", "event")


def test_replace_run_keeps_the_records_a_run_stored_and_adds_the_new_ones(tmp_path):
    def ev(i, error=0.5):
        return Record(protocol="stream", dataset="d", method="m", seed=0, split_hash=None, settings={},
                      metrics={"task_index": i, "error": error}, kind="event", run_id="r")

    with ResultsStore(tmp_path / "s.sqlite") as s:
        (first,) = s.replace_run([ev(0)], protocol="stream", run_id="r")
        other = s.add(Record(protocol="stream", dataset="d", method="m", seed=0, split_hash=None, settings={},
                             metrics={"task_index": 0}, kind="event", run_id="q"))
        ids = s.replace_run([ev(0), ev(1)], protocol="stream", run_id="r")  # resumed: one more task
        assert ids[0] == first and ids[1] > other
        assert [(r.id, r.metrics["task_index"]) for r in s.records(run_id="r")] == list(zip(ids, [0, 1]))
        again = s.replace_run([ev(0, error=0.25), ev(1)], protocol="stream", run_id="r")  # task 0 redone differently
        assert again[1] == ids[1] and again[0] not in ids
        assert sorted(r.metrics["error"] for r in s.records(run_id="r")) == [0.25, 0.5]
        assert [r.id for r in s.records(run_id="q")] == [other]


def test_a_store_of_a_newer_schema_is_one_line(tmp_path):
    p = tmp_path / "new.sqlite"
    ResultsStore(p).close()
    c = sqlite3.connect(p)
    c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    c.commit()
    c.close()
    for read_only in (True, False):
        with pytest.raises(InputError) as e:
            ResultsStore(p, read_only=read_only)
        assert str(e.value) == (f"results store {str(p)!r}: written by a newer vistabench (schema {SCHEMA_VERSION + 1}, "
                                f"this version reads up to {SCHEMA_VERSION}); upgrade vistabench to read it")


def test_two_writers_opening_one_schema1_store_migrate_it_once(tmp_path, schema1_store):
    import os
    import subprocess
    import sys

    p = tmp_path / "old.sqlite"
    schema1_store(p, ROWS)
    code = ("import sys\nfrom vistabench.store import ResultsStore\n"
            "with ResultsStore(sys.argv[1]) as s:\n    print(len(s.records()))\n")
    src = os.path.join(os.path.dirname(__file__), "..", "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(p)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [pr.communicate(timeout=120) for pr in procs]
    assert all(pr.returncode == 0 for pr in procs), [o[1][-500:] for o in outs]
    assert [o[0].strip() for o in outs] == [str(len(ROWS))] * 3
    with ResultsStore(p, read_only=True) as s:
        assert _fields(s.records()) == EXPECTED


def test_every_table_in_a_store_file_is_declared_in_the_schema(tmp_path):
    """The store's tables, the grid's included, are declared in store/schema.py and nowhere else: a
    store a grid has opened holds exactly the tables the schema declares."""
    import re
    from pathlib import Path

    from vistabench.grid.state import GridState
    from vistabench.store import schema

    declared = set(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", schema.TABLE + schema.GRID_TABLES))
    assert declared == {"records", "grid_cells", "grid_leases"}
    path = tmp_path / "r.sqlite"
    with ResultsStore(path), GridState(path):
        pass
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} - {"sqlite_sequence"}
    conn.close()
    assert tables == declared
    src = Path(schema.__file__).parents[1]
    elsewhere = [str(f.relative_to(src)) for f in src.rglob("*.py")
                 if f != Path(schema.__file__) and re.search(r"CREATE\s+(TABLE|INDEX)", f.read_text(encoding="utf-8"))]
    assert not elsewhere, f"tables declared outside store/schema.py: {elsewhere}"
