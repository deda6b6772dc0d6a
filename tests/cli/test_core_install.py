"""`pip install vistabench` (no extras) is the scoring core: with every extra's modules made
unimportable (a ``sys.meta_path`` finder raising ImportError, in a fresh interpreter), the scoring,
table, report and stats commands and the compat drop-ins work; a command that needs an extra exits 2
with one line naming the ``pip install 'vistabench[...]'``. (The same was checked by hand in a real
virtualenv with ``pip install .``: see docs/architecture.md, "Install by job".)"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from vistabench.extras import EXTRAS

#: every extra's modules, those they pull in, and the test-only references that import torch
BLOCKED = sorted({m for mods in EXTRAS.values() for m in mods}
                 | {"gpytorch", "torchmetrics", "lightning_utilities", "torchvision", "pandas"})

_RUNNER = textwrap.dedent("""
    import contextlib, io, json, sys

    BLOCKED = set(json.loads(sys.argv[1]))

    class NotInstalled:  # as if the package were absent: find_spec raises, import raises
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())
    from vistabench.cli import main

    results = []
    for argv in json.loads(sys.argv[2]):
        if argv[0] == "import":
            __import__(argv[1])
            results.append({"argv": argv, "rc": 0, "out": "", "err": ""})
            continue
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as exc:  # argparse's --help and usage errors
                rc = exc.code
        results.append({"argv": argv, "rc": rc, "out": out.getvalue(), "err": err.getvalue()})
    heavy = sorted({m.partition(".")[0] for m in sys.modules} & (BLOCKED | {"torch"}))
    print(json.dumps({"results": results, "imported": heavy}))
