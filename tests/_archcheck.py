"""The rules of tests/test_architecture.py as pure functions over source text (so the tests can feed
them a tree that breaks each rule and see it caught).

Every import statement counts, wherever it is written (a function-level import is a dependency and
closes a cycle like any other); so does every import made by name through :mod:`vistabench._lazy`,
whose declared targets (string literals) are read here as edges of the module that writes them.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: Layers, bottom first. A module may import modules of its own layer or below, never above.
#: Entries are module prefixes; the longest matching prefix decides a module's layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("vistabench", "vistabench.errors", "vistabench.jsonutil", "vistabench.atomic", "vistabench._validation",
     "vistabench._lazy", "vistabench.extras", "vistabench.epochs",
     "vistabench.options", "vistabench.config_files", "vistabench.config", "vistabench.registry", "vistabench.methods", "vistabench.progress"),
    ("vistabench.metrics",),
    ("vistabench.data", "vistabench.store", "vistabench.streams"),
    ("vistabench.tuning",),
    ("vistabench.learners",),
    ("vistabench.protocols",),
    ("vistabench.suite", "vistabench.compat"),
    ("vistabench.report",),
    ("vistabench.demos",),
    ("vistabench.tracking",),
    ("vistabench.grid",),
    ("vistabench.cli", "vistabench.__main__"),
)


def layer_of(module: str) -> int | None:
    best, best_len = None, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    return best


@dataclass
class ImportInfo:
    target: str          # the module imported (relative imports resolved)
    names: list[str]     # names imported from it (``from target import a, b``)
    aliases: list[str]   # local names bound to a module (``import x.y as z`` -> z; ``from p import mod``)
    line: int
    top_level: bool
    lazy: bool = False   # declared through vistabench._lazy (imported on first use)


@dataclass
class Module:
    name: str
    is_package: bool
    source: str
    imports: list[ImportInfo] = field(default_factory=list)
    #: ``lazy_exports``: public name -> the sub-module (full name) that defines it
    lazy_names: dict[str, str] = field(default_factory=dict)
    #: lazy imports this checker cannot read (a target that is not a literal), as messages
    hidden: list[str] = field(default_factory=list)


def module_name(path: Path, src_root: Path) -> tuple[str, bool]:
    parts = path.relative_to(src_root).with_suffix("").parts
    is_pkg = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_pkg else parts), is_pkg


#: the module that makes every import by name (``importlib.import_module`` is called there only)
LAZY_MODULE = "vistabench._lazy"
#: the modules allowed to import a module named at run time (``import_named``): the registry's
#: references and a user's ``--model MODULE:FUNCTION``
RUNTIME_NAME_MODULES = {"vistabench.registry", "vistabench.learners.external"}


def _absolute(target: str, package: str) -> str:
    """``target`` (``"a.b"``, ``".b"``, ``"..b"``; ``":attr"`` dropped) as an absolute module name."""
    target = target.partition(":")[0]
    dots = len(target) - len(target.lstrip("."))
    if not dots:
        return target
    base = package.split(".")
    base = base[: len(base) - (dots - 1)]
    return ".".join(base + ([target[dots:]] if target[dots:] else []))


def _literal_table(node: ast.expr | None, assigned: dict[str, ast.expr]) -> dict[str, str] | None:
    """A ``{name: module}`` table written as a literal (or a module-level name bound to one; ``**``
    of ``{n: "mod" for n in (...)}`` included); None when it is not a literal."""
    if isinstance(node, ast.Name) and node.id in assigned:
        node = assigned[node.id]
    if not isinstance(node, ast.Dict):
        return None
    out: dict[str, str] = {}
    for key, value in zip(node.keys, node.values):
        if key is None:  # **{name: "module" for name in ("a", "b")}
            if not (isinstance(value, ast.DictComp) and isinstance(value.value, ast.Constant)
                    and isinstance(value.value.value, str) and len(value.generators) == 1
                    and isinstance(value.generators[0].iter, (ast.Tuple, ast.List))
                    and all(isinstance(e, ast.Constant) for e in value.generators[0].iter.elts)):
                return None
            out.update({str(e.value): value.value.value for e in value.generators[0].iter.elts})
        elif (isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(value, ast.Constant)
              and isinstance(value.value, str)):
            out[key.value] = value.value
        else:
            return None
    return out


def _call_name(node: ast.Call) -> str:
    return node.func.id if isinstance(node.func, ast.Name) else node.func.attr if isinstance(node.func, ast.Attribute) \
        else ""


def _lazy_edges(mod: Module, tree: ast.Module, package: str) -> None:
    """The imports ``mod`` declares through :mod:`vistabench._lazy` (appended to ``mod.imports``),
    its ``lazy_exports`` table (``mod.lazy_names``) and the lazy imports it hides (``mod.hidden``)."""
    assigned = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn, line = _call_name(node), node.lineno
        first = node.args[0] if node.args else None
        if fn in ("import_module", "__import__") and mod.name != LAZY_MODULE:
            mod.hidden.append(f"{mod.name} calls {fn} (line {line}); import through vistabench._lazy")
        elif fn == "lazy_exports" and mod.name != LAZY_MODULE:
            table = _literal_table(node.args[1] if len(node.args) > 1 else None, assigned)
            if table is None:
                mod.hidden.append(f"{mod.name}: lazy_exports table is not a literal (line {line})")
                continue
            for public, sub in table.items():
                mod.lazy_names[public] = f"{package}.{sub}"
            for sub in sorted(set(table.values())):
                mod.imports.append(ImportInfo(f"{package}.{sub}", [], [], line, False, lazy=True))
        elif fn == "lazy_import" and mod.name != LAZY_MODULE:
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                mod.hidden.append(f"{mod.name}: lazy_import of a target that is not a literal (line {line})")
                continue
            mod.imports.append(ImportInfo(_absolute(first.value, package), [], [], line, False, lazy=True))
        elif fn == "LazyModules" and mod.name != LAZY_MODULE:
            table = _literal_table(first, assigned)
            if table is None:
                mod.hidden.append(f"{mod.name}: LazyModules table is not a literal (line {line})")
                continue
            for target in sorted(set(table.values())):
                mod.imports.append(ImportInfo(_absolute(target, package), [], [], line, False, lazy=True))
        elif fn == "import_submodules" and mod.name != LAZY_MODULE:
            if not (isinstance(first, ast.Name) and first.id == "__name__" and mod.is_package):
                mod.hidden.append(f"{mod.name}: import_submodules of another package than its own (line {line})")
                continue
            mod.imports.append(ImportInfo(f"{mod.name}.*", [], [], line, False, lazy=True))
        elif fn == "import_named" and mod.name not in RUNTIME_NAME_MODULES | {LAZY_MODULE}:
            mod.hidden.append(f"{mod.name}: import_named (line {line}) outside {sorted(RUNTIME_NAME_MODULES)}; "
                              "declare the target (lazy_import, LazyModules)")


def _resolve_lazy(tree: dict[str, Module]) -> None:
    """Second pass over a whole tree: ``import_submodules`` becomes an edge to each module of the
    package, and ``from package import name`` (or ``package.name`` through a module alias) of a
    name the package exports lazily an edge to the sub-module that defines it."""
    for mod in tree.values():
        expanded = []
        for imp in mod.imports:
            if imp.lazy and imp.target.endswith(".*"):
                package = imp.target[:-2]
                expanded += [ImportInfo(m, [], [], imp.line, False, lazy=True) for m in sorted(tree)
                             if m.rpartition(".")[0] == package]
            else:
                expanded.append(imp)
        mod.imports = expanded
    for mod in tree.values():
        extra = []
        aliases: dict[str, str] = {}
        for imp in mod.imports:
            lazy = tree[imp.target].lazy_names if imp.target in tree else {}
            extra += [ImportInfo(lazy[n], [n], [], imp.line, imp.top_level, lazy=True) for n in imp.names if n in lazy]
            if lazy and not imp.names:
                aliases.update({a: imp.target for a in imp.aliases or [imp.target.split(".")[-1]]})
        if aliases:
            for node in ast.walk(ast.parse(mod.source)):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                    target = tree[aliases[node.value.id]].lazy_names.get(node.attr)
                    if target:
                        extra.append(ImportInfo(target, [node.attr], [], node.lineno, False, lazy=True))
        mod.imports += extra


def hidden_imports(tree: dict[str, Module]) -> list[str]:
    """Imports by name the checker cannot read: ``importlib.import_module``/``__import__`` outside
    :data:`LAZY_MODULE`; a lazy import whose target is not a literal; ``import_named`` outside
    :data:`RUNTIME_NAME_MODULES`."""
    return [h for mod in tree.values() for h in mod.hidden]


def parse(name: str, source: str, *, is_package: bool, known: set[str]) -> Module:
    """Parse one module's imports (``known``: every module name of the tree, to tell a sub-module
    imported with ``from pkg import sub`` from a name of ``pkg``)."""
    package = name if is_package else name.rpartition(".")[0]
    tree = ast.parse(source)
    top = {id(n) for n in tree.body}
    # imports inside `if TYPE_CHECKING:` at top level count as top level too
    for node in tree.body:
        if isinstance(node, ast.If):
            top |= {id(n) for n in ast.walk(node)}
    mod = Module(name, is_package, source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                alias = a.asname or a.name.split(".")[0]
                mod.imports.append(ImportInfo(a.name, [], [alias] if a.asname else [], node.lineno, id(node) in top))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            plain, aliases = [], []
            for a in node.names:
                sub = f"{target}.{a.name}"
                if sub in known:  # `from pkg import submodule`: an import of the sub-module
                    mod.imports.append(ImportInfo(sub, [], [a.asname or a.name], node.lineno, id(node) in top))
                else:
                    plain.append(a.name)
            if plain:
                mod.imports.append(ImportInfo(target, plain, aliases, node.lineno, id(node) in top))
    _lazy_edges(mod, tree, package)
    return mod


def load_tree(src_root: Path, package: str = "vistabench") -> dict[str, Module]:
    files = sorted((src_root / package).rglob("*.py"))
    names = {module_name(f, src_root)[0] for f in files}
    out = {}
    for f in files:
        name, is_pkg = module_name(f, src_root)
        out[name] = parse(name, f.read_text(encoding="utf-8"), is_package=is_pkg, known=names)
    _resolve_lazy(out)
    return out


def tree_from_sources(sources: dict[str, str]) -> dict[str, Module]:
    """A tree from ``{"pkg.mod": source}`` (a name ending in ``.__init__`` is a package)."""
    names = {n.removesuffix(".__init__") for n in sources}
    tree = {n.removesuffix(".__init__"): parse(n.removesuffix(".__init__"), s, is_package=n.endswith(".__init__"),
                                               known=names)
            for n, s in sources.items()}
    _resolve_lazy(tree)
    return tree


def dependency_graph(tree: dict[str, Module], *, top_level_only: bool = False) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, mod in tree.items():
        deps = set()
        for imp in mod.imports:
            if top_level_only and not imp.top_level:
                continue
            if imp.target in tree and imp.target != name:  # a module of the tree (not a third party)
                deps.add(imp.target)
        graph[name] = deps
    return graph


def _inside(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent + ".")


def find_cycles(tree: dict[str, Module]) -> list[list[str]]:
    """Import cycles between modules, function-level imports included.

    A package's ``__init__`` importing its own sub-modules (and those importing names of their
    package) is how packages are built, not a cycle: edges from a package into itself are skipped.
    """
    graph = dependency_graph(tree)
    for m, deps in graph.items():
        graph[m] = {d for d in deps if not (_inside(d, m) or (tree[d].is_package and _inside(m, d)))}
    cycles: list[list[str]] = []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    counter = [0]

    def strong(v: str) -> None:  # Tarjan's strongly connected components (iterative-free, small trees)
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return cycles


def missing_layer_entries(tree: dict[str, Module]) -> list[str]:
    """Prefixes of :data:`LAYERS` that name no module of the tree (a layer that does not exist)."""
    return [p for prefixes in LAYERS for p in prefixes
            if not any(name == p or name.startswith(p + ".") for name in tree)]


def upward_imports(tree: dict[str, Module]) -> list[str]:
    """``"a imports b (layer i -> j, line n)"`` for every import of a higher layer."""
    out = []
    for name, mod in tree.items():
        la = layer_of(name)
        for imp in mod.imports:
            if not imp.target.startswith("vistabench"):
                continue
            lb = layer_of(imp.target)
            if la is None or lb is None:
                out.append(f"{name} imports {imp.target}: a module outside the declared layers")
            elif lb > la:
                how = "lazily imports" if imp.lazy else "imports"
                out.append(f"{name} {how} {imp.target} (layer {la} -> {lb}, line {imp.line})")
    return out


def private_crossings(tree: dict[str, Module]) -> list[str]:
    """Private names (``_x``) used from another module: imported by name, through a module alias
    (``models._Block``), or a private module imported from outside its own package."""
    out = []
    for name, mod in tree.items():
        module_aliases: set[str] = set()
        for imp in mod.imports:
            if not imp.target.startswith("vistabench"):
                continue
            private = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
            if private:
                out.append(f"{name} imports private {private} from {imp.target} (line {imp.line})")
            last = imp.target.rpartition(".")
            if last[2].startswith("_") and not last[2].startswith("__") and not _inside(name, last[0]):
                out.append(f"{name} imports private module {imp.target} from outside {last[0]} (line {imp.line})")
            if imp.target in tree:
                module_aliases.update(imp.aliases or ([imp.target.split(".")[-1]] if not imp.names else []))
        if not module_aliases:
            continue
        for node in ast.walk(ast.parse(mod.source)):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in module_aliases and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                out.append(f"{name} uses private {node.value.id}.{node.attr} (line {node.lineno})")
    return out


#: the one module allowed to compute close matches and to define a registry type
REGISTRY_MODULE = "vistabench.registry"


def registry_violations(sources: dict[str, str]) -> list[str]:
    """Name -> object registries outside the one :class:`vistabench.registry.Registry` type.

    ``sources``: module name -> source text. Flags: ``difflib`` used outside ``vistabench.registry``
    (close-match suggestions are written once, there); a class named ``*Registry`` defined elsewhere;
    a module-level dict literal of two or more ``"name": Class`` entries (a hand-kept name -> class
    table beside the registry).
    """
    out = []
    for name, source in sorted(sources.items()):
        if name == REGISTRY_MODULE:
            continue
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == "difflib" for a in node.names):
                out.append(f"{name}: imports difflib (line {node.lineno}); use vistabench.registry.did_you_mean")
            elif isinstance(node, ast.ImportFrom) and node.module == "difflib":
                out.append(f"{name}: imports from difflib (line {node.lineno}); use vistabench.registry.did_you_mean")
            elif isinstance(node, ast.ClassDef) and node.name.endswith("Registry"):
                out.append(f"{name}: defines {node.name} (line {node.lineno}); use vistabench.registry.Registry")
        for node in tree.body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if (isinstance(value, ast.Dict) and len(value.keys) >= 2
                    and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in value.keys)
                    and all(isinstance(v, ast.Name) and v.id[:1].isupper() for v in value.values)):
                out.append(f"{name}: a name -> class table (line {node.lineno}); register in a "
                           "vistabench.registry.Registry")
    return out


#: where methods live: every registry of methods there is filled through vistabench.methods
METHOD_PACKAGES = ("vistabench.learners", "vistabench.protocols")


def _is_callable_ref(node: ast.expr) -> bool:
    """A function or class named (``f``, ``mod.f``) or written in place (``lambda``)."""
    return isinstance(node, (ast.Name, ast.Attribute, ast.Lambda))


def method_registry_violations(sources: dict[str, str]) -> list[str]:
    """One registry type for methods: in :data:`METHOD_PACKAGES`,

    - no module-level dict literal maps two or more names (string keys) to functions or classes
      (a hand-kept ``{"name": fn}`` dispatch table beside the registries): name -> callable tables
      are a :class:`vistabench.registry.Registry`;
    - in ``vistabench.learners``, a module-level ``Registry`` of methods or learners (its kind says
      ``method`` or ``learner``) is filled by :func:`vistabench.methods.method_registrar` in the
      same module, so every entry is a :class:`vistabench.methods.MethodSpec`.
    """
    out = []
    for name, source in sorted(sources.items()):
        if not any(name == p or name.startswith(p + ".") for p in METHOD_PACKAGES):
            continue
        tree = ast.parse(source)
        registrar_args = {a.id for node in ast.walk(tree)
                          if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                          and node.func.id == "method_registrar"
                          for a in node.args[:1] if isinstance(a, ast.Name)}
        for node in tree.body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if (isinstance(value, ast.Dict) and len(value.keys) >= 2
                    and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in value.keys)
                    and all(_is_callable_ref(v) for v in value.values)):
                out.append(f"{name}: a name -> callable table (line {node.lineno}); use a vistabench.registry.Registry")
            target = (node.targets[0] if isinstance(node, ast.Assign) else node.target
                      if isinstance(node, ast.AnnAssign) else None)
            if (name.startswith("vistabench.learners") and isinstance(target, ast.Name)
                    and isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "Registry"
                    and value.args and isinstance(value.args[0], ast.Constant)
                    and any(w in str(value.args[0].value) for w in ("method", "learner"))
                    and target.id not in registrar_args):
                out.append(f"{name}: registry {target.id} (line {node.lineno}) of {value.args[0].value}s is not "
                           "filled by vistabench.methods.method_registrar (one MethodSpec per method)")
    return out


#: the modules allowed to use argparse: the verb generator (every other module declares options classes)
ARGPARSE_MODULES = {"vistabench.cli.verbs"}


def argparse_users(sources: dict[str, str]) -> list[str]:
    """Modules other than :data:`ARGPARSE_MODULES` that import argparse (``import argparse``, ``from
    argparse import ...``, wherever written) or name it (``argparse.X``)."""
    out = []
    for name, source in sorted(sources.items()):
        if name in ARGPARSE_MODULES:
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "argparse" for a in node.names):
                out.append(f"{name}: imports argparse (line {node.lineno})")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "argparse" \
                    and not node.level:
                out.append(f"{name}: imports from argparse (line {node.lineno})")
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "argparse":
                out.append(f"{name}: uses argparse.{node.attr} (line {node.lineno})")
    return out


def _foreign(module: str) -> bool:
    """A third-party module, or argparse (whose private classes the CLI once reached into)."""
    root = module.split(".")[0]
    return root != "vistabench" and (root == "argparse" or root not in sys.stdlib_module_names)


def third_party_private_attributes(sources: dict[str, str]) -> list[str]:
    """Attribute accesses ``x._name`` (anywhere along ``x.a._b``) where ``x`` is a name bound by an
    import of a third-party module or of argparse (``import numpy as np``, ``from optuna import
    study``): their private parts change without notice. Text (``"numpy._core.multiarray"`` in an
    allow-list) is not an access."""
    out = []
    for name, source in sorted(sources.items()):
        tree = ast.parse(source)
        foreign: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                foreign.update((a.asname or a.name.split(".")[0]) for a in node.names if _foreign(a.name))
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module and _foreign(node.module):
                foreign.update((a.asname or a.name) for a in node.names)
        if not foreign:
            continue
        attributes = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
        inner = {id(n.value) for n in attributes if isinstance(n.value, ast.Attribute)}
        for node in attributes:
            if id(node) in inner:  # part of a longer access: reported once, from the outermost
                continue
            chain, base = [node.attr], node.value
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in foreign:
                private = [a for a in chain if a.startswith("_") and not a.startswith("__")]
                if private:
                    path = ".".join([base.id, *reversed(chain)])
                    out.append(f"{name}: uses the private {path} (line {node.lineno})")
    return out


def private_string_attributes(sources: dict[str, str]) -> list[str]:
    """``getattr(x, "_name")`` (and ``hasattr``/``setattr``/``delattr``) with a private name written as
    text, on anything but the object's own ``self``/``cls``: a private attribute reached by string
    (a third-party object's, e.g. ``ProcessPoolExecutor._processes``) is still a private attribute."""
    out = []
    for name, source in sorted(sources.items()):
        for node in ast.walk(ast.parse(source)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr", "setattr", "delattr") and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
                    and node.args[1].value.startswith("_") and not node.args[1].value.startswith("__")
                    and not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls"))):
                out.append(f"{name}: {node.func.id}(..., {node.args[1].value!r}) (line {node.lineno})")
    return out
