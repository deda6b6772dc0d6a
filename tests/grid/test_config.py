"""Grid configs: validation, expansion, canonical cell keys (no training here)."""

import pytest

from vistabench.errors import InputError
from vistabench.grid import canonical_options, cell_key, load_config, parse_config

BASE = {"protocol": "longtail", "fixed": {"data": "digits", "imbalance": 10, "epochs": 1},
        "grid": {"method": ["ce", "ldam_drw"], "seed": [0, 1]}}


def test_cells_are_the_product_in_written_order():
    cells = parse_config(BASE).cells()
    assert [c.varied for c in cells] == [{"method": m, "seed": s} for m in ("ce", "ldam_drw") for s in (0, 1)]
    assert all(c.options["data"] == "digits" and c.options["epochs"] == 1 for c in cells)
    assert len({c.key for c in cells}) == 4


def test_key_is_canonical_dash_underscore_types_and_defaults():
    a = canonical_options("longtail", {"data": "digits", "method": "ce", "imbalance": 10, "n_max": 50})
    b = canonical_options("longtail", {"data": "digits", "method": "ce", "imbalance": "10.0", "n-max": "50",
                                       "epochs": 10, "batch_size": 128})  # 10 and 128 are the CLI defaults
    assert a == b and a["imbalance"] == 10.0 and a["epochs"] == 10
    assert cell_key("longtail", a) == cell_key("longtail", b)
    c = canonical_options("longtail", {"data": "digits", "method": "ce", "imbalance": 10, "n_max": 51})
    assert cell_key("longtail", c) != cell_key("longtail", a)
    # where a run goes never changes what it computes: not in the key
    assert "store" not in a and "out" not in a and "json" not in a


def test_unknown_option_suggests_close_names():
    cfg = parse_config({**BASE, "fixed": {**BASE["fixed"], "epoch": 1}})
    with pytest.raises(InputError, match=r"'epoch'.*did you mean epochs"):
        cfg.cells()


@pytest.mark.parametrize("fixed, message", [
    ({"data": "digits", "imbalance": "ten", "epochs": 1}, r"longtail options: argument --imbalance: invalid float"),
    ({"data": "digits", "epochs": 1}, r"required: --imbalance"),
    ({"data": "digits", "imbalance": 10, "store": "x.sqlite"}, r"'store': set by the grid"),
    ({"data": "digits", "imbalance": 10, "points": [1, 2]}, r"'points': expected one value"),
])
def test_bad_options_are_one_line_input_errors(fixed, message):
    with pytest.raises(InputError, match=message) as exc:
        parse_config({**BASE, "fixed": fixed}).cells()
    assert "\n" not in str(exc.value)


def test_flags_and_lists_follow_the_cli_actions():
    o = canonical_options("incremental", {"data": "digits", "method": "prototype", "compat": True})
    assert o["compat"] is True
    with pytest.raises(InputError, match="expected true or false"):
        canonical_options("incremental", {"data": "digits", "method": "prototype", "compat": "yes"})
    o = canonical_options("smalldata", {"dataset": "digits", "method": "ce", "split": [0, 2]})
    assert o["split"] == [0, 2]


@pytest.mark.parametrize("data, message", [
    ({**BASE, "protocol": "longtial"}, r"unknown protocol 'longtial'; did you mean 'longtail'"),
    ({k: v for k, v in BASE.items() if k != "protocol"}, "missing 'protocol'"),
    ({**BASE, "grid": {"seed": 3}}, "must be a non-empty list"),
    ({**BASE, "grid": {"seed": []}}, "must be a non-empty list"),
    ({**BASE, "grid": {"epochs": [1, 2]}}, "'epochs' is both fixed and in the grid"),
    ({**BASE, "seeds": [0]}, "unknown key 'seeds'"),
    ([1, 2], "expected a mapping"),
])
def test_bad_configs(data, message):
    with pytest.raises(InputError, match=message):
        parse_config(data)


def test_same_run_twice_in_a_grid_is_refused():
    cfg = parse_config({**BASE, "grid": {"seed": [0, "0"]}, "fixed": {**BASE["fixed"], "method": "ce"}})
    with pytest.raises(InputError, match="are the same run"):
        cfg.cells()


def test_load_yaml_and_json_files(tmp_path):
    (tmp_path / "g.yaml").write_text("protocol: longtail\nfixed: {data: digits, imbalance: 10}\n"
                                     "grid:\n  method: [ce]\n  seed: [0, 1]\n")
    cfg = load_config(tmp_path / "g.yaml")
    assert cfg.name == "g" and len(cfg.cells()) == 2
    (tmp_path / "g.json").write_text('{"protocol": "longtail", "fixed": {"data": "digits", "imbalance": 10,'
                                     ' "method": "ce"}}')
    assert len(load_config(tmp_path / "g.json").cells()) == 1  # no grid: one cell
    (tmp_path / "bad.yaml").write_text("protocol: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_config(tmp_path / "bad.yaml")
    with pytest.raises(InputError, match="no such file"):
        load_config(tmp_path / "missing.yaml")


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


def test_cases_vary_options_together():
    cfg = parse_config({"protocol": "smalldata", "fixed": {"method": "ce"},
                        "grid": {"cases": [{"dataset": "cub200", "root": "data/cub"},
                                           {"dataset": "eurosat", "root": "data/eurosat"}], "seed": [0, 1]}})
    cells = cfg.cells()
    assert [(c.options["dataset"], c.options["root"], c.options["seed"]) for c in cells] == [
        ("cub200", "data/cub", 0), ("cub200", "data/cub", 1), ("eurosat", "data/eurosat", 0),
        ("eurosat", "data/eurosat", 1)]
    assert cells[0].label() == "dataset=cub200, root=data/cub, seed=0"
    with pytest.raises(InputError, match="'root' is both fixed and in the grid"):
        parse_config({"protocol": "smalldata", "fixed": {"root": "x"}, "grid": {"cases": [{"root": "y"}]}})
    with pytest.raises(InputError, match="each of grid 'cases' must be a mapping"):
        parse_config({"protocol": "smalldata", "grid": {"cases": ["cub200"]}})


def test_engine_options_inside_a_run_are_not_part_of_the_key():
    sd = {"dataset": "digits", "method": "ce"}
    assert cell_key("smalldata", canonical_options("smalldata", {**sd, "max_parallel": 4})) == \
        cell_key("smalldata", canonical_options("smalldata", sd))
    # smalldata's engine also picks the search backend (Optuna or Ray Tune): it stays in the key
    assert cell_key("smalldata", canonical_options("smalldata", {**sd, "engine": "ray"})) != \
        cell_key("smalldata", canonical_options("smalldata", sd))
    st = {"stream": "embedded", "learner": "indep"}
    assert cell_key("stream", canonical_options("stream", {**st, "engine": "ray", "max_parallel": 2})) == \
        cell_key("stream", canonical_options("stream", st))
