"""The one training recipe (learners/recipe.py): declared once, embedded by every training protocol's
config, checked by one rule, and handed to the trainer whole."""

from __future__ import annotations

import json

import pytest

from vistabench.cli import main
from vistabench.errors import InputError
from vistabench.grid.protocols import config_class
from vistabench.learners.recipe import RECIPE, TRAINER_FIELDS, check_recipe, training_recipe, use

TRAINING = ("longtail", "incremental", "smalldata", "stream")
#: the smallest valid config of each training protocol
GIVEN = {
    "longtail": {"data": "digits", "method": "ce", "imbalance": 10},
    "incremental": {"data": "digits", "method": "prototype", "base_classes": 4, "way": 2, "shot": 3},
    "smalldata": {"dataset": "digits", "method": "ce"},
    "stream": {"stream": "embedded"},
}


def _config(protocol, **changes):
    return config_class(protocol).from_dict({**GIVEN[protocol], **changes})


# ---------------------------------------------------------------------------------- declared once
@pytest.mark.parametrize("protocol", TRAINING)
def test_every_recipe_field_of_a_protocol_is_the_one_declaration(protocol):
    """Range, runtime-only, key default, metavar: as declared in RECIPE (a protocol sets only its
    default, its help, a subset of the choices and its flags)."""
    cls = config_class(protocol)
    assert {"model", "pretrained", "precision", "compile", "device", "devices", "loader", "workers"} <= set(
        cls.recipe_fields)
    for name in cls.recipe_fields:
        info, decl = cls.field_info(name), RECIPE[name]
        for key in ("low", "high", "low_open", "runtime", "metavar"):
            assert getattr(info, key) == decl.kwargs.get(key, _option_default(key)), (protocol, name, key)
        assert repr(info.key_default) == repr(decl.kwargs.get("key_default", info.key_default)), (protocol, name)
        if "key_default" not in decl.kwargs:
            assert repr(info.key_default) == "NO_KEY_DEFAULT", (protocol, name)


def _option_default(key):
    return {"low": None, "high": None, "low_open": False, "runtime": False, "metavar": None}[key]


def test_a_protocol_narrows_choices_and_sets_defaults_but_cannot_invent_fields():
    Base = training_recipe(epochs=use(3, help="epochs here"), schedule=use("cosine", choices=("cosine",)),
                           model=None)
    info = Base.field_info("epochs")
    assert (info.default, info.help, info.low) == (3, "epochs here", 1)
    assert Base.field_info("model").default is None  # None as a default makes the field optional
    with pytest.raises(TypeError, match="not a recipe field"):
        training_recipe(learning_rate=0.1)
    with pytest.raises(TypeError, match="has no choice"):
        training_recipe(schedule=use("cosine", choices=("linear",)))


# ------------------------------------------------------------------------------------ checked once
BAD = [
    ({"schedule": "step", "epochs": 5, "lr_milestones": [2, 5], "lr_factors": [0.1, 0.1]},
     r"^lr_milestones: expected 0-based epochs before epochs=5 \(the lr never reaches a milestone at 5\), got \[2, 5\]"),
    ({"schedule": "step", "epochs": 5, "lr_milestones": [3, 2], "lr_factors": [0.1, 0.1]},
     r"^lr_milestones: expected increasing epochs, got \[3, 2\]"),
    ({"schedule": "step", "epochs": 5, "lr_milestones": [2, 2], "lr_factors": [0.1, 0.1]},
     r"^lr_milestones: expected increasing epochs, got \[2, 2\]"),
    ({"schedule": "step", "epochs": 5, "lr_milestones": [2], "lr_factors": []},
     r"^lr_factors: expected one factor per milestone \(1\), got 0"),
    ({"schedule": "step", "epochs": 5, "lr_milestones": []}, r"^lr_milestones: the step schedule needs at least one milestone epoch"),
    ({"schedule": "cosine", "epochs": 5, "lr_milestones": [2], "lr_factors": [0.1]},
     r"^lr_milestones: only the step schedule uses milestones"),
    ({"schedule": "step", "epochs": 5, "lr_milestones": [-1], "lr_factors": [0.1]},
     r"^lr_milestones: expected a number >= 0, got -1"),
    ({"epochs": 3, "warmup_epochs": 3}, r"^warmup_epochs: expected fewer than epochs=3, got 3"),
    ({"device": "gpu"}, r"^device: expected 'cpu', 'cuda', 'cuda:N' or 'auto', got 'gpu'"),
    ({"precision": "fp16"}, r"^precision: fp16 needs a CUDA device \(device is cpu\)"),
    ({"compile": True}, r"^compile: true needs a CUDA device"),
    ({"devices": 0}, r"^devices: expected a number >= 1, got 0"),
    ({"workers": -1}, r"^workers: expected a number >= 0, got -1"),
    ({"loader": "disk"}, r"^loader: expected one of memory, stream, device, got 'disk'"),
    ({"pretrained": "w.txt"}, r"^pretrained: expected a \.safetensors"),
    ({"model": "no_such_module_xyz:net"}, r"^model: cannot import module 'no_such_module_xyz'"),
]


