"""A grid resumes on a store of schema 1: its done cells are found (read-only, then after the
migration) by their keys, a half-stored cell is run again, and the table is the same."""

from vistabench.grid import grid_records, grid_status, grid_table, parse_config, run_grid
from vistabench.store import ResultsStore, backup_path


def test_a_grid_resumes_on_a_schema1_store(toy, tmp_path, schema1_store):
    cfg = parse_config({"protocol": "toy", "fixed": {"n_max": 3, "parts": 2}, "grid": {"seed": [0, 1, 2]}})
    c0, c1, c2 = cfg.cells()
    new = tmp_path / "new.sqlite"
    assert run_grid(cfg, store=new, work_dir=tmp_path / "w1").ran == 3
    with ResultsStore(new, read_only=True) as s:
        records = s.records()
    # the same grid, as vistabench wrote it under schema 1 when killed mid-grid: cell 0 done, cell 1
    # not started, cell 2 half-stored (1 of its 2 records)
    rows = [r.schema1_dict() for r in records if r.grid_cell == c0.key or (r.grid_cell, r.grid_part) == (c2.key, "1/2")]
    assert [r["settings"]["grid_cell"] for r in rows] == [c0.key, c0.key, c2.key]
    old = tmp_path / "old.sqlite"
    schema1_store(old, rows, grid_cells=[(c0.key, "toy", "{}", "done", None, "h", 1, 1.0)])

    st = grid_status(cfg, store=old)  # read-only: the store is not migrated
    assert [r["status"] for r in st["rows"]] == ["done", "missing", "missing"]
    assert [r.metrics for r in grid_records(cfg, store=old)] == [r.metrics for r in records[:2]]
    assert not backup_path(old).exists()

    res = run_grid(cfg, store=old, work_dir=tmp_path / "w2")  # migrated, then resumed
    assert (res.ran, res.skipped, res.failed) == (2, 1, 0) and backup_path(old).is_file()
    assert grid_status(cfg, store=old)["done"] == 3
    with ResultsStore(old, read_only=True) as s:
        again = s.records()
    assert sorted((r.grid_cell, r.grid_part) for r in again) == sorted((r.grid_cell, r.grid_part) for r in records)
    assert {r.grid_cell for r in again} == {c0.key, c1.key, c2.key}  # the cell keys unchanged
    assert grid_table(cfg, store=old) == grid_table(cfg, store=new)
