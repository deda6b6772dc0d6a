"""SmalldataConfig: the old run flags' cell keys, the printed config, method options by recipe."""

import json
import subprocess
import sys
import time

import pytest

from vistabench.cli import main
from vistabench.errors import InputError
from vistabench.learners.smalldata.options import DsknOptions, TvmfOptions
from vistabench.protocols.smalldata.config import SmalldataConfig


def test_new_fields_enter_the_key_only_off_their_old_values():
    base = {"dataset": "digits", "method": "tvmf"}
    assert "method_options" not in SmalldataConfig.from_dict(base).key_dict()
    changed = SmalldataConfig.from_dict({**base, "method_options": {"kappa": 8}}).key_dict()
    assert changed["method_options"] == {"kappa": 8.0}
    assert SmalldataConfig.from_dict({**base, "momentum": 0.5}).key_dict()["momentum"] == 0.5
    assert "threads" not in SmalldataConfig.from_dict({**base, "threads": 3}).key_dict()


def test_recipe_resolves_method_options_and_the_stem():
    gem = SmalldataConfig.from_dict({"dataset": "eurosat:/d", "method": "dskn"})
    assert (gem.root, gem.stem) == ("/d", "imagenet")
    assert gem.method_options == DsknOptions(loss="composite", centre_weight=0.5, centre_lr=0.5)
    ours = SmalldataConfig.from_dict({"dataset": "eurosat:/d", "method": "tvmf", "recipe": "vistabench"})
    # the stem from the image size is resolved for EuroSAT's 64 px images
    assert ours.stem == "small" and ours.method_options.kappa == {"uniform": [0.0, 32.0]}
    native_folder = SmalldataConfig.from_dict({"dataset": "folder:/d", "method": "ce", "image_size": "native"})
    assert native_folder.stem == "from_image_size"  # the size is known only once the images are read
    assert SmalldataConfig.from_dict({"dataset": "digits", "method": "tvmf"}).method_options == TvmfOptions(kappa=16.0)
    # what the user gave wins over the recipe
    assert SmalldataConfig.from_dict({"dataset": "eurosat:/d", "method": "dskn", "stem": "small"}).stem == "small"


def test_print_config_is_fast_loads_nothing_and_reads_back(tmp_path):
    code = ("import sys, time; t = time.time(); from vistabench.cli import main; "
            "rc = main(['smalldata', 'run', '--dataset', 'eurosat:DIR', '--method', 'dskn', '--print-config', "
            "'--json']); assert rc == 0 and 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)")
    t0 = time.time()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert time.time() - t0 < 3
    printed = json.loads(out.stdout)
    assert printed["method_options"]["loss"] == "composite" and printed["stem"] == "imagenet"
    (tmp_path / "c.json").write_text(out.stdout)
    again = SmalldataConfig.from_dict(json.loads(out.stdout))
    assert again.to_dict() == printed


def test_config_file_and_flags_give_the_same_config(tmp_path, capsys):
    (tmp_path / "c.yaml").write_text("dataset: digits\nmethod: ole\nmethod_options: {ole_weight: 0.5}\nepochs: 2\n")
    assert main(["smalldata", "run", "--config", str(tmp_path / "c.yaml"), "--epochs", "3", "--print-config",
                 "--json"]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert main(["smalldata", "run", "--dataset", "digits", "--method", "ole", "--method-opt", "ole_weight=0.5",
                 "--epochs", "3", "--print-config", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == from_file and from_file["epochs"] == 3


@pytest.mark.parametrize("values, message", [
    ({"method": "tvmf", "method_options": {"kappa": -1}}, "method_options.kappa: expected a number >= 0"),
    ({"method": "tvmf", "space": {"kappa": {"uniform": [-2, 4]}}}, "space.kappa: expected values >= 0"),
    ({"method": "ole", "method_options": {"ole_weight": {"loguniform": [1e-3, -1]}}}, "method_options.ole_weight"),
    ({"method": "auxilearn", "method_options": {"auxgrad_every": 0}}, "method_options.auxgrad_every: expected a "
                                                                      "number >= 1"),
    ({"method": "dhn", "method_options": {"scattering_J": {"choice": [0, 1]}}}, "method_options.scattering_J: "
                                                                             "expected values >= 1"),
    ({"method": "dskn", "method_options": {"los": "ce"}}, "method_options.los: unknown option; did you mean loss"),
    ({"method": "cee"}, "method: unknown small-data method 'cee'"),
    ({"method": "ce", "dataset": "eurosat"}, "root: dataset 'eurosat' needs its folder"),
    ({"method": "ce", "space": {"lrr": 1}}, "space: method 'ce' has no parameter 'lrr'; did you mean 'lr'"),
])
def test_bad_values_name_the_field(values, message):
    with pytest.raises(InputError) as err:
        SmalldataConfig.from_dict({"dataset": "digits", **values})
    assert message in str(err.value)
