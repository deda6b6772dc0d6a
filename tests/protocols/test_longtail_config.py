"""LongtailConfig: grid keys of the examples unchanged, recipes resolved, method options validated."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from vistabench.errors import InputError
from vistabench.grid.config import cell_key
from vistabench.protocols.longtail.config import LongtailConfig

ROOT = Path(__file__).resolve().parents[2]

# Keys computed by the code before the typed config (argparse defaults of `longtail run`).
OLD = [
    ({"data": "digits", "imbalance": 10, "epochs": 1, "method": "ce", "seed": 0}, "dcb6cd8207fe2001"),
    ({"data": "digits", "imbalance": 10, "epochs": 1, "method": "ce", "seed": 1}, "279d115a2e3454a4"),
    ({"data": "digits", "imbalance": 10, "epochs": 1, "method": "ldam_drw", "seed": 0}, "d9a12d8fdd4b4a66"),
    ({"data": "digits", "imbalance": 10, "epochs": 1, "method": "ldam_drw", "seed": 1}, "a527e3b2ec777029"),
]
_CIFAR = {"epochs": 200, "model": "resnet32", "batch_size": 128, "lr": 0.1, "device": "cuda"}
OLD_CIFAR = [
    ({**_CIFAR, "data": "cifar10:data/cifar-10-batches-py", "imbalance": 10, "method": "ce", "seed": 0},
     "9d53d04835ffe7b2"),
    ({**_CIFAR, "data": "cifar10:data/cifar-10-batches-py", "imbalance": 50, "method": "logit_adjust", "seed": 2},
     "930cd668e0b2233a"),
    ({**_CIFAR, "data": "cifar100:data/cifar-100-python", "imbalance": 200, "method": "crt", "seed": 2},
     "093a93e67f71cda3"),
]
CANONICAL_TINY = {"batch_size": 128, "data": "digits", "device": "cpu", "epochs": 1, "imbalance": 10.0, "lr": 0.05,
                  "method": "ce", "model": "auto", "n_max": None, "points": 10, "repeats": 5, "seed": 0,
                  "test_imbalance": None}


def test_key_dict_of_the_tiny_example_is_the_old_canonical():
    assert LongtailConfig.from_dict(OLD[0][0]).key_dict() == CANONICAL_TINY
    for options, key in OLD:
        assert cell_key("longtail", LongtailConfig.from_dict(options).key_dict()) == key


def test_cifar_cells_keep_their_keys_with_the_cpu_recipe_and_change_with_the_reference():
    for options, key in OLD_CIFAR:
        assert cell_key("longtail", LongtailConfig.from_dict({**options, "recipe": "cpu"}).key_dict()) == key
        ref = LongtailConfig.from_dict(options)  # reference recipe by default on CIFAR: another training
        assert ref.recipe == "reference" and cell_key("longtail", ref.key_dict()) != key


def test_example_files_expand_to_the_old_keys():
    for name, old in (("longtail-tiny.yaml", OLD), ("longtail-cifar.yaml", OLD_CIFAR)):
        doc = yaml.safe_load((ROOT / "examples" / name).read_text())
        for options, key in old:
            cell = {**doc["fixed"], **{k: options[k] for k in doc["grid"]}}
            assert cell_key("longtail", LongtailConfig.from_dict(cell).key_dict()) == key


def test_a_given_method_option_enters_the_key_and_a_default_does_not():
    base = LongtailConfig.from_dict({"data": "digits", "method": "focal", "imbalance": 10})
    assert "method_options" not in base.key_dict()
    given = base.with_changes(method_options={"gamma": 1})
    assert given.key_dict()["method_options"] == {"gamma": 1.0}


REFERENCE = {  # method -> (epochs, batch, lr, momentum, nesterov, wd, warm-up, milestones, factors, options)
    "ldam_drw": (200, 128, 0.1, 0.9, False, 2e-4, 5, [160, 180], [0.01, 1e-4], {"drw_epoch": 160}),
    "ib": (200, 128, 0.1, 0.9, False, 2e-4, 5, [100, 160, 180], [0.01, 1e-4, 1e-6], {"ib_epoch": 100, "alpha": 1000.0}),
    "ride": (200, 128, 0.1, 0.9, True, 5e-4, 5, [160, 180], [0.01, 1e-4], {"reweight_epoch": 160, "diversity": -0.45}),
    "tade": (200, 128, 0.1, 0.9, True, 5e-4, 5, [160, 180], [0.1, 0.01], {"tau": 2.0, "tt_epochs": 5}),
    "bbn": (200, 128, 0.1, 0.9, True, 2e-4, 5, [119, 159], [0.01, 1e-4], {}),  # BBN lib/utils/utils.py: nesterov
    "gcl": (200, 64, 0.1, 0.9, False, 2e-4, 5, [160, 180], [0.1, 0.01],
            {"mixup": True, "cls_epochs": 30, "cls_lr_factor": 0.02}),
    "tde": (200, 256, 0.2, 0.9, False, 5e-4, 5, [119, 159], [0.01, 1e-4], {"alpha": 1.5, "num_heads": 2}),
    "lade": (200, 256, 0.2, 0.9, False, 5e-4, 5, [119, 159], [0.01, 1e-4], {"lam": 0.1}),
}


@pytest.mark.parametrize("method", sorted(REFERENCE))
def test_print_config_json_shows_the_reference_recipe(method, capsys):
    from vistabench.cli import main

    assert main(["longtail", "run", "--data", "cifar100:/does/not/exist", "--method", method, "--imbalance", "100",
                 "--print-config", "--json"]) == 0
    cfg = json.loads(capsys.readouterr().out)
    ep, bs, lr, mom, nest, wd, warm, ms, fs, opts = REFERENCE[method]
    assert (cfg["recipe"], cfg["epochs"], cfg["batch_size"], cfg["lr"], cfg["momentum"], cfg["nesterov"],
            cfg["weight_decay"], cfg["warmup_epochs"], cfg["schedule"]) == ("reference", ep, bs, lr, mom, nest, wd,
                                                                           warm, "step")
    assert cfg["lr_milestones"] == ms and cfg["lr_factors"] == pytest.approx(fs)
    assert {k: cfg["method_options"][k] for k in opts} == opts
    # the references' input conventions; BBN's DataLoader and TDE/LADE's int(N/batch) steps drop the last batch
    assert (cfg["normalisation"], cfg["init"], cfg["select_checkpoint"]) == ("cifar", "fan_in", "last")
    assert cfg["drop_last"] is (method in ("bbn", "tde", "lade"))
    # the printed file is a config: reading it back gives the same config
    assert LongtailConfig.from_dict(cfg).to_dict() == cfg


def test_recipe_is_cpu_on_bundled_data_and_per_dataset_constants():
    cpu = LongtailConfig.from_dict({"data": "digits", "method": "tde", "imbalance": 10})
    assert (cpu.recipe, cpu.epochs, cpu.lr, cpu.schedule, cpu.model, cpu.method_options.alpha) == \
        ("cpu", 10, 0.05, "cosine", "cnn28", 1.5)
    c10 = LongtailConfig.from_dict({"data": "cifar10:/x", "method": "tde", "imbalance": 10})
    assert (c10.method_options.alpha, c10.model) == (1.0, "resnet32_bbn")  # TDE's CIFAR-10 config
    assert LongtailConfig.from_dict({"data": "cifar10:/x", "method": "focal", "imbalance": 10}
                                    ).method_options.gamma == 1.0
    # what the user gives wins over the recipe, in fields and in options
    mine = LongtailConfig.from_dict({"data": "cifar10:/x", "method": "tde", "imbalance": 10, "lr": 0.3,
                                     "model": "resnet32", "method_options": {"alpha": 2}})
    assert (mine.lr, mine.model, mine.method_options.alpha, mine.weight_decay) == (0.3, "resnet32", 2.0, 5e-4)


@pytest.mark.parametrize("given, message", [
    ({"method": "ride", "method_options": {"num_experts": 0}}, "method_options.num_experts: expected a number >= 1"),
    ({"method": "tde", "method_options": {"num_heads": 0}}, "method_options.num_heads: expected a number >= 1"),
    ({"method": "tde", "method_options": {"tau": "x"}}, "method_options.tau: expected a number, got 'x'"),
    ({"method": "tde", "method_options": {"alpha": "inf"}}, "method_options.alpha: expected a finite number"),
    ({"method": "tade", "method_options": {"tt_batch": 0}}, "method_options.tt_batch: expected a number >= 1"),
    ({"method": "tade", "method_options": {"tt_lr": -1}}, "method_options.tt_lr: expected a number > 0"),
    ({"method": "gcl", "method_options": {"cls_epochs": -1}}, "method_options.cls_epochs: expected a number >= 1"),
    ({"method": "focal", "method_options": {"gama": 1}}, "method_options.gama: unknown option; did you mean gamma"),
    ({"method": "bbn", "batch_size": 1}, "batch_size: expected a number >= 2"),
    ({"method": "cee"}, "method: unknown long-tail method 'cee'; did you mean 'ce'"),
    ({"method": "ce", "schedule": "step", "lr_milestones": [5, 2], "lr_factors": [0.1, 0.1]},
     "lr_milestones: expected increasing epochs"),
    ({"method": "ce", "schedule": "step", "lr_milestones": [5], "lr_factors": []}, "lr_factors: expected one factor"),
])
def test_bad_values_name_the_field(given, message):
    with pytest.raises(InputError, match="^" + message.replace("(", r"\(").replace(".", r"\.")):
        LongtailConfig.from_dict({"data": "digits", "imbalance": 10, **given})


def test_print_config_is_fast_and_imports_no_torch():
    code = ("import sys, time; t = time.perf_counter(); from vistabench.cli import main; "
            "rc = main(['longtail', 'run', '--data', 'cifar100:/x', '--method', 'gcl', '--imbalance', '100', "
            "'--print-config', '--json']); assert rc == 0; assert 'torch' not in sys.modules, 'torch imported'")
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={
        "PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert time.perf_counter() - t0 < 3.0
