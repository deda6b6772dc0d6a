"""Mistakes in what a user brings, answered in one line naming the thing (issue 40): a factory
network with the wrong number of outputs, a pretrained file holding NaN, a bad value in a --config
file, a paper's spelling of a method name."""

from __future__ import annotations

import pytest

from vistabench.cli import main
from vistabench.errors import USER_ERROR


def _one_line_error(capsys, argv: list[str]) -> str:
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc == USER_ERROR, (rc, err[-2000:])
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


_LT = ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10", "--epochs", "1", "--no-store"]


def test_factory_with_wrong_outputs_is_named_before_training(capsys, tmp_path, monkeypatch):
    (tmp_path / "issue40_mynet.py").write_text(
        "from torch import nn\n"
        "def build(num_classes, in_channels=3):\n"
        "    return nn.Sequential(nn.Conv2d(in_channels, 4, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),\n"
        "                         nn.Linear(4, num_classes), nn.ReLU(), nn.Linear(num_classes, 13))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    line = _one_line_error(capsys, [*_LT, "--model", "issue40_mynet:build"])
    assert line == ("vistabench: error: --model: factory 'issue40_mynet:build' returns (2, 13) for a batch of shape "
                    "(2, 1, 8, 8); expected (2, 10): one column per class of the data (10 classes)")


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_pretrained_nan_names_the_file_and_tensor(capsys, tmp_path, bad):
    import torch

    from vistabench.learners.models import build_model

    state = build_model("cnn28", num_classes=10, in_channels=1, seed=0).state_dict()
    state["body.0.weight"] = state["body.0.weight"].clone()
    state["body.0.weight"][0, 0, 0, 0] = bad
    torch.save(state, tmp_path / "diverged.pt")
    line = _one_line_error(capsys, [*_LT, "--pretrained", str(tmp_path / "diverged.pt")])
    assert f"--pretrained: tensor 'body.0.weight' in {tmp_path / 'diverged.pt'} holds 1 non-finite value(s)" in line
    assert "--lr" not in line and "learning rate" not in line


@pytest.mark.parametrize("text, expect", [
    ("lr: -1\n", "key lr: expected a number > 0, got -1.0"),
    ("lr: abc\n", "key lr: expected a number, got 'abc'"),
    ("method_options: {tau: x}\nmethod: logit_adjust\n", "key method_options.tau: "),
])
def test_bad_value_in_config_file_names_the_file_and_key(capsys, tmp_path, text, expect):
    path = tmp_path / "c.yaml"
    path.write_text("data: digits\nmethod: ce\nimbalance: 10\n".replace("method: ce\n", "" if "method:" in text
                                                                         else "method: ce\n") + text)
    line = _one_line_error(capsys, ["longtail", "run", "--config", str(path), "--print-config"])
    assert line.startswith(f"vistabench: error: --config {str(path)!r}: {expect}"), line
    assert "--lr" not in line


def test_flag_over_config_file_is_named_as_the_flag(capsys, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("data: digits\nmethod: ce\nimbalance: 10\nlr: 0.1\n")
    line = _one_line_error(capsys, ["longtail", "run", "--config", str(path), "--lr", "-2", "--print-config"])
    assert line.startswith("vistabench: error: --lr: expected a number > 0"), line


@pytest.mark.parametrize("spelling", ["LDAM-DRW", "Ldam-Drw", "ldam drw"])
def test_paper_spelling_of_a_method_is_suggested_not_accepted(capsys, spelling):
    line = _one_line_error(capsys, ["longtail", "run", "--data", "digits", "--method", spelling, "--imbalance", "10",
                                    "--print-config"])
    assert f"--method: unknown long-tail method {spelling!r}; did you mean 'ldam_drw'" in line