CASES = [(p, bad, message) for p in TRAINING for bad, message in BAD
         if set(bad) <= set(config_class(p).recipe_fields)]


@pytest.mark.parametrize("protocol, bad, message", CASES)
def test_one_rule_and_one_message_in_every_protocol(protocol, bad, message):
    """The same mistake gets the same message in every protocol that has the fields (one check)."""
    with pytest.raises(InputError, match=message):
        _config(protocol, **bad)


def test_the_rules_cover_every_training_protocol():
    assert {p for p, _, _ in CASES} == set(TRAINING)
    assert {p for p, bad, _ in CASES if "lr_milestones" in bad} == {"longtail", "incremental"}


def test_milestones_are_0_based_in_every_protocol():
    """Milestone 0 (the lr scaled from the first epoch) and epochs - 1 are valid wherever milestones
    exist; incremental's once refused 0 (same semantics: lr x factor from 0-based epoch m on)."""
    for protocol in ("longtail", "incremental"):
        cfg = _config(protocol, epochs=4, schedule="step", lr_milestones=[0, 3], lr_factors=[0.5, 0.1])
        assert cfg.lr_milestones == (0, 3)
    check_recipe({"epochs": 4, "schedule": "step", "lr_milestones": (0, 3), "lr_factors": (0.5, 0.1)})


def test_check_recipe_skips_the_fields_a_protocol_has_not():
    check_recipe({"momentum": 0.9})  # no epochs, no milestones: nothing across fields to check
    with pytest.raises(InputError, match="^lr_factors: expected one factor per milestone"):
        check_recipe({"lr_factors": (0.1,)})


# ----------------------------------------------------------------------------- taken whole
def test_train_config_from_recipe_takes_the_trainer_fields_and_the_stage_wins():
    from vistabench.learners.trainer import TrainConfig

    cfg = _config("longtail", momentum=0.5, nesterov=True, weight_decay=1e-3, precision="bf16", loader="stream",
                  workers=2, epochs=4, lr=0.2)
    tc = TrainConfig.from_recipe(cfg, epochs=1, lr=0.01)
    assert {k: getattr(tc, k) for k in TRAINER_FIELDS} == {k: getattr(cfg, k) for k in TRAINER_FIELDS}
    assert (tc.epochs, tc.lr) == (1, 0.01)  # the stage's own
    assert TrainConfig.from_recipe({"momentum": 0.7}, weight_decay=0.0).momentum == 0.7
    with pytest.raises(TypeError, match="unknown field 'learning_rate'"):
        TrainConfig.from_recipe(cfg, learning_rate=0.1)


RUNS = {
    "longtail": ["longtail", "run", "--data", "digits", "--imbalance", "10", "--epochs", "1", "--method", "ce",
                 "--points", "2", "--repeats", "1", "--no-store"],
    "incremental": ["incremental", "run", "--data", "digits", "--base-classes", "4", "--way", "2", "--shot", "5",
                    "--method", "finetune", "--epochs", "1", "--novel-epochs", "1", "--no-store"],
    "smalldata": ["smalldata", "run", "--dataset", "digits", "--method", "ce", "--trials", "1", "--epochs", "1",
                  "--grace-period", "1", "--repeats", "1", "--split", "0", "--per-class", "20", "--no-store"],
    "stream": ["stream", "run", "--stream", "embedded", "--trials", "1", "--steps", "4", "--max-tasks", "1",
               "--no-store"],
}
RECIPE_FLAGS = ["--momentum", "0.5", "--nesterov", "--precision", "bf16", "--loader", "stream",
                "--workers", "0"]