""")


def _run_core(commands: list[list[str]], cwd) -> list[dict]:
    proc = subprocess.run([sys.executable, "-c", _RUNNER, json.dumps(BLOCKED), json.dumps(commands)],
                          capture_output=True, text=True, cwd=cwd, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["imported"] == [], report["imported"]
    return report["results"]


@pytest.fixture(scope="module")
def core_results(tmp_path_factory):
    d = tmp_path_factory.mktemp("core")
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 2000)
    np.savez(d / "pred.npz", labels=labels, logits=rng.normal(size=(2000, 10)) + 3 * np.eye(10)[labels])
    (d / "counts.json").write_text(json.dumps([500, 300, 200, 100, 80, 60, 40, 30, 20, 10]))
    (d / "a.json").write_text("[0.71, 0.74, 0.69, 0.73]")
    (d / "b.json").write_text("[0.65, 0.66, 0.70, 0.64]")
    store = ["--store", "s.sqlite"]
    commands = {
        "help": ["--help"],
        "eval help": ["detection", "eval", "--help"],
        "synth": ["detection", "synth", "--out", "syn", "--images", "40", "--categories", "12"],
        "eval": ["detection", "eval", "--gt", "syn/gt.json", "--results", "syn/results.json", *store],
        "calibrate": ["detection", "calibrate", "fit", "--gt", "syn/gt.json", "--results", "syn/results.json",
                      "--method", "isotonic", "--out", "cal.json"],
        "detection run": ["detection", "run", "--gt", "syn/gt.json", "--results", "syn/results.json", "--no-store"],
        "split": ["longtail", "split", "--data", "digits", "--imbalance", "10", "--out", "split.json"],
        "sweep": ["longtail", "sweep", "--labels", "pred.npz", "--train-counts", "counts.json",
                  "--test-imbalance", "10", "--out", "sweep.json"],
        "longtail score": ["longtail", "score", "--predictions", "pred.npz", "--sweep", "sweep.json",
                           "--method", "mymodel", "--no-store", "--json"],
        "print-config": ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10",
                         "--print-config"],
        "reference": ["incremental", "reference", "--preset", "cifar100"],
        "welch": ["stats", "welch", "--a", "a.json", "--b", "b.json", "--json"],
        "table": ["table", "--protocol", "detection", *store],
        "report": ["report", "--out", "rep", *store],
        "stream show": ["stream", "show", "embedded"],
        "longtail run": ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10", *store],
        "smalldata run": ["smalldata", "run", "--dataset", "digits", "--method", "ce", "--no-store"],
        "demo": ["demo", "--only", "longtail", "--quick"],
        "grid ray": ["grid", "run", "grid.yaml", "--engine", "ray"],
        "mnist5k": ["longtail", "split", "--data", "mnist5k", "--imbalance", "10", "--out", "s2.json"],
    }
    (d / "grid.yaml").write_text("protocol: longtail\nfixed: {data: digits, imbalance: 10, epochs: 1}\n"
                                 "grid: {method: [ce]}\n")
    imports = [["import", m] for m in ("vistabench.compat.coco", "vistabench.compat.lvis",
                                        "vistabench.compat.detectron2", "vistabench.compat.torchmetrics",
                                        "vistabench.metrics", "vistabench.report")]
    results = _run_core([*commands.values(), *imports], d)
    return dict(zip([*commands, *(m for _, m in imports)], results)), d


@pytest.mark.parametrize("name", ["help", "eval help", "synth", "eval", "calibrate", "detection run", "split",
                                  "sweep", "longtail score", "print-config", "reference", "welch", "table",
                                  "report", "stream show", "vistabench.compat.coco", "vistabench.compat.lvis",
                                  "vistabench.compat.detectron2", "vistabench.compat.torchmetrics",
                                  "vistabench.metrics", "vistabench.report"])
def test_scoring_commands_work_without_any_extra(core_results, name):
    results, _ = core_results
    r = results[name]
    assert r["rc"] == 0, (r["argv"], r["err"][-2000:])
    assert "Traceback" not in r["err"]


def test_the_core_commands_compute_what_they_claim(core_results):
    results, d = core_results
    assert "AP^Pool" in results["eval"]["out"] and "stored record 1" in results["eval"]["out"]
    score = json.loads(results["longtail score"]["out"])
    assert 0.5 < score["avg"] <= 1.0  # logits with a +3 margin on the true class: well above chance
    assert json.loads(results["welch"]["out"])["p"] < 0.05
    assert (d / "rep" / "index.html").is_file() and (d / "cal.json").is_file()
    assert "| Method |" in results["table"]["out"]


@pytest.mark.parametrize("name, extras", [
    ("longtail run", "train"), ("smalldata run", "train,tune"), ("demo", "train"),
    ("grid ray", "train,ray"), ("mnist5k", "train")])
def test_a_command_that_needs_an_extra_exits_2_naming_the_pip_install(core_results, name, extras):
    results, d = core_results
    r = results[name]
    assert r["rc"] == 2, (r["argv"], r["err"][-2000:])
    lines = r["err"].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vistabench: error: `vistabench "), r["err"]
    assert lines[0].endswith(f"(not installed): pip install 'vistabench[{extras}]'"), lines[0]
    assert "PyTorch" in lines[0] or name == "mnist5k"


def test_a_refused_run_writes_nothing(core_results):
    results, d = core_results
    assert results["longtail run"]["rc"] == 2
    assert not (d / "vistabench-demo").exists()  # demo refused before creating its folder


_IMPORTS = textwrap.dedent("""
    import sys
    from vistabench.cli import main
    rc = main(sys.argv[1:])
    print(" ".join(sorted({m.partition(".")[0] for m in sys.modules})))
    sys.exit(rc)
""")


def test_detection_eval_imports_only_what_it_uses(tmp_path):
    """Scoring a results file needs numpy and msgspec: not scipy, matplotlib, scikit-learn, pycocotools
    (boxes need no mask code), PyTorch or the tuners (a regression would slow every evaluation)."""
    from vistabench.cli import main

    assert main(["detection", "synth", "--out", str(tmp_path / "syn"), "--images", "20", "--categories", "8"]) == 0
    proc = subprocess.run([sys.executable, "-c", _IMPORTS, "detection", "eval", "--gt", "syn/gt.json",
                           "--results", "syn/results.json", "--no-store", "--json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    imported = set(proc.stdout.strip().splitlines()[-1].split())
    assert {"numpy", "msgspec"} <= imported
    assert not imported & {"scipy", "matplotlib", "sklearn", "pycocotools", "torch", "optuna", "ray", "PIL", "yaml"}
