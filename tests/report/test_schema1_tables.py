"""Every protocol's table and the stream analysis read the same from a list of records, from the
store, from the same records in a store of schema 1 (read as it is), and after its migration."""

import shutil

from vistabench.report.stream_analysis import analyse
from vistabench.store import ResultsStore, backup_path
from vistabench.suite import protocols


def test_tables_are_the_same_from_records_a_store_and_a_migrated_schema1_store(quick_demo, tmp_path, schema1_store):
    with ResultsStore(quick_demo.store, read_only=True) as s:
        records = s.records()
    assert {r.kind for r in records} >= {"run", "tune", "final", "event"}
    old = tmp_path / "old.sqlite"
    schema1_store(old, [r.schema1_dict() for r in records])  # the demo's records as schema 1 held them

    def tables(source):
        out = {}
        for proto in protocols():
            if proto.table:
                for fmt in ("markdown", "latex", "csv"):
                    out[proto.name, fmt] = proto.part("table")(source).render(fmt)
        out["stream analysis"] = analyse(source)
        return out

    from_list = tables(records)
    assert len(from_list) == 3 * 5 + 1
    with ResultsStore(quick_demo.store, read_only=True) as s:
        assert tables(s) == from_list
    with ResultsStore(old, read_only=True) as s:
        assert s.schema == 1 and tables(s) == from_list
    migrated = tmp_path / "migrated.sqlite"
    shutil.copy(old, migrated)
    with ResultsStore(migrated) as s:
        assert s.schema == 2 and backup_path(migrated).is_file()
        assert tables(s) == from_list
        again = s.records()
    for a, b in zip(records, again, strict=True):  # each record the same but the ids of the runs it had
        da, db = a.to_dict(), b.to_dict()
        assert (da.pop("run_id") == db.pop("run_id")) == (a.kind == "event")
        assert da == db
    by_run = {}
    for a, b in zip(records, again):  # records of one run are one run after the migration, and vice versa
        by_run.setdefault(a.run_id, set()).add(b.run_id)
    assert all(len(v) == 1 for v in by_run.values()) and len(by_run) == len({b.run_id for b in again})