@pytest.mark.parametrize("protocol", TRAINING)
def test_every_trainer_of_a_run_gets_the_recipe_whole(protocol, tmp_path, monkeypatch, capsys):
    """Every TrainConfig a run makes carries the config's optimizer, precision and loader."""
    from vistabench.learners import trainer as trainer_module

    made = []
    init = trainer_module.Trainer.__init__

    def recording(self, model, cfg, *args, **kwargs):
        made.append(cfg)
        init(self, model, cfg, *args, **kwargs)

    monkeypatch.setattr(trainer_module.Trainer, "__init__", recording)
    out = ["--work-dir", str(tmp_path / "w")] if protocol == "smalldata" else ["--out", str(tmp_path / "o")]
    assert main([*RUNS[protocol], *out, *RECIPE_FLAGS]) == 0, capsys.readouterr().err
    assert made  # these learners make only trainers that train
    for c in made:
        assert (c.momentum, c.nesterov, c.precision, c.loader, c.workers, c.devices) == (
            0.5, True, "bf16", "stream", 0, 1)


# ------------------------------------------------------------------------------------- printed
@pytest.mark.parametrize("protocol", TRAINING)
def test_print_config_shows_the_recipe_the_run_uses(protocol, capsys, tmp_path):
    out = ["--work-dir", str(tmp_path / "w")] if protocol == "smalldata" else ["--out", str(tmp_path / "o")]
    assert main([*RUNS[protocol], *out, "--print-config", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert {k: printed[k] for k in ("loader", "workers", "precision", "devices", "pretrained", "compile")} == {
        "loader": "memory", "workers": 0, "precision": "fp32", "devices": 1, "pretrained": None, "compile": False}
    assert isinstance(printed["model"], str) and printed["model"] not in ("", "auto")


def test_devices_stay_out_of_the_grid_key_at_1_and_loader_always():
    for protocol in TRAINING:
        base = _config(protocol).key_dict()
        assert _config(protocol, loader="stream", workers=2).key_dict() == base
        assert "devices" not in base and _config(protocol, devices=2).key_dict() == {**base, "devices": 2}


# ------------------------------------------------------------------------------ stream: model
def test_stream_model_reads_arch_as_its_older_spelling_and_keys_it_as_arch():
    old = _config("stream", arch="resnet18")
    assert old.model == "resnet18" and old.to_dict()["model"] == "resnet18" and "arch" not in old.to_dict()
    assert old.key_dict()["arch"] == "resnet18" and "model" not in old.key_dict()
    assert old.key_dict() == _config("stream", model="resnet18").key_dict()
    assert _config("stream", width=16).key_dict()["width"] == 16  # the width still resolves for cnn28
    with pytest.raises(InputError, match="^model: given twice"):
        _config("stream", arch="resnet18", model="cnn28")


def test_a_recipe_made_from_checked_values_checks_only_what_is_new():
    """Recipe.replace / TrainConfig.from_recipe / a config's to_recipe check a value once: what the
    recipe (or the config) already checked is kept, a new value is checked by its declaration, and the
    rules across fields run on the whole."""
    from vistabench.learners.recipe import Recipe, default_recipe
    from vistabench.learners.train_config import TrainConfig

    r = Recipe(epochs=4, lr=0.1)
    assert r.replace(epochs=6) == Recipe(epochs=6, lr=0.1)
    with pytest.raises(InputError, match="^epochs: expected"):
        r.replace(epochs=0)  # a new value: checked
    with pytest.raises(InputError, match="^warmup_epochs: expected fewer than epochs=4"):
        r.replace(warmup_epochs=4)  # the rule across fields: checked
    with pytest.raises(InputError, match="^lr: expected"):
        TrainConfig.from_recipe(r, lr=-1.0)  # a stage's own value: checked
    assert TrainConfig.from_recipe(r, epochs=2).recipe == Recipe(epochs=2)  # the trainer fields taken, rest default
    assert default_recipe() is default_recipe() and default_recipe() == Recipe()
    Base = training_recipe(epochs=use(None, help="epochs (a preset decides)"), lr=0.1)
    with pytest.raises(InputError, match="^epochs:"):
        Base().to_recipe()  # a field the config leaves open is the recipe's to check
    assert Base().to_recipe(epochs=3).epochs == 3
    with pytest.raises(InputError, match="^epochs:"):
        Base().to_recipe(epochs=0)
