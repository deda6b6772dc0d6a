"""One output convention (issue 20): a handler returns its result and never prints it; ``--json``
prints that result as one JSON document, otherwise the command's declared ``human`` formatter
renders it. Progress goes to stderr."""

from __future__ import annotations

import json

import pytest

from vistabench.cli import build_parser, main
from vistabench.cli.verbs import walk


def test_every_command_has_json_a_handler_and_a_human_formatter():
    leaves = list(walk(build_parser()))
    assert len(leaves) >= 40
    for leaf, verb in leaves:
        assert "--json" in verb.flags, " ".join(leaf)
        assert callable(verb.run), " ".join(leaf)
        assert callable(verb.human), " ".join(leaf)


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "a.json").write_text("[0.9, 0.8, 0.85]")
    (tmp_path / "b.json").write_text("[0.7, 0.6, 0.65]")
    return tmp_path


CASES = [
    (["longtail", "profile", "--classes", "4", "--n-max", "100", "--imbalance", "10"], "100 46 21 10"),
    (["stats", "welch", "--a", "{t}/a.json", "--b", "{t}/b.json"], "Welch's t-test (two-sided)"),
    (["detection", "synth", "--out", "{t}/syn", "--images", "5", "--categories", "3"], "annotations) and"),
    (["incremental", "reference", "--preset", "cifar100"], "Greedy-NF"),
    (["stream", "list"], "Learners:"),
]


@pytest.mark.parametrize("argv,human", CASES, ids=[f"{c[0][0]}-{c[0][1]}" for c in CASES])
def test_json_is_the_result_and_human_its_rendering(capsys, files, argv, human):
    argv = [a.replace("{t}", str(files)) for a in argv]
    assert main(argv + ["--json"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out)  # stdout holds exactly one JSON document
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert human in text and not text.lstrip().startswith(("{", "["))
    args = build_parser().parse_args(argv)
    assert text.rstrip("\n") == args.human(result)  # the declared formatter of that very result


def test_tables_render_by_format_and_give_columns_and_rows_as_json(capsys, tmp_path):
    store = tmp_path / "s.sqlite"
    argv = ["detection", "synth", "--out", str(tmp_path / "syn"), "--images", "5", "--categories", "3"]
    assert main(argv) == 0
    assert main(["detection", "score", "--gt", str(tmp_path / "syn" / "gt.json"), "--results",
                 str(tmp_path / "syn" / "results.json"), "--store", str(store), "--method", "m1"]) == 0
    capsys.readouterr()
    assert main(["detection", "table", "--store", str(store), "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert set(table) == {"columns", "rows", "caption"} and table["rows"][0]["method"].startswith("m1")
    assert table["columns"][0] == "n" and table["rows"][0]["n"] == 1 and "SD" in table["caption"]
    assert main(["detection", "table", "--store", str(store), "--format", "csv"]) == 0
    csv = capsys.readouterr().out
    assert csv.splitlines()[1].startswith("m1") and "|" not in csv
    assert main(["report", "--out", str(tmp_path / "rep"), "--store", str(store), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"report": str(tmp_path / "rep" / "index.html")}


def test_a_grid_with_a_failed_cell_exits_1_after_printing_its_summary(capsys, tmp_path):
    (tmp_path / "x.json").write_text("[]")
    cfg = tmp_path / "g.yaml"
    cfg.write_text(f"protocol: longtail\nfixed: {{data: 'npz:{tmp_path / 'x.json'}', imbalance: 10, epochs: 1}}\n"
                   "grid: {method: [ce]}\n")
    assert main(["grid", "run", str(cfg), "--store", str(tmp_path / "g.sqlite"), "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["failed"] == 1
    assert main(["grid", "run", str(cfg), "--store", str(tmp_path / "g.sqlite")]) == 1
    out, err = capsys.readouterr()
    assert out.strip() == "cells 1: ran 1, skipped 0, failed 1"


def test_a_staged_smalldata_verb_refuses_another_stage(capsys):
    argv = ["smalldata", "tune", "--dataset", "digits", "--method", "ce", "--print-config", "--json"]
    assert main(argv + ["--stages", "final"]) == 2
    err = capsys.readouterr().err
    assert err == "vistabench: error: --stages: `smalldata tune` runs stages 'tune', got 'final'; use `run`\n"
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["stages"] == "tune"
