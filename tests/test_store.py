import math
import sqlite3

from vistabench.jsonutil import dumps
from vistabench.store import Record, ResultsStore


def test_store_roundtrip_and_filters(tmp_path):
    path = tmp_path / "r.sqlite"
    with ResultsStore(path) as s:
        a = s.add(Record("longtail", "digits", "ce", 0, "h", {"rho": 10}, {"avg": 0.5, "auc": float("nan")}))
        s.add(Record("longtail", "digits", "focal", 1, "h", {}, {"avg": 0.6}, tag="demo"))
        s.add(Record("smalldata", "mnist5k", "ce", 0, None, {}, {"ba": 0.7}))
        assert [r.method for r in s.records(protocol="longtail")] == ["ce", "focal"]
        assert s.records(tag="demo")[0].seed == 1
        r = s.records(ids=[a])[0]
        assert r.metrics["auc"] is None and r.settings == {"rho": 10} and r.version
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_dumps_nan_is_null():
    assert dumps({"a": math.nan, "b": [1.0, math.inf]}) == '{"a": null, "b": [1.0, null]}'


def test_the_store_writes_whatever_the_process_environment(tmp_path, monkeypatch):
    """The store does not look at torchrun's environment: the caller decides whether a rank writes
    (it passes no store on ranks other than 0: tests/cli/test_verbs.py)."""
    rec = dict(protocol="longtail", dataset="d", method="ce", seed=0, split_hash=None, settings={}, metrics={"acc": 0.5})
    for k, v in dict(WORLD_SIZE="2", LOCAL_RANK="1", RANK="1").items():
        monkeypatch.setenv(k, v)
    with ResultsStore(tmp_path / "r.sqlite") as s:
        assert s.add(Record(**rec)) == 1 and len(s.records()) == 1
