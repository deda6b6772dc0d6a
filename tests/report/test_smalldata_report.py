"""The small-data section's search-space table: what each method searched, read from its stored runs."""

from vistabench.report.smalldata import search_space_table, smalldata_section
from vistabench.store import Record


def _final(method: str, space: dict, acc: float = 0.8) -> Record:
    return Record(protocol="smalldata", dataset="digits", method=method, seed=0, split_hash="h", kind="final",
                  settings={"run_config": {"space": space}, "split": 0},
                  metrics={"balanced_accuracy": acc, "images_per_second": 10.0})


def test_every_searched_parameter_is_shown_with_its_range_and_scale():
    recs = [_final("ce", {"lr": {"loguniform": [1e-4, 0.1]}, "batch_size": {"choice": [10, 25, 50]},
                          "p": {"uniform": [0.0, 0.5]}}),
            _final("ce_untuned", {"lr": 0.1, "batch_size": 25})]
    rows = {(r["method"], r["parameter"]): r["searched"] for r in search_space_table(recs).rows}
    assert rows == {("ce", "lr"): "0.0001 to 0.1, log scale", ("ce", "batch_size"): "one of 10, 25, 50",
                    ("ce", "p"): "0 to 0.5, linear scale",
                    ("ce_untuned", "lr"): "fixed at 0.1", ("ce_untuned", "batch_size"): "fixed at 25"}
    html = "".join(smalldata_section(recs).parts)
    assert "log scale" in html and "fixed at 25" in html


def test_records_without_a_stored_space_leave_the_table_out():
    recs = [_final("ce", {})]
    assert search_space_table(recs).rows == []
    assert "Searched" not in "".join(smalldata_section(recs).parts)


def test_each_data_set_shows_its_own_space():
    recs = [_final("ce", {"batch_size": {"choice": [10, 25, 50]}}),
            Record(**{**_final("ce", {"batch_size": {"choice": [32, 64]}}).__dict__, "dataset": "cifair10"})]
    rows = {(r["dataset"], r["searched"]) for r in search_space_table(recs).rows}
    assert rows == {("digits", "one of 10, 25, 50"), ("cifair10", "one of 32, 64")}
