"""The layering the project promises (docs/architecture.md), checked on the source itself.

Every import statement counts, including those inside functions (lazy imports are still
dependencies); only module-level imports count for cycles (those are what Python executes at import).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("path", [f for f in FILES if f.parent.name == "cli"], ids=lambda p: p.name)
def test_cli_imports_no_private_name_of_another_layer(path):
    for mod, names in _imports(path):
        if _in(mod, "vistabench") and not _in(mod, "vistabench.cli"):
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            assert not private, f"{path.name} imports private {private} from {mod}"
        last = mod.rpartition(".")[2]
        if _in(mod, "vistabench") and not _in(mod, "vistabench.cli") and mod not in BOTTOM:
            assert not last.startswith("_"), f"{path.name} imports private module {mod}"


def test_no_import_cycle_between_modules():
    graph: dict[str, set[str]] = {}
    modules = {_module_name(f) for f in FILES}
    for f in FILES:
        deps = set()
        for mod, names in _imports(f, top_level_only=True):
            for cand in [mod] + [f"{mod}.{n}" for n in names]:
                if cand in modules and cand != _module_name(f):
                    deps.add(cand)
        graph[_module_name(f)] = deps
    # a package's __init__ importing its own submodules is how packages work: not a cycle
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in graph.get(m, ()):
            if _in(d, m):  # package -> its own submodule
                continue
            if state.get(d) == 1:
                cycle = stack[stack.index(d):] + [d]
                if not any(_in(b, a) for a, b in zip(cycle, cycle[1:])):
                    raise AssertionError(f"import cycle: {' -> '.join(cycle)}")
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


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
