"""Grid configs: validation, expansion into typed configs, canonical cell keys (no training here)."""

import subprocess
import sys
import time

import pytest

from vistabench.errors import InputError
from vistabench.grid import MAX_CELLS, canonical_options, cell_key, load_config, parse_config

TOY = {"protocol": "toy", "fixed": {"n_max": 7}, "grid": {"method": ["a", "b"], "seed": [0, 1]}}


def test_cells_are_typed_configs_in_written_order(toy):
    cells = parse_config(TOY).cells()
    assert [c.varied for c in cells] == [{"method": m, "seed": s} for m in ("a", "b") for s in (0, 1)]
    assert all(isinstance(c.config, toy.ToyConfig) and c.config.n_max == 7 for c in cells)
    # the cell's key is the config's key dict, hashed with the protocol
    assert all(c.canonical == c.config.key_dict() and c.key == cell_key("toy", c.config.key_dict()) for c in cells)
    assert len({c.key for c in cells}) == 4


def test_key_is_canonical_dash_underscore_types_defaults_and_runtime(toy):
    a = canonical_options("toy", {"method": "a", "n_max": 50})
    b = canonical_options("toy", {"method": "a", "n-max": "50", "seed": 0, "threads": 4, "device": "cuda"})
    assert a == b and a["n_max"] == 50 and "threads" not in a and "device" not in a
    assert cell_key("toy", canonical_options("toy", {"n_max": 51})) != cell_key("toy", a)


@pytest.mark.parametrize("fixed, message", [
    ({"n_maxx": 1}, r"cell method=a, seed=0: n_maxx: unknown option; did you mean n_max"),
    ({"n_max": "ten"}, r"n_max: expected an integer, got 'ten'"),
    ({"n_max": 0}, r"n_max: expected a number >= 1, got 0"),
    ({"store": "x.sqlite"}, r"store: set by the grid itself"),
    ({"n_max": 500}, r"cell method=b, seed=0: n_max: method b takes at most 100"),  # check() across fields
])
def test_bad_options_are_one_line_input_errors(toy, fixed, message):
    with pytest.raises(InputError, match=message) as exc:
        parse_config({**TOY, "fixed": fixed}).cells()
    assert "\n" not in str(exc.value)


def test_a_typo_in_the_third_cell_is_found_when_the_cells_are_built(toy):
    cfg = parse_config({"protocol": "toy", "grid": {"method": ["a", "b", "balanced_sofmax"]}})
    with pytest.raises(InputError, match=r"method=balanced_sofmax: method: expected one of .*did you mean "
                                         r"'balanced_softmax'"):
        cfg.cells()


@pytest.mark.parametrize("data, message", [
    ({**TOY, "fixed": {"n-max": 5, "n_max": 6}}, r"fixed: option 'n_max' given twice \('n-max' and 'n_max'\)"),
    ({**TOY, "grid": {"n-max": [5], "n_max": [6]}}, r"grid: option 'n_max' given twice"),
    ({**TOY, "grid": {"cases": [{"seed": 1, "n-max": 2, "n_max": 3}]}, "fixed": {}},
     r"grid 'cases': option 'n_max' given twice"),
    ({**TOY, "grid": {"n-max": [5]}}, r"option 'n_max' is both fixed and in the grid"),
    ({**TOY, "protocol": "longtial"}, r"unknown protocol 'longtial'; did you mean 'longtail'"),
    ({k: v for k, v in TOY.items() if k != "protocol"}, "missing 'protocol'"),
    ({**TOY, "grid": {"seed": 3}}, "must be a non-empty list"),
    ({**TOY, "grid": {"seed": []}}, "must be a non-empty list"),
    ({**TOY, "seeds": [0]}, "unknown key 'seeds'"),
    ([1, 2], "expected a mapping"),
])
def test_bad_configs(toy, data, message):
    with pytest.raises(InputError, match=message):
        parse_config(data)


def test_same_run_twice_in_a_grid_is_refused(toy):
    cfg = parse_config({**TOY, "grid": {"seed": [0, "0"]}})
    with pytest.raises(InputError, match="are the same run"):
        cfg.cells()
    cfg = parse_config({**TOY, "grid": {"threads": [1, 2]}})  # runtime-only: the same run
    with pytest.raises(InputError, match="are the same run"):
        cfg.cells()


