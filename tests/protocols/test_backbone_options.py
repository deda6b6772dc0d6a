"""--model MODULE:FUNCTION, --pretrained FILE.safetensors and --precision bf16 end to end on the CPU,
for every training protocol, through ``vistabench.cli.main`` (tiny settings on bundled data)."""

from __future__ import annotations

import json
import pathlib

import pytest
import torch

from vistabench.cli import main
from vistabench.errors import USER_ERROR

TESTS = pathlib.Path(__file__).resolve().parents[1]
FACTORY = "learners.user_nets:tiny"


@pytest.fixture
def weights(tmp_path, monkeypatch):
    """A pretrained file of the tests' network for 1-channel digits, trained on 10 other classes."""
    monkeypatch.syspath_prepend(str(TESTS))
    from safetensors.torch import save_file

    from learners.user_nets import TinyNet
    torch.manual_seed(3)
    state = TinyNet(1, 10).state_dict()
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "tiny.safetensors"))
    return tmp_path / "tiny.safetensors"


def _runs(t):
    return {
        "longtail": ["longtail", "run", "--data", "digits", "--imbalance", "10", "--epochs", "1", "--method", "crt",
                     "--points", "2", "--repeats", "1", "--out", f"{t}/lt", "--store", f"{t}/s.sqlite"],
        "incremental": ["incremental", "run", "--data", "digits", "--base-classes", "4", "--way", "2", "--shot", "5",
                        "--method", "finetune", "--epochs", "1", "--novel-epochs", "1", "--out", f"{t}/inc",
                        "--store", f"{t}/s.sqlite"],
        "smalldata": ["smalldata", "run", "--dataset", "digits", "--method", "ce", "--trials", "1", "--epochs", "1",
                      "--repeats", "1", "--split", "0", "--work-dir", f"{t}/sd", "--store", f"{t}/s.sqlite"],
        "stream": ["stream", "run", "--stream", "embedded", "--trials", "1", "--steps", "4", "--max-tasks", "1",
                   "--no-store", "--out", f"{t}/st"],
    }


@pytest.mark.parametrize("protocol", ["longtail", "incremental", "smalldata", "stream"])
def test_factory_pretrained_bf16_end_to_end(protocol, tmp_path, weights, capsys):
    argv = _runs(tmp_path)[protocol]
    extra = ["--model", FACTORY, "--pretrained", str(weights), "--precision", "bf16"]
    assert main([*argv, *extra, "--print-config", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["model"] == FACTORY
    assert printed["pretrained"] == str(weights) and printed["precision"] == "bf16"
    assert main([*argv, *extra]) == 0, capsys.readouterr().err


def test_precision_defaults_to_fp32_in_the_printed_config(tmp_path, capsys):
    assert main([*_runs(tmp_path)["longtail"], "--print-config", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["precision"] == "fp32" and printed["pretrained"] is None


@pytest.mark.parametrize("extra, expect", [
    (["--model", "no_such_module_xyz:net"], "--model: cannot import module 'no_such_module_xyz'"),
    (["--model", "learners.user_nets:nope"], "has no attribute 'nope'"),
    (["--model", "learners.user_nets:NOT_CALLABLE"], "not a callable"),
    (["--model", "learners.user_nets:not_a_module"], "not a torch.nn.Module"),
    (["--model", "learners.user_nets:needs_depth"], "requires depth"),
    (["--pretrained", "{t}/missing.safetensors"], "--pretrained: {t}/missing.safetensors does not exist"),
    (["--pretrained", "{t}/weights.txt"], "--pretrained: expected a .safetensors"),
    (["--model", "cnn28", "--pretrained", "{w}"], "that the model does not have"),
    (["--precision", "fp8"], "--precision"),
    (["--precision", "fp16"], "--precision: fp16 needs a CUDA device (device is cpu)"),
    (["--compile"], "--compile: true needs a CUDA device"),
])
def test_bad_backbone_values_are_one_line(extra, expect, tmp_path, weights, capsys):
    (tmp_path / "weights.txt").write_text("x")
    fill = {"t": str(tmp_path), "w": str(weights)}
    extra = [e.format(**fill) for e in extra]
    assert main([*_runs(tmp_path)["longtail"], *extra]) == USER_ERROR
    err = capsys.readouterr().err.strip()
    assert expect.format(**fill) in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_block_changing_method_refuses_a_factory(tmp_path, weights, capsys):
    argv = [*_runs(tmp_path)["smalldata"][:4], "--method", "dskn", "--model", FACTORY,
            "--work-dir", f"{tmp_path}/sd", "--store", f"{tmp_path}/s.sqlite"]
    assert main(argv) == USER_ERROR
    err = capsys.readouterr().err.strip()
    assert "method 'dskn' changes a convolutional backbone" in err and len(err.splitlines()) == 1


def test_mismatched_pretrained_names_the_first_differing_tensor(tmp_path, weights, capsys):
    from safetensors.torch import save_file

    from learners.user_nets import TinyNet
    save_file({k: v.contiguous() for k, v in TinyNet(3, 10).state_dict().items()}, str(tmp_path / "rgb.safetensors"))
    argv = [*_runs(tmp_path)["longtail"], "--model", FACTORY, "--pretrained", str(tmp_path / "rgb.safetensors")]
    assert main(argv) == USER_ERROR
    err = capsys.readouterr().err.strip()
    assert "--pretrained: tensor 'body.0.weight' has shape (4, 3, 3, 3)" in err and "is (4, 1, 3, 3)" in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("protocol", ["longtail", "incremental", "smalldata", "stream"])
def test_every_protocol_loads_the_pretrained_file(protocol, tmp_path, weights, capsys):
    """The file reaches each protocol's model: a tensor of a shape no data set has is refused there."""
    from safetensors.torch import load_file, save_file
    state = load_file(str(weights))
    state["body.0.weight"] = torch.zeros(4, 7, 3, 3)
    save_file(state, str(tmp_path / "seven.safetensors"))
    argv = [*_runs(tmp_path)[protocol], "--model", FACTORY, "--pretrained", str(tmp_path / "seven.safetensors")]
    assert main(argv) == USER_ERROR
    err = capsys.readouterr().err.strip()
    assert "tensor 'body.0.weight' has shape (4, 7, 3, 3)" in err and "seven.safetensors" in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
