"""The incremental run's typed config: grid cell keys of the examples, the fr presets equal to the
authors' run scripts, the lr schedules applied, --print-config / --config round trips."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from vistabench.cli import main
from vistabench.errors import InputError
from vistabench.grid.config import cell_key
from vistabench.protocols.incremental.config import IncrementalConfig
from vistabench.protocols.incremental.sessions import PRESETS

ROOT = Path(__file__).resolve().parents[2]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# ------------------------------------------------------------------------------- cell keys
#: the keys `vistabench grid status FILE --json` printed before the config existed (argparse defaults)
OLD_KEYS = {
    "incremental-tiny.yaml": {("prototype", 0): "a9ca0f0f1b2f21ed", ("prototype", 1): "d6539ea33948d266",
                              ("finetune", 0): "f4b43678dad2fa2c", ("finetune", 1): "49b4b8082a910f2a"},
    "incremental-cifar100.yaml": {
        ("prototype", 0): "5cae4ce509b2f2fd", ("prototype", 1): "bc7ec0fa7e028266",
        ("prototype", 2): "d916760e8830ac67", ("prototype", 3): "d74df481d05586cb",
        ("prototype", 4): "e97c41267289a1dc", ("finetune", 0): "e961d30f4c237f7c",
        ("finetune", 1): "e4dd0294a08201e8", ("finetune", 2): "bd51e09a680de0c7",
        ("finetune", 3): "32001933074cf5f6", ("finetune", 4): "159d3eb546f980f1"},
}


@pytest.mark.parametrize("example", sorted(OLD_KEYS))
def test_example_cell_keys_do_not_change(example: str) -> None:
    spec = yaml.safe_load((ROOT / "examples" / example).read_text())
    names = list(spec["grid"])
    for values in itertools.product(*(spec["grid"][n] for n in names)):
        cell = dict(zip(names, values))
        cfg = IncrementalConfig.from_dict({**spec["fixed"], **cell})
        assert cell_key("incremental", cfg.key_dict()) == OLD_KEYS[example][(cell["method"], cell["seed"])]


def test_key_dict_is_the_old_canonical_options() -> None:
    cfg = IncrementalConfig.from_dict({"data": "digits", "base_classes": 4, "way": 2, "shot": 5, "epochs": 2,
                                       "novel_epochs": 2, "method": "prototype", "seed": 0})
    assert cfg.key_dict() == {
        "base_classes": 4, "base_shot": None, "batch_size": 128, "compat": False, "data": "digits", "device": "cpu",
        "epochs": 2, "fr_ensemble": "logits", "fr_epochs": None, "fr_layers": None, "fr_recipe": "cpu",
        "fr_weights": None, "lr": 0.05, "method": "prototype", "model": None, "model_opt": [], "novel_epochs": 2,
        "novel_lr": 0.01, "num_sessions": None, "preset": None, "seed": 0, "sessions": None, "shot": 5, "tag": None,
        "way": 2}
    # a new recipe field away from today's value enters the key; model options keep their older list form
    changed = cfg.with_changes(weight_decay=1e-4, model="vit_small", model_opt={"dim": "48"}).key_dict()
    assert changed["weight_decay"] == 1e-4 and changed["model_opt"] == ["dim=48"]


#: FR cells' keys before FR's training options were renamed to the authors' ``_fr`` names (issue 38)
FR_OLD_KEYS = [
    ({}, "82e9b343dbea570b"),
    ({"fr_epochs": 3}, "16c91ae98688ecb1"),
    ({"method_options": {"epochs_fr": 3}}, "16c91ae98688ecb1"),
]


@pytest.mark.parametrize("extra, key", FR_OLD_KEYS)
def test_fr_cell_keys_do_not_change_with_the_fr_names(extra, key) -> None:
    cfg = IncrementalConfig.from_dict({"data": "mnist5k", "method": "fr", "base_classes": 5, "way": 1, "shot": 5,
                                       "epochs": 1, **extra})
    assert cell_key("incremental", cfg.key_dict()) == key
    assert "epochs" in cfg.key_dict()["method_options"] and "epochs_fr" in cfg.method_options  # keyed by the old names
    assert IncrementalConfig.from_dict(cfg.to_dict()).key_dict() == cfg.key_dict()


def test_a_stored_fr_config_from_before_the_fr_names_reads() -> None:
    """A config stored before the rename names FR's training options like the recipe's fields; it reads
    as the same run (the ``_fr`` names, the same key); a value under both names that differ is one error."""
    cfg = IncrementalConfig.from_dict({"data": "mnist5k", "method": "fr", "base_classes": 5, "way": 1, "shot": 5,
                                       "epochs": 1, "fr_epochs": 3})
    stored = cfg.to_dict()
    older = {"epochs_fr": "epochs", "lr_fr": "lr", "momentum_fr": "momentum", "milestones_fr": "lr_milestones",
             "lr_factors_fr": "lr_factors", "batch_size_fr": "batch_size"}
    stored["method_options"] = {older.get(k, k): v for k, v in stored["method_options"].items()}
    assert stored["method_options"]["epochs"] == 3 and stored["epochs"] == 1  # FR's 3 epochs, the base session's 1
    again = IncrementalConfig.from_dict(stored)
    assert again.method_options == cfg.method_options and again.key_dict() == cfg.key_dict()
    assert again.epochs == 1 and again.learner_options().epochs_fr == 3
    with pytest.raises(InputError, match=r"^method_options\.epochs_fr: given as epochs_fr=4 and under its older "
                                         r"name epochs=3; keep one$"):
        IncrementalConfig.from_dict({**stored, "method_options": {**stored["method_options"], "epochs_fr": 4}})
    with pytest.raises(InputError, match="^fr_epochs: says epochs_fr=5, method_options says 3; give one"):
        IncrementalConfig.from_dict({**stored, "fr_epochs": 5})


def test_preset_literal_matches_the_session_presets() -> None:
    from typing import get_args

    info = IncrementalConfig.field_info("preset")
    assert set(get_args(get_args(info.type)[0])) == set(PRESETS)


# ------------------------------------------------------------------------------- fr presets
#: The authors' scripts (iSEE-Laboratory/Revisting_FSCIL, runs/*.sh), value by value.
SCRIPT_VALUES = {
    "cifar100": {
        "layers": [7, 8, 9],   # runs/cifar100.sh: -fr_kl 0.5 -output_blocks 7 8 9 \
        "cr": 0.5,             # runs/cifar100.sh: -fr_kl 0.5 -output_blocks 7 8 9 \
        "ce_novel": 2.0,       # runs/cifar100.sh: -fr_ce_novel 2 \
        "eps": 1e-6,           # (no -eps: train.py parser.add_argument('-eps', type=float, default=1e-6))
    },
    "mini_imagenet": {
        "layers": [8, 9, 10],  # runs/miniImageNet.sh: -fr_kl 0.1 -output_blocks 8 9 10 \
        "cr": 0.1,             # runs/miniImageNet.sh: -fr_kl 0.1 -output_blocks 8 9 10 \
        "ce_novel": 0.5,       # runs/miniImageNet.sh: -fr_ce_novel 0.5 \
        "eps": 1e-6,           # (no -eps: train.py default 1e-6)
    },
    "cub200": {
        "layers": [8, 9, 10],  # runs/cub200.sh: -fr_kl 1 -output_blocks 8 9 10 \
        "cr": 1.0,             # runs/cub200.sh: -fr_kl 1 -output_blocks 8 9 10 \
        "ce_novel": 0.5,       # runs/cub200.sh: -fr_ce_novel 0.5 \
        "eps": 1e-5,           # runs/cub200.sh: -eps 1e-5
    },
}
#: What all three scripts set alike.
SCRIPT_COMMON = {
    "epochs_fr": 100,       # -epochs_fr 100 \
    "batch_size_fr": 1024,  # -batch_size_fr 1024 \
    "p": 32, "k": 32,       # -p 32 \  -k 32 \
    "cos": 0.1,             # -fr_cos 0.1 \
    "ir_intra": 1.0,        # -rkd_intra 1 \
    "ir_inter": 1.0,        # -rkd_inter 1 \
    "lr_fr": 0.1,           # train.py: parser.add_argument('-lr_fr', type=float, default=0.1)
    "milestones_fr": [60, 70, 80, 90],  # train.py: parser.add_argument('-milestones_fr', ..., default=[60, 70, 80, 90])
    "lr_factors_fr": [0.1, 0.01, 0.001, 0.0001],  # train.py: parser.add_argument('-gamma_fr', ..., default=0.1)
    "momentum_fr": 0.9, "dampening": 0.9,  # helper.py: SGD(..., lr=args.lr_fr, momentum=0.9, dampening=0.9, weight_decay=0)
    "k_nearest": 2,         # train.py: parser.add_argument('-K', type=int, default=2, help='free lunch k')
    "temperature": 16.0,    # train.py: parser.add_argument('-temperature', type=int, default=16)
    "samples_per_class": 600,  # helper.py: TensorAugDataset4.__len__: return 600 * self.num_cls
}


@pytest.mark.parametrize("preset", sorted(SCRIPT_VALUES))
def test_fr_paper_preset_equals_the_authors_script(capsys, preset: str) -> None:
    data = "cifar100:DIR" if preset == "cifar100" else "folder:DIR"  # a data spec a reader takes (checked)
    rc, out, err = run_cli(capsys, "incremental", "run", "--data", data, "--method", "fr", "--preset", preset,
                           "--fr-recipe", "paper", "--print-config", "--json")
    assert rc == 0, err
    mo = json.loads(out)["method_options"]
    assert mo["script"] == preset and mo["recipe"] == "paper" and mo["depth"] == 12
    for key, want in {**SCRIPT_VALUES[preset], **SCRIPT_COMMON}.items():
        assert mo[key] == pytest.approx(want), key


@pytest.mark.parametrize("preset", sorted(SCRIPT_VALUES))
def test_fr_cpu_recipe_keeps_the_scripts_losses(capsys, preset: str) -> None:
    rc, out, _ = run_cli(capsys, "incremental", "run", "--data", "digits", "--method", "fr", "--preset", preset,
                         "--print-config", "--json")
    mo = json.loads(out)["method_options"]
    assert rc == 0 and mo["depth"] == 6  # the CPU ViT: the script's blocks counted from the last one
    assert mo["layers"] == [b - 6 for b in SCRIPT_VALUES[preset]["layers"]]
    for key in ("cr", "ce_novel", "eps"):
        assert mo[key] == SCRIPT_VALUES[preset][key]
    assert (mo["epochs_fr"], mo["batch_size_fr"], mo["p"], mo["hidden"], mo["milestones_fr"]) == (
        20, 256, 16, 128, [12, 14, 16, 18])


def test_fr_without_preset_follows_the_mini_imagenet_script_and_user_values_win() -> None:
    cfg = IncrementalConfig.from_dict({"data": "digits", "base_classes": 4, "way": 2, "shot": 5, "method": "fr",
                                       "method_options": {"cr": "0.7", "layers": [0, 1]}, "fr_epochs": 3})
    mo = cfg.method_options
    assert mo["script"] == "mini_imagenet" and mo["cr"] == 0.7 and mo["layers"] == [0, 1] and mo["epochs_fr"] == 3
    assert mo["milestones_fr"] == [2, 3] and mo["lr_factors_fr"] == [0.1, 0.01]  # 60..90 % of 3 epochs, deduplicated
    assert cfg.fr_epochs == 3 and cfg.fr_layers == (0, 1)  # the older spellings show method_options' values
    again = IncrementalConfig.from_dict(cfg.to_dict())
    assert again == cfg and again.key_dict() == cfg.key_dict()
    with pytest.raises(InputError, match="method_options.depth: the backbone has 6 blocks"):
        IncrementalConfig.from_dict({**cfg.to_dict(), "method_options": {**mo, "depth": 12}})


def test_print_config_is_fast_and_imports_no_torch() -> None:
    code = ("import sys, time; t = time.perf_counter(); from vistabench.cli import main; "
            "rc = main(['incremental', 'run', '--data', 'cifar100:/nowhere', '--method', 'fr', '--preset', 'cub200', "
            "'--print-config', '--json']); "
            "assert rc == 0 and 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)[:3]; "
            "print(time.perf_counter() - t, file=sys.stderr)")
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    assert time.perf_counter() - t0 < 3.0
    assert json.loads(res.stdout)["method_options"]["eps"] == 1e-5


# ------------------------------------------------------------------------------- schedules
def test_base_session_step_schedule_applied_equals_the_config() -> None:
    from vistabench.data import load_dataset
    from vistabench.learners.incremental import IncrementalContext
    from vistabench.learners.incremental.baselines import FinetuneLearner

    cfg = IncrementalConfig.from_dict({"data": "digits", "base_classes": 4, "way": 1, "shot": 3, "method": "finetune",
                                       "epochs": 5, "lr": 0.1, "warmup_epochs": 1, "schedule": "step",
                                       "lr_milestones": [2, 4], "lr_factors": [0.1, 0.01], "batch_size": 64,
                                       "novel_epochs": 2, "nesterov": True, "weight_decay": 1e-4})
    tr = load_dataset("digits").train
    ctx = IncrementalContext(model="cnn28", in_channels=1, image_size=8, epochs=cfg.epochs, lr=cfg.lr,
                             warmup_epochs=cfg.warmup_epochs, schedule=cfg.schedule, lr_milestones=cfg.lr_milestones,
                             lr_factors=cfg.lr_factors, batch_size=cfg.batch_size, novel_epochs=cfg.novel_epochs,
                             nesterov=cfg.nesterov, weight_decay=cfg.weight_decay)
    learner = FinetuneLearner(ctx)
    base = np.flatnonzero(tr.labels < 4)[:128]  # 2 steps per epoch
    learner.learn(tr.images[base], tr.labels[base], [0, 1, 2, 3], session=1)
    res = learner.train_results[0]
    # epoch 1 warms up linearly (its last step at the full lr), then lr x factor from each milestone on
    assert [h["lr"] for h in res.history] == pytest.approx([0.1, 0.1, 0.01, 0.01, 0.001])
    assert res.config["nesterov"] is True and res.config["weight_decay"] == 1e-4 and res.config["momentum"] == 0.9
    shots = np.flatnonzero(tr.labels == 4)[:3]
    learner.learn(tr.images[shots], tr.labels[shots], [4], session=2)
    novel = learner.train_results[1].history  # novel sessions: a cosine from novel_lr to 0
    assert novel[0]["lr"] == pytest.approx(0.01) and novel[-1]["lr"] < 0.01


def test_schedule_fields_are_checked() -> None:
    base = {"data": "digits", "base_classes": 4, "way": 1, "shot": 3, "method": "prototype", "epochs": 5}
    with pytest.raises(InputError, match=r"lr_milestones: expected 0-based epochs before epochs=5 .*, got \[2, 5\]"):
        IncrementalConfig.from_dict({**base, "schedule": "step", "lr_milestones": [2, 5], "lr_factors": [0.1, 0.01]})
    with pytest.raises(InputError, match="lr_factors: expected one factor per milestone"):
        IncrementalConfig.from_dict({**base, "schedule": "step", "lr_milestones": [2], "lr_factors": [0.1, 0.01]})
    with pytest.raises(InputError, match="lr_milestones: expected increasing epochs"):
        IncrementalConfig.from_dict({**base, "schedule": "step", "lr_milestones": [3, 2], "lr_factors": [0.1, 0.01]})
    with pytest.raises(InputError, match="sessions: the sessions file already fixes the layout; drop base_classes"):
        IncrementalConfig.from_dict({**base, "sessions": "s.json"})
    with pytest.raises(InputError, match=r"way: 1 contradicts preset cifar100 \(5\)"):
        IncrementalConfig.from_dict({**base, "base_classes": None, "preset": "cifar100"})


# ------------------------------------------------------------------------------- round trip
def test_config_file_from_print_config_gives_the_same_record_settings(capsys, tmp_path) -> None:
    flags = ["--data", "digits", "--base-classes", "8", "--way", "1", "--shot", "3", "--base-shot", "20",
             "--method", "prototype", "--epochs", "1", "--test-per-class", "10", "--weight-decay", "1e-4"]
    rc, out, _ = run_cli(capsys, "incremental", "run", *flags, "--print-config")
    assert rc == 0 and "weight_decay: 0.0001" in out
    (tmp_path / "c.yaml").write_text(out)
    rc, a, _ = run_cli(capsys, "incremental", "run", *flags, "--no-store", "--out", str(tmp_path / "a"), "--json")
    rc2, b, _ = run_cli(capsys, "incremental", "run", "--config", str(tmp_path / "c.yaml"), "--no-store",
                        "--out", str(tmp_path / "b"), "--json")
    assert rc == rc2 == 0
    ra, rb = json.loads(a), json.loads(b)
    assert ra["settings"] == rb["settings"] and ra["settings"]["weight_decay"] == 1e-4
    assert ra["metrics"]["gacc"] == rb["metrics"]["gacc"]


@pytest.mark.parametrize("layout", [{"preset": "cifar100"}, {"base_classes": 60, "way": 5, "shot": 5}])
def test_fr_on_cifar100_data_follows_the_paper_recipe_without_fr_recipe(layout) -> None:
    # one rule for every protocol: on the paper's data (cifar100:), the paper's recipe and runs/cifar100.sh
    from vistabench.learners.incremental import IncrementalContext, incremental_methods
    from vistabench.learners.models import build_model

    cfg = IncrementalConfig.from_dict({"data": "cifar100:/nowhere", "method": "fr", **layout})
    model, model_opt = cfg.backbone()
    ctx = IncrementalContext(model=model, model_options=model_opt, in_channels=3, image_size=32,
                             method_options=cfg.learner_options())
    learner = incremental_methods.get("fr").load()(ctx)
    assert learner.fr.recipe == "paper" and learner.fr.layers == (7, 8, 9)
    assert (learner.fr.cr, learner.fr.ce_novel, learner.fr.epochs_fr, learner.fr.batch_size_fr) == (0.5, 2.0, 100, 1024)
    vit = build_model(model, num_classes=60, in_channels=3, image_size=32, **model_opt)
    assert len(vit.blocks) == 12 and vit.feature_dim == 256  # the authors' ViT shape: blocks 7, 8, 9 exist
    # an explicit cpu recipe wins; other data stay on the cpu recipe
    cpu = IncrementalConfig.from_dict({"data": "cifar100:/nowhere", "method": "fr", "fr_recipe": "cpu", **layout})
    assert cpu.method_options["recipe"] == "cpu" and cpu.method_options["layers"] == [1, 2, 3]
    assert IncrementalConfig.from_dict({"data": "cifar100:/nowhere", "method": "fr",
                                        "method_options": {"recipe": "cpu"}, **layout}).method_options["recipe"] == "cpu"
    other = IncrementalConfig.from_dict({"data": "digits", "method": "fr", "base_classes": 4, "way": 2, "shot": 5})
    assert other.method_options["recipe"] == "cpu"
