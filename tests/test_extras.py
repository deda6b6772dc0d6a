"""vistabench.extras: the extras table matches pyproject.toml, and a missing extra is one line naming
the pip install to run."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from vistabench import extras
from vistabench.errors import InputError
from vistabench.suite import protocols

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
#: distribution name -> its import name, where they differ
_IMPORT_NAME = {"scikit-learn": "sklearn", "pyyaml": "yaml", "pillow": "PIL"}


def _project() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]


def _names(requirements: list[str]) -> list[str]:
    names = [re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in requirements]
    return [_IMPORT_NAME.get(n, n.replace("-", "_")) for n in names]


def test_every_extra_of_the_table_is_declared_with_the_modules_it_names():
    optional = _project()["optional-dependencies"]
    for extra, modules in extras.EXTRAS.items():
        assert extra in optional, f"pyproject.toml has no extra {extra!r}"
        assert set(_names(optional[extra])) == set(modules), extra


def test_all_installs_every_extra_and_the_core_has_none_of_them():
    project = _project()
    (everything,) = project["optional-dependencies"]["all"]
    assert set(re.search(r"\[(.*)\]", everything).group(1).split(",")) >= set(extras.EXTRAS)
    core = set(_names(project["dependencies"]))
    assert not core & {m for mods in extras.EXTRAS.values() for m in mods}
    assert "pandas" not in core  # declared once, never imported


@pytest.mark.parametrize("module, extra", [("torch", "train"), ("torch.nn.functional", "train"), ("kymatio", "train"),
                                           ("optuna", "tune"), ("gpytorch", "tune"), ("ray.tune", "ray"),
                                           ("numpy", None), ("torchvision", None)])
def test_the_extra_of_a_module(module, extra):
    assert extras.extra_of(module) == extra


def test_require_names_the_missing_modules_and_the_pip_line(monkeypatch):
    absent = {"torch", "ray"}
    monkeypatch.setattr(extras, "_installed", lambda m: m not in absent)
    with pytest.raises(extras.MissingExtraError) as info:
        extras.require("train", "tune", "ray", what="`vistabench grid run`")
    assert isinstance(info.value, InputError)
    assert str(info.value) == ("`vistabench grid run` needs PyTorch and Ray (not installed): "
                               "pip install 'vistabench[train,ray]'")
    extras.require("tune", what="x")  # everything there: nothing raised


def test_require_refuses_an_unknown_extra():
    with pytest.raises(ValueError, match="unknown extras"):
        extras.require("gpu", what="x")


def test_a_module_that_is_looked_up_but_broken_counts_as_missing(monkeypatch):
    class Broken:
        def find_spec(self, name, path=None, target=None):
            if name == "vistabench_no_such_extra":
                raise ImportError("broken install")

    monkeypatch.setattr(sys, "meta_path", [Broken(), *sys.meta_path])
    assert not extras._installed("vistabench_no_such_extra")
    assert extras._installed("json")


def test_an_import_error_of_an_extra_module_is_a_user_message_and_others_are_not():
    exc = ModuleNotFoundError("No module named 'botorch'", name="botorch")
    assert extras.missing_extra_message(exc, what="`vistabench stream run`") == (
        "`vistabench stream run` needs botorch (not installed): pip install 'vistabench[tune]'")
    assert extras.missing_extra_message(ModuleNotFoundError("x", name="numpy")) is None
    assert extras.missing_extra_message(KeyError("torch")) is None


def test_each_protocol_declares_known_extras_and_detection_runs_on_the_core():
    for proto in protocols():
        for part in ("run", "demo"):
            assert set(proto.needs(part)) <= set(extras.EXTRAS), proto.name
        assert proto.needs("score") == ()
    by_name = {p.name: p for p in protocols()}
    assert by_name["detection"].needs("run") == ()
    assert by_name["smalldata"].needs("run") == ("train", "tune")
    assert by_name["stream"].needs("demo") == ("train", "tune")
