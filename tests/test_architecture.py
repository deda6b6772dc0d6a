"""The layering the project promises (docs/architecture.md), checked on the source itself.

Every import statement counts, including those inside functions (lazy imports are still
dependencies); only module-level imports count for cycles (those are what Python executes at import).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import importlib.util

import pytest

_spec = importlib.util.spec_from_file_location("_archcheck", Path(__file__).with_name("_archcheck.py"))
A = importlib.util.module_from_spec(_spec)
sys.modules["_archcheck"] = A  # dataclasses look their module up there
_spec.loader.exec_module(A)

SRC = Path(__file__).resolve().parents[1] / "src" / "vistabench"
BOTTOM = {"vistabench._validation", "vistabench.errors", "vistabench.jsonutil", "vistabench._lazy"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, *, top_level_only: bool = False) -> list[tuple[str, list[str]]]:
    """(imported module, imported names) for each import in the file, relative imports resolved."""
    mod = _module_name(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [a.name for a in node.names]
            if node.module is None:  # `from . import x`: x is a module, or a name of the package
                for n in names:
                    sub = SRC.parent.joinpath(*f"{target}.{n}".split("."))
                    is_module = sub.with_suffix(".py").is_file() or (sub / "__init__.py").is_file()
                    out.append((f"{target}.{n}", []) if is_module else (target, [n]))
            else:
                out.append((target, names))
    return out


FILES = sorted(SRC.rglob("*.py"))


def _in(mod: str, layer: str) -> bool:
    return mod == layer or mod.startswith(layer + ".")


def test_the_source_tree_is_found():
    assert len(FILES) > 40 and any(f.parent.name == "suite" for f in FILES)


@pytest.mark.parametrize("path", [f for f in FILES if f.parent.name == "protocols"], ids=lambda p: p.name)
def test_protocols_do_not_import_report_demos_or_cli(path):
    bad = [m for m, _ in _imports(path) if any(_in(m, f"vistabench.{x}") for x in ("report", "demos", "cli", "suite"))]
    assert not bad, f"{path.name} imports {bad}"


@pytest.mark.parametrize("path", [f for f in FILES if f.parent.name == "metrics"], ids=lambda p: p.name)
def test_metrics_import_only_numpy_scipy_and_the_bottom_helpers(path):
    # pycocotools is the mask codec (RLE IoU for segm); a declared, torch-free dependency
    allowed_third_party = {"numpy", "scipy", "pycocotools"}
    for mod, _ in _imports(path):
        root = mod.split(".")[0]
        if root == "vistabench":
            assert _in(mod, "vistabench.metrics") or mod in BOTTOM, f"{path.name} imports {mod}"
        else:
            assert root in allowed_third_party or root in sys.stdlib_module_names, f"{path.name} imports {mod}"


def _tree():
    return A.load_tree(SRC.parent)


def test_no_import_cycle_between_modules():
    assert A.find_cycles(_tree()) == []


def test_no_upward_import_anywhere():
    assert A.upward_imports(_tree()) == []


def test_no_private_name_crosses_a_module():
    assert A.private_crossings(_tree()) == []


def test_grid_never_imports_cli():
    tree = _tree()
    bad = [f"{m} -> {i.target}" for m, mod in tree.items() if _in(m, "vistabench.grid")
           for i in mod.imports if _in(i.target, "vistabench.cli")]
    assert not bad


# --- the checker itself catches what it should (fed small trees that break each rule) ---------

def test_checker_finds_a_cycle_closed_by_a_function_level_import():
    tree = A.tree_from_sources({
        "vistabench.learners.__init__": "",
        "vistabench.learners.a": "from .b import f\n",
        "vistabench.learners.b": "def f():\n    from .a import g\n    return g\n",
        "vistabench.learners.c": "from . import a\n",
    })
    assert A.find_cycles(tree) == [["vistabench.learners.a", "vistabench.learners.b"]]
    # the package importing its own sub-modules is no cycle
    assert A.find_cycles(A.tree_from_sources({"vistabench.x.__init__": "from .y import z\n",
                                              "vistabench.x.y": "from . import w\n",
                                              "vistabench.x.w": ""})) == []


def test_checker_finds_an_upward_import_inside_a_function():
    tree = A.tree_from_sources({
        "vistabench.metrics.m": "def f():\n    from ..learners import trainer\n",
        "vistabench.learners.__init__": "", "vistabench.learners.trainer": "",
        "vistabench.grid.g": "import vistabench.cli.x\n", "vistabench.cli.x": "",
    })
    found = A.upward_imports(tree)
    assert len(found) == 2
    assert any("vistabench.metrics.m imports vistabench.learners.trainer" in f for f in found)
    assert any("vistabench.grid.g imports vistabench.cli.x" in f for f in found)


def test_checker_finds_private_names_crossing_modules_aliases_included():
    tree = A.tree_from_sources({
        "vistabench.learners.__init__": "",
        "vistabench.learners.models": "class _Block: pass\n",
        "vistabench.learners.a": "from .models import _Block as Block\n",
        "vistabench.learners.b": "from . import models as M\nx = M._Block\n",
        "vistabench.metrics.__init__": "", "vistabench.metrics._sort": "",
        "vistabench.learners.c": "from ..metrics._sort import f\n",
        "vistabench.metrics.ok": "from ._sort import f\n",
    })
    found = A.private_crossings(tree)
    assert len(found) == 3, found
    assert any("learners.a imports private ['_Block']" in f for f in found)
    assert any("uses private M._Block" in f for f in found)
    assert any("private module vistabench.metrics._sort from outside" in f for f in found)


def test_no_project_file_mentions_the_internal_design_document():
    root = SRC.parents[1]
    hits = []
    for folder in ("src", "docs", "tests", "benchmarks", "scripts", "examples"):
        for f in (root / folder).rglob("*"):
            if f.is_file() and f.suffix in {".py", ".md", ".sh", ".yaml", ".yml", ".json", ".txt"} and f != Path(__file__).resolve():
                if "DESIGN" + ".md" in f.read_text(encoding="utf-8", errors="ignore"):
                    hits.append(str(f.relative_to(root)))
    if "DESIGN" + ".md" in (root / "README.md").read_text(encoding="utf-8"):
        hits.append("README.md")
    assert not hits, f"mention the internal design document: {hits}"