def test_two_cells_under_one_run_id_are_refused(toy):
    cfg = parse_config({"protocol": "toy", "fixed": {"run_id": "r1"}, "grid": {"n_max": [5, 6]}})
    with pytest.raises(InputError, match="would both store under run_id 'r1'"):
        cfg.cells()
    ok = parse_config({"protocol": "toy", "grid": {"cases": [{"n_max": 5, "run_id": "r5"}, {"n_max": 6, "run_id": "r6"}]}})
    assert len(ok.cells()) == 2


def test_a_huge_grid_is_refused_before_it_is_expanded(toy):
    values = list(range(1000))
    cfg = parse_config({"protocol": "toy", "grid": {"seed": values, "n_max": [v + 1 for v in values],
                                                    "sleep": values}})
    assert cfg.size() == 10 ** 9
    t = time.perf_counter()
    with pytest.raises(InputError, match=rf"1,000,000,000 cells .*at most {MAX_CELLS:,}"):
        cfg.cells()
    assert time.perf_counter() - t < 1.0


def test_load_yaml_and_json_files(toy, tmp_path):
    (tmp_path / "g.yaml").write_text("protocol: toy\nfixed: {n_max: 3}\ngrid:\n  method: [a]\n  seed: [0, 1]\n")
    cfg = load_config(tmp_path / "g.yaml")
    assert cfg.name == "g" and len(cfg.cells()) == 2
    (tmp_path / "g.json").write_text('{"protocol": "toy", "fixed": {"method": "a"}}')
    assert len(load_config(tmp_path / "g.json").cells()) == 1  # no grid: one cell
    (tmp_path / "bad.yaml").write_text("protocol: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_config(tmp_path / "bad.yaml")
    with pytest.raises(InputError, match="no such file"):
        load_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize("text, line", [
    ("protocol: toy\ngrid:\n  method: [a]\n  method: [b]\n", 4),
    ("protocol: toy\nfixed: {seed: 1}\nfixed: {seed: 2}\n", 3),
])
def test_a_key_written_twice_in_the_yaml_is_refused(toy, tmp_path, text, line):
    (tmp_path / "dup.yaml").write_text(text)
    with pytest.raises(InputError, match=rf"line {line}: key '\w+' written twice"):
        load_config(tmp_path / "dup.yaml")


@pytest.mark.parametrize("name", ["longtail", "incremental", "smalldata", "stream", "detection"])
def test_every_example_config_is_valid(name):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "examples"
    files = sorted(root.glob(f"{name}*.yaml"))
    assert len(files) >= 2  # the full-scale table and its tiny variant
    for f in files:
        cfg = load_config(f)
        assert cfg.protocol == name and cfg.cells()


def test_module_doctests():
    import doctest

    import vistabench.grid

    assert doctest.testmod(vistabench.grid).failed == 0


def test_cases_vary_options_together(toy):
    cfg = parse_config({"protocol": "toy", "fixed": {"method": "a"},
                        "grid": {"cases": [{"n_max": 3, "run_id": "x"}, {"n_max": 4, "run_id": "y"}], "seed": [0]}})
    cells = cfg.cells()
    assert [(c.config.n_max, c.config.run_id, c.config.seed) for c in cells] == [(3, "x", 0), (4, "y", 0)]
    assert cells[0].label() == "n_max=3, run_id=x, seed=0"
    with pytest.raises(InputError, match="'n_max' is both fixed and in the grid"):
        parse_config({"protocol": "toy", "fixed": {"n_max": 1}, "grid": {"cases": [{"n_max": 2}]}})
    with pytest.raises(InputError, match="each of grid 'cases' must be a mapping"):
        parse_config({"protocol": "toy", "grid": {"cases": ["x"]}})


def test_importing_the_grid_imports_no_cli():
    code = "import sys, vistabench.grid; print(sorted(m for m in sys.modules if m.startswith('vistabench.cli')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_yaml_octal_or_negative_seed_in_a_grid_is_one_line(tmp_path):
    """YAML 1.1 reads 010 as octal 8: a grid refuses it (and a negative seed) naming the cell and field."""
    from vistabench.grid import load_config

    for bad, message in (("010", "seed: '010' has a leading zero"), ("-1", "seed: expected a number >= 0")):
        p = tmp_path / "g.yaml"
        p.write_text(f"protocol: stream\nfixed: {{stream: embedded}}\ngrid:\n  seed: [0, {bad}]\n")
        with pytest.raises(InputError, match=message):
            load_config(p).cells()
