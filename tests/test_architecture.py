"""The layering the project promises (docs/architecture.md), checked on the source itself.

Every import statement counts, including those inside functions (a lazy import is still a
dependency), for the layers and for cycles alike; so do the imports made by name through
vistabench._lazy (their literal targets are read as edges). The rules are pure functions in ``_archcheck.py``,
tested below on small trees that break each of them.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("_archcheck", Path(__file__).with_name("_archcheck.py"))
A = importlib.util.module_from_spec(_spec)
sys.modules["_archcheck"] = A  # dataclasses look their module up there
_spec.loader.exec_module(A)

SRC = Path(__file__).resolve().parents[1] / "src" / "vistabench"
BOTTOM = {"vistabench._validation", "vistabench.errors", "vistabench.jsonutil", "vistabench._lazy"}
TREE = A.load_tree(SRC.parent)  # module name -> its imports (every import statement, wherever written)
FILES = sorted(SRC.rglob("*.py"))


def _in(mod: str, layer: str) -> bool:
    return mod == layer or mod.startswith(layer + ".")


def test_the_source_tree_is_found():
    assert len(FILES) > 40 and any(f.parent.name == "suite" for f in FILES)


@pytest.mark.parametrize("name", [m for m in sorted(TREE) if _in(m, "vistabench.protocols")])
def test_protocols_do_not_import_report_demos_or_cli(name):
    bad = [i.target for i in TREE[name].imports
           if any(_in(i.target, f"vistabench.{x}") for x in ("report", "demos", "cli", "suite"))]
    assert not bad, f"{name} imports {bad}"


@pytest.mark.parametrize("name", [m for m in sorted(TREE) if _in(m, "vistabench.metrics")])
def test_metrics_import_only_numpy_scipy_and_the_bottom_helpers(name):
    # pycocotools is the mask codec (RLE IoU for segm); a declared, torch-free dependency
    allowed_third_party = {"numpy", "scipy", "pycocotools"}
    for imp in TREE[name].imports:
        root = imp.target.split(".")[0]
        if root == "vistabench":
            # and the typed options of a metric (vistabench.options, the vocabulary _validation is built on:
            # stdlib only, plus the errors and the close-match helper of vistabench.registry)
            allowed = BOTTOM | {"vistabench.options"}
            assert _in(imp.target, "vistabench.metrics") or imp.target in allowed, f"{name} imports {imp.target}"
        else:
            assert root in allowed_third_party or root in sys.stdlib_module_names, f"{name} imports {imp.target}"


def _tree():
    return TREE


def test_no_import_cycle_between_modules():
    assert A.find_cycles(_tree()) == []


def test_no_upward_import_anywhere():
    assert A.upward_imports(_tree()) == []


def test_every_declared_layer_names_modules_that_exist():
    assert A.missing_layer_entries(_tree()) == []


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


def test_every_import_by_name_is_declared_where_the_checker_reads_it():
    """Lazy imports go through vistabench._lazy with literal targets (read above as edges): no
    importlib.import_module elsewhere, no target the checker cannot read."""
    assert A.hidden_imports(_tree()) == []


def test_the_checker_sees_the_lazy_imports_of_the_source():
    tree = _tree()
    edges = {(m, i.target) for m, mod in tree.items() for i in mod.imports if i.lazy}
    assert ("vistabench.protocols.longtail.runner", "vistabench.learners.longtail.fit") in edges  # via lazy_exports
    assert ("vistabench.learners.longtail", "vistabench.learners.longtail.fit") in edges
    assert ("vistabench.tracking.guard", "vistabench.tracking.mlflow_backend") in edges  # LazyModules
    assert ("vistabench.cli", "vistabench.cli.grid") in edges
    assert ("vistabench.suite", "vistabench.suite.longtail") in edges  # import_submodules


_LAZY_UP = {
    "vistabench._lazy": "",
    "vistabench.metrics.__init__": "",
    "vistabench.metrics.m": ("from .._lazy import lazy_import\n"
                             "def f():\n    return lazy_import('vistabench.learners.trainer:Trainer')\n"),
    "vistabench.metrics.rel": ("from .._lazy import lazy_import\n"
                               "def f():\n    return lazy_import('..learners.trainer', package=__package__)\n"),
    "vistabench.data.__init__": "",
    "vistabench.data.d": ("from .._lazy import LazyModules\n"
                          "TOOLS = LazyModules({'a': 'vistabench.grid.g', 'b': '.ok'}, package=__package__)\n"),
    "vistabench.data.ok": "",
    "vistabench.learners.__init__": "", "vistabench.learners.trainer": "",
    "vistabench.grid.__init__": "", "vistabench.grid.g": "",
}


def test_checker_finds_a_lazy_import_pointing_up_a_floor():
    found = A.upward_imports(A.tree_from_sources(_LAZY_UP))
    assert sorted(found) == [
        "vistabench.data.d lazily imports vistabench.grid.g (layer 2 -> 10, line 2)",
        "vistabench.metrics.m lazily imports vistabench.learners.trainer (layer 1 -> 4, line 3)",
        "vistabench.metrics.rel lazily imports vistabench.learners.trainer (layer 1 -> 4, line 3)",
    ]
    # the same tree with the targets one floor lower passes
    fine = dict(_LAZY_UP, **{
        "vistabench.metrics.m": "from .._lazy import lazy_import\nlazy_import('vistabench.metrics.rel')\n",
        "vistabench.metrics.rel": "",
        "vistabench.data.d": "from .._lazy import LazyModules\nTOOLS = LazyModules({'b': '.ok'}, package=__package__)\n",
    })
    assert A.upward_imports(A.tree_from_sources(fine)) == []


def test_checker_closes_a_cycle_through_a_lazily_exported_name():
    sources = {
        "vistabench.learners.__init__": "", "vistabench.learners.x.__init__": "",
        "vistabench.learners.x.a": "from ..y import f\n",
        "vistabench.learners.y.__init__": ("from ..._lazy import lazy_exports\n"
                                           "__getattr__, __dir__ = lazy_exports(__name__, {'f': 'b'})\n"),
        "vistabench.learners.y.b": "from ..x import a\n",
    }
    assert A.find_cycles(A.tree_from_sources(sources)) == [["vistabench.learners.x.a", "vistabench.learners.y.b"]]
    # through a module alias too (``y.f``)
    sources["vistabench.learners.x.a"] = "from .. import y\ndef g():\n    return y.f\n"
    assert A.find_cycles(A.tree_from_sources(sources)) == [["vistabench.learners.x.a", "vistabench.learners.y.b"]]
    sources["vistabench.learners.y.b"] = ""
    assert A.find_cycles(A.tree_from_sources(sources)) == []


def test_checker_finds_imports_by_name_it_cannot_read():
    found = A.hidden_imports(A.tree_from_sources({
        "vistabench._lazy": "import importlib\ndef f(x):\n    return importlib.import_module(x)\n",
        "vistabench.registry": "from ._lazy import import_named\ndef f(x):\n    return import_named(x)\n",
        "vistabench.a": "import importlib\nm = importlib.import_module('vistabench.b')\n",
        "vistabench.b": "from ._lazy import lazy_import\nname = 'x'\nlazy_import(name)\nlazy_import('os')\n",
        "vistabench.c": "from ._lazy import LazyModules\nT = {'a': 'b'}\nM = LazyModules(dict(T))\nN = LazyModules(T)\n",
        "vistabench.d": "from ._lazy import import_named\nimport_named('vistabench.b')\n",
        "vistabench.e.__init__": "from .._lazy import import_submodules, lazy_exports\nimport_submodules('x')\n"
                                 "__getattr__, __dir__ = lazy_exports(__name__, dict(f='g'))\n",
    }))
    assert sorted(found) == sorted([
        "vistabench.a calls import_module (line 2); import through vistabench._lazy",
        "vistabench.b: lazy_import of a target that is not a literal (line 3)",
        "vistabench.c: LazyModules table is not a literal (line 3)",
        "vistabench.d: import_named (line 2) outside ['vistabench.learners.external', 'vistabench.registry']; "
        "declare the target (lazy_import, LazyModules)",
        "vistabench.e: import_submodules of another package than its own (line 2)",
        "vistabench.e: lazy_exports table is not a literal (line 3)",
    ])


def test_no_private_attribute_reached_by_string():
    assert A.private_string_attributes(_sources()) == []


def test_checker_finds_a_private_attribute_reached_by_string():
    found = A.private_string_attributes({
        "vistabench.jobs": ("procs = getattr(pool, '_processes', None)\nhasattr(np, '_core')\n"
                            "ok = getattr(self, '_conn', None), getattr(fn, '__qualname__', '')\n"),
    })
    assert found == ["vistabench.jobs: getattr(..., '_processes') (line 1)",
                     "vistabench.jobs: hasattr(..., '_core') (line 2)"]


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


def test_checker_finds_a_layer_entry_without_modules():
    tree = A.tree_from_sources({"vistabench.__init__": "", "vistabench.metrics.__init__": ""})
    missing = A.missing_layer_entries(tree)
    assert "vistabench.tuning" in missing and "vistabench.metrics" not in missing


def _sources() -> dict[str, str]:
    out = {}
    for path in FILES:
        name, _ = A.module_name(path, SRC.parent)
        out[name] = path.read_text(encoding="utf-8")
    return out


def test_one_registry_type_and_one_close_match_helper():
    assert A.registry_violations(_sources()) == []


def test_checker_finds_a_second_registry_and_its_own_suggestions():
    found = A.registry_violations({
        "vistabench.registry": "import difflib\nclass Registry: pass\n",
        "vistabench.learners.x": ("import difflib\nfrom difflib import get_close_matches\n"
                                  "class MethodRegistry: pass\nOPTIONS = {'a': AOptions, 'b': BOptions}\n"
                                  "SIZES = {'a': 1, 'b': 2}\n"),
    })
    assert len(found) == 4 and all(f.startswith("vistabench.learners.x") for f in found)


def test_methods_are_method_specs_in_one_registry_type():
    """Every learner family registers its methods as MethodSpecs (vistabench.methods.method_registrar);
    no learner or protocol keeps a name -> callable table beside the registries."""
    assert A.method_registry_violations(_sources()) == []


def test_every_learner_family_registry_holds_method_specs():
    from vistabench.learners.incremental import incremental_methods
    from vistabench.learners.longtail.options import lt_methods
    from vistabench.learners.smalldata.registry import methods as smalldata_methods
    from vistabench.learners.stream.registry import stream_learners
    from vistabench.methods import MethodSpec

    for registry, protocol in ((lt_methods, "longtail"), (smalldata_methods, "smalldata"),
                               (incremental_methods, "incremental"), (stream_learners, "stream")):
        specs = [spec for _, spec in registry.items()]
        assert specs and all(isinstance(s, MethodSpec) and s.protocol == protocol for s in specs), registry.kind


def test_checker_finds_a_method_table_and_a_registry_filled_by_hand():
    found = A.method_registry_violations({
        "vistabench.protocols.p": ("METHODS = {'platt': fit_platt, 'hist': lambda s: s}\n"
                                   "OK = {'a': 1, 'b': fit}\n"),
        "vistabench.learners.x": ("from ..registry import Registry\n"
                                  "xs: Registry[object] = Registry('x method')\nxs.add('a', object())\n"),
        "vistabench.learners.y": ("from ..methods import method_registrar\nfrom ..registry import Registry\n"
                                  "ys = Registry('y learner')\nregister = method_registrar(ys, 'y')\n"
                                  "models = Registry('model')\n"),
        "vistabench.data.d": "LOADERS = {'a': f, 'b': g}\n",  # not a method package
    })
    assert len(found) == 2, found
    assert found[0].startswith("vistabench.learners.x: registry xs")
    assert found[1].startswith("vistabench.protocols.p: a name -> callable table (line 1)")


def test_no_argparse_outside_the_generator():
    found = A.argparse_users(_sources())
    assert not found, f"declare an options class and add_verb (cli/verbs.py) instead: {found}"


def test_no_private_attributes_of_third_party_modules():
    found = A.third_party_private_attributes(_sources())
    assert not found, found


def test_checker_finds_argparse_outside_the_generator():
    found = A.argparse_users({
        "vistabench.cli.verbs": "import argparse\nargparse.ArgumentParser()\n",
        "vistabench.cli.x": "def f():\n    import argparse\n    return argparse.Namespace()\n",
        "vistabench.cli.y": "from argparse import Namespace\n",
        "vistabench.cli.z": "from .argparse import thing\nparser = object()\n",  # our own module of that name
    })
    assert found == ["vistabench.cli.x: imports argparse (line 2)", "vistabench.cli.x: uses argparse.Namespace (line 3)",
                     "vistabench.cli.y: imports from argparse (line 1)"]


def test_checker_finds_private_attributes_of_imported_third_party_names():
    found = A.third_party_private_attributes({
        "vistabench.a": "import argparse\ndef f(s: argparse._SubParsersAction): pass\n",
        "vistabench.b": "import numpy as np\nx = np._core.multiarray\nok = 'numpy._core.multiarray'\n",
        "vistabench.c": "from optuna import study as S\ny = S.Study._storage\n",
        "vistabench.d": "import sys\nz = sys._getframe()\nimport numpy as np\nw = np.core.__name__\n",
        "vistabench.e": "from . import helpers\nv = helpers._x\n",  # ours: test_no_private_name_crosses_a_module
    })
    assert found == ["vistabench.a: uses the private argparse._SubParsersAction (line 2)",
                     "vistabench.b: uses the private np._core.multiarray (line 2)",
                     "vistabench.c: uses the private S.Study._storage (line 2)"]
