"""Reading a results store needs no write: ``table``, ``report``, ``stream report`` and ``grid status``
work on a store in a folder they cannot write (opened ``mode=ro``, plus ``immutable=1`` there).

As root a chmod'ed folder stays writable, so the unwritable folder is simulated (``can_write``
returns False) and the test checks that nothing is created beside the store: a read-only
connection to a WAL database would otherwise create its ``-shm`` file (what fails in a truly
read-only folder with "unable to open database file").
"""

import sqlite3

import pytest

import vistabench.store as vstore
from vistabench.cli import main
from vistabench.errors import InputError
from vistabench.store import Record, ResultsStore, connect_sqlite


@pytest.fixture
def shared(tmp_path):
    folder = tmp_path / "shared"
    store = folder / "r.sqlite"
    with ResultsStore(store) as s:  # a longtail table row; no protocol's report section reads it
        s.add(Record(protocol="longtail", dataset="digits", method="ce", seed=0, split_hash=None,
                     settings={"imbalance": 10.0}, metrics={"auc": 0.9, "avg": 0.8}, tag="not-a-run"))
    return store


def test_an_unwritable_folder_is_opened_immutable(shared, monkeypatch):
    monkeypatch.setattr(vstore, "can_write", lambda path: False)
    with connect_sqlite(shared, read_only=True) as conn:
        assert conn.execute("SELECT COUNT(*) FROM records").fetchone() == (1,)
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM records")
    assert sorted(p.name for p in shared.parent.iterdir()) == ["r.sqlite"]  # no -wal, no -shm


@pytest.mark.parametrize("argv", [["longtail", "table"], ["report", "--out", "{out}"], ["stream", "report"],
                                  ["grid", "status", "{grid}"]])
def test_reading_commands_create_nothing_beside_the_store(shared, monkeypatch, tmp_path, capsys, argv):
    if argv[0] == "report":  # a record no protocol's report section reads (a bare longtail one would not do)
        shared.unlink()
        with ResultsStore(shared) as s:
            s.add(Record(protocol="misc", dataset="d", method="m", seed=0, split_hash=None, settings={}, metrics={}))
    monkeypatch.setattr(vstore, "can_write", lambda path: False)
    (tmp_path / "g.yaml").write_text("protocol: longtail\nfixed: {data: digits, imbalance: 10, method: ce}\n")
    argv = [a.replace("{out}", str(tmp_path / "report")).replace("{grid}", str(tmp_path / "g.yaml")) for a in argv]
    rc = main([*argv, "--store", str(shared)])
    out, err = capsys.readouterr()
    if argv[0] == "stream":  # the store holds no stream run: a one-line answer, not "unable to open"
        assert rc == 2 and "holds no stream runs" in err
    else:
        assert rc == 0, err
    assert "unable to open" not in err
    assert sorted(p.name for p in shared.parent.iterdir()) == ["r.sqlite"]


def test_a_read_only_store_is_never_created(tmp_path):
    with pytest.raises(InputError, match="no such results store"):
        ResultsStore(tmp_path / "none.sqlite", read_only=True)
    assert not (tmp_path / "none.sqlite").exists()
