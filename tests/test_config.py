"""The typed run configuration (vistabench.config) and the flags generated from it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import pytest

from vistabench.config import NO_KEY_DEFAULT, Options, RunConfig, load_yaml_text, option, read_config_file
from vistabench.errors import InputError


@dataclass(frozen=True, kw_only=True)
class _Method(Options):
    alpha: float = option(1.5, help="alpha", low=0)
    heads: int = option(2, help="heads", low=1)


@dataclass(frozen=True, kw_only=True)
class _Cfg(RunConfig):
    protocol = "toy"
    data: str = option(help="dataset spec")
    method: Literal["ce", "focal"] = option("ce", help="method")
    lr: float = option(0.05, help="learning rate", low=0, low_open=True)
    epochs: int = option(10, help="epochs", low=1)
    milestones: tuple[int, ...] = option((), help="epochs", low=0)
    n_max: int | None = option(None, help="head count", low=1)
    augment: bool = option(False, help="augment")
    recipe: str = option("auto", help="recipe", choices=("auto", "cpu", "reference"), key_default="cpu")
    weight_decay: float = option(5e-4, help="wd", low=0, key_default=5e-4)
    method_options: _Method = option(default_factory=_Method, help="method options")
    device: str = option("cpu", help="device", runtime=True)

    @classmethod
    def resolve(cls, given: dict[str, Any]) -> dict[str, Any]:
        recipe = given.get("recipe", "auto")
        if recipe == "auto":
            recipe = "reference" if str(given.get("data", "")).startswith("cifar") else "cpu"
        preset = {"reference": {"lr": 0.1, "epochs": 200, "weight_decay": 2e-4}}.get(recipe, {})
        return {**preset, **given, "recipe": recipe}

    def check(self) -> None:
        if any(m >= self.epochs for m in self.milestones):
            raise InputError(f"milestones: every milestone must be < epochs ({self.epochs}), got {list(self.milestones)}")


def test_from_dict_coerces_strings_and_resolves_recipe():
    cfg = _Cfg.from_dict({"data": "digits", "lr": "0.1", "epochs": "3", "n-max": "7", "augment": "yes",
                          "milestones": "1 2"})
    assert (cfg.lr, cfg.epochs, cfg.n_max, cfg.augment, cfg.milestones) == (0.1, 3, 7, True, (1, 2))
    assert cfg.recipe == "cpu" and cfg.weight_decay == 5e-4
    ref = _Cfg.from_dict({"data": "cifar100:/x"})
    assert (ref.recipe, ref.lr, ref.epochs, ref.weight_decay) == ("reference", 0.1, 200, 2e-4)
    # the user's value wins over the preset
    assert _Cfg.from_dict({"data": "cifar100:/x", "lr": 0.3}).lr == 0.3


@pytest.mark.parametrize("values, message", [
    ({"data": "d", "lr": -1}, "lr: expected a number > 0, got -1"),
    ({"data": "d", "lr": "abc"}, "lr: expected a number, got 'abc'"),
    ({"data": "d", "lr": "nan"}, "lr: expected a finite number"),
    ({"data": "d", "lr": 1e39}, "lr: expected a number within float32's range (|x| <= 3.403e+38), got 1e+39"),
    ({"data": "d", "epochs": 2.5}, "epochs: expected an integer, got 2.5"),
    ({"data": "d", "epochs": True}, "epochs: expected an integer"),
    ({"data": "d", "method": "focall"}, "did you mean 'focal'"),
    ({"data": "d", "lrr": 1}, "lrr: unknown option; did you mean lr"),
    ({"data": "d", "n_max": 3, "n-max": 4}, "n_max: given twice"),
    ({"lr": 1}, "data: required"),
    ({"data": "d", "epochs": 3, "milestones": [5]}, "milestones: every milestone must be < epochs (3)"),
    ({"data": "d", "method_options": {"alpha": -1}}, "method_options.alpha: expected a number >= 0"),
    ({"data": "d", "method_options": {"alhpa": 1}}, "method_options.alhpa: unknown option; did you mean alpha"),
    ({"data": "d", "augment": "maybe"}, "augment: expected true or false"),
    ({"data": "d", "recipe": "gem"}, "recipe: expected one of auto, cpu, reference"),
])
def test_bad_values_name_the_field(values, message):
    with pytest.raises(InputError) as err:
        _Cfg.from_dict(values)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_to_dict_round_trips_and_key_drops_runtime_and_key_defaults():
    cfg = _Cfg.from_dict({"data": "digits", "method_options": {"alpha": 1}, "device": "cuda"})
    d = cfg.to_dict()
    assert d["method_options"] == {"alpha": 1.0, "heads": 2}
    assert list(d) == [i.name for i in _Cfg.fields_info()]
    again = _Cfg.from_dict(json.loads(json.dumps(d)))
    assert again == cfg
    key = cfg.key_dict()
    assert "device" not in key and "recipe" not in key and "weight_decay" not in key
    assert _Cfg.from_dict({"data": "cifar10:/x"}).key_dict()["recipe"] == "reference"
    # device does not change the key
    assert _Cfg.from_dict({"data": "digits", "device": "cuda"}).key_dict() == _Cfg.from_dict({"data": "digits"}).key_dict()
    assert _Cfg.field_info("recipe").key_default == "cpu"
    assert _Cfg.field_info("lr").key_default is NO_KEY_DEFAULT


def test_with_changes_resolves_the_recipe_again():
    cfg = _Cfg.from_dict({"data": "digits"})
    assert cfg.with_changes(data="cifar10:/x").lr == 0.1
    assert cfg.given() == {"data": "digits"}


def test_generated_flags_print_and_read_config(tmp_path, capsys):
    from vistabench.cli import main
    from vistabench.cli.verbs import add_run_verb, config_given, new_command_line, verb_group

    parser, sub = new_command_line(prog="t", description="toy", epilog="", version="t 1")
    add_run_verb(verb_group(sub, "toy", help="toy"), "run", _Cfg, run=lambda config, **kw: [], help="run")

    def printed(*argv: str) -> _Cfg:
        assert main(["toy", "run", *argv, "--print-config", "--json"], parser=parser) == 0
        return _Cfg.from_dict(json.loads(capsys.readouterr().out))

    cfg = printed("--data", "digits", "--lr", "0.2", "--milestones", "3", "4", "--augment",
                  "--method-options", "alpha=2", "heads=3")
    assert (cfg.lr, cfg.milestones, cfg.augment, cfg.method_options.alpha, cfg.method_options.heads) == (
        0.2, (3, 4), True, 2.0, 3)
    f = tmp_path / "c.json"
    f.write_text(json.dumps(cfg.to_dict()))
    assert printed("--config", str(f)) == cfg
    over = printed("--config", str(f), "--lr", "0.3", "--method-options", "heads=5")
    assert over.lr == 0.3 and over.method_options.heads == 5 and over.method_options.alpha == 2.0
    assert config_given(parser.parse_args(["toy", "run"])) == {}  # no default is passed off as given


def test_yaml_duplicate_keys_are_refused(tmp_path):
    with pytest.raises(InputError, match="key 'method' written twice"):
        load_yaml_text("method: [ce]\nmethod: [focal]\n", "x.yaml")
    with pytest.raises(InputError, match="line 3: key 'a' written twice"):
        load_yaml_text("fixed:\n  a: 1\n  a: 2\n", "x.yaml")
    f = tmp_path / "c.yaml"
    f.write_text("[1, 2]")
    with pytest.raises(InputError, match="expected a mapping"):
        read_config_file(f)
    f.write_text("a: [1\n")
    with pytest.raises(InputError, match="not valid YAML"):
        read_config_file(f)
    with pytest.raises(InputError, match="no such file"):
        read_config_file(tmp_path / "missing.yaml")


def test_check_value_is_the_option_rules_for_a_function_argument():
    import vistabench._validation as V
    from vistabench.config import check_value, parse_int
    from vistabench.errors import InputTypeError

    assert check_value("3", "epochs", type=int, low=1) == 3
    with pytest.raises(InputError, match=r"^lr: expected a number > 0, got 0.0$"):
        check_value(0, "lr", low=0, low_open=True)
    with pytest.raises(InputTypeError, match=r"^lr: expected a number, got 'x'$"):
        check_value("x", "lr")
    assert check_value(0, "n", low=0) == 0.0 and check_value(3.0, "n", type=int, low=0, low_open=True) == 3
    with pytest.raises(InputError, match=r"^f: expected a number <= 1, got 1.5$"):
        check_value(1.5, "f", low=0, high=1)
    # choices without a type: the value compared as given, close matches suggested
    with pytest.raises(InputError, match=r"^m: expected one of a, bb, got 'b'; did you mean 'bb'\?$"):
        check_value("b", "m", choices=["a", "bb"])
    assert check_value(None, "k", type=int | None, low=1) is None
    with pytest.raises(InputError, match=r"^k: expected a number >= 1, got 0$"):
        check_value(0, "k", type=int | None, low=1)
    with pytest.raises(InputError, match=r"^--k: expected an integer >= 1, got 0$"):
        parse_int("0", "--k", low=1)
    # one vocabulary: the scalar helpers that restated option()'s rules are gone
    assert not {"check_positive", "check_fraction", "check_choice", "check_int"} & set(dir(V))
    assert V.check_value is check_value


def test_trainconfig_fields_are_checked_by_their_option_declarations():
    pytest.importorskip("torch")
    from vistabench.learners.train_config import TrainConfig

    from vistabench.learners.recipe import Recipe

    meta = {name: f.metadata.get("vistabench") for name, f in Recipe.__dataclass_fields__.items()}
    assert meta["lr"]["low"] == 0 and meta["lr"]["low_open"] and meta["momentum"]["high"] == 1
    own = {name: f.metadata.get("vistabench") for name, f in TrainConfig.__dataclass_fields__.items()}
    assert all(m is not None for name, m in own.items() if name not in ("augment", "recipe"))  # every field declared
    for kw, message in ((dict(epochs=0), "^epochs: expected a number >= 1, got 0$"),
                        (dict(schedule="cosin"), "^schedule: expected one of cosine, step, warmup-cosine, cosine_epoch"),
                        (dict(schedule="warmup-cosine"), "^schedule: the trainer runs cosine, step, cosine_epoch"),
                        (dict(schedule="step", lr_milestones=(1,)), "^lr_factors: expected one factor per milestone"),
                        (dict(warmup_epochs=10, epochs=10), "^warmup_epochs: expected fewer than epochs=10"),
                        (dict(batch_size=1), "^batch_size: expected a number >= 2, got 1"),
                        (dict(eval_batch_size=0), "^eval_batch_size: expected a number >= 1, got 0")):
        with pytest.raises(InputError, match=message):
            TrainConfig(**kw)
    cfg = TrainConfig(epochs=2.0, schedule="step", lr_milestones=[1], lr_factors=[0.1])
    assert cfg.lr_milestones == (1,) and cfg.recipe.lr_milestones == (1,) and cfg.recipe == Recipe(
        epochs=2, schedule="step", lr_milestones=(1,), lr_factors=(0.1,))


# ---------------------------------------------------------------------- integers a user cannot mean (issue 32)
@dataclass(frozen=True, kw_only=True)
class _Ints(Options):
    seed: int = option(0, help="seed")
    offset: int = option(0, help="may be negative", low=-100)
    name: str = option("x", help="a name")
    rate: float = option(1.0, help="a rate")


@pytest.mark.parametrize("yaml_text,message", [
    ("seed: 010", "seed: '010' has a leading zero"),       # YAML 1.1 octal 8
    ("seed: 0x10", "seed: expected an integer, got '0x10'"),
    ("seed: 0b11", "seed: expected an integer, got '0b11'"),
    ("seed: 1:30", "seed: expected an integer, got '1:30'"),  # YAML 1.1 base 60: 90
    ("seed: 1.0e+30", "seed: expected an integer between"),
    ("seed: 2147483648", "seed: expected an integer between"),
    ("seed: -1", "seed: expected a number >= 0"),            # an integer without `low` is never negative
    ("seed: 1.5", "seed: expected an integer, got 1.5"),
    ("seed: yes", "seed: expected an integer, got True"),
    ("offset: -101", "offset: expected a number >= -100"),
    ("rate: 010", "rate: '010' has a leading zero"),
])
def test_yaml_integers_that_cannot_mean_what_was_written(yaml_text, message):
    with pytest.raises(InputError, match=message):
        _Ints.from_dict(load_yaml_text(yaml_text, "c.yaml"))


def test_plain_integers_and_strings_are_kept_as_written():
    cfg = _Ints.from_dict(load_yaml_text("seed: 1_000\noffset: -5\nname: 007\nrate: 0.5", "c.yaml"))
    assert (cfg.seed, cfg.offset, cfg.name, cfg.rate) == (1000, -5, "007", 0.5)  # 007 stays a string, not 7
    assert _Ints.from_dict({"seed": "10", "offset": "-0"}).seed == 10
    assert _Ints.field_info("seed").low == 0 and _Ints.field_info("offset").low == -100
    with pytest.raises(InputError, match="seed: '010' has a leading zero"):
        _Ints.from_dict({"seed": "010"})  # from a command line too


def test_every_integer_field_of_every_protocol_is_bounded():
    """No protocol declares an integer field that takes negative numbers or more than int32."""
    from vistabench.config import INT_LIMIT, base_type
    from vistabench.suite import protocols

    for p in protocols():
        for info in p.part("config").fields_info():
            if base_type(info.type) is int:
                assert info.low is not None and info.low >= 0, (p.name, info.name)
                with pytest.raises(InputError, match=info.name):
                    p.part("config").from_dict({info.name: INT_LIMIT + 1})


def test_from_checked_skips_the_field_checks_and_keeps_the_rules_across_fields():
    """Options.from_checked: values another declaration checked (a run config's fields handed to the
    evaluation) are not checked again; the rules across fields still are, defaults fill the rest."""
    from vistabench.metrics.detection_options import EvaluationOptions

    built = EvaluationOptions.from_checked(iou_type="segm", dets_per_class=7)
    assert built == EvaluationOptions(iou_type="segm", dets_per_class=7)
    assert built.variants == ("old", "fixed", "pool") and built.max_dets_per_image is None
    with pytest.raises(InputError, match="^kpt_oks_sigmas: only used with `iou_type` keypoints"):
        EvaluationOptions.from_checked(kpt_oks_sigmas=(0.1,))  # check(): a rule across fields
    with pytest.raises(TypeError, match="'dets' is not a field"):
        EvaluationOptions.from_checked(dets=3)  # a bug of ours, not a user's mistake
