"""Executed fidelity checks: the authors' own modules, run beside vistabench's on the same inputs.

The reference files are never vendored: ``scripts/fetch_fidelity_refs.py`` copies the files each
manifest ``tests/fidelity/refs/<name>.json`` pins into ``$VISTABENCH_FIDELITY_CACHE`` (default
``~/.cache/vistabench/fidelity``) as ``<cache>/<name>/<path>``. Without them (CI) every check skips
with the reason.

``load_reference(name, path, *, stubs=None)`` (a fixture returning the loader) imports
``<cache>/<name>/<path>`` as the module its path names (``gem/pipelines/fconv.py`` ->
``gem.pipelines.fconv``), with ``<cache>/<name>`` first on ``sys.path`` so the file's own imports of
its repository resolve to the cached copies. ``stubs`` maps module names to stand-in modules (or to
dicts of attributes, made into modules) for imports not available here; torchvision, which does not
import here, is always stood in for by ``tests/fidelity/_torchvision.py`` (written against
vistabench's code; docs/fidelity.md lists the pieces). Everything the loader adds to ``sys.modules``
and ``sys.path`` is removed when the test ends.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types
import warnings
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
MANIFESTS = _HERE / "refs"


def fidelity_cache() -> Path:
    """``$VISTABENCH_FIDELITY_CACHE`` or ``~/.cache/vistabench/fidelity`` (as the fetch script)."""
    env = os.environ.get("VISTABENCH_FIDELITY_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "vistabench" / "fidelity"


def _torchvision_standins() -> dict[str, types.ModuleType]:
    spec = importlib.util.spec_from_file_location("_fidelity_torchvision", _HERE / "_torchvision.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.modules()


def _as_module(name: str, value) -> types.ModuleType:
    if isinstance(value, types.ModuleType):
        return value
    m = types.ModuleType(name)
    m.__spec__ = importlib.machinery.ModuleSpec(name, None)
    m.__dict__.update(dict(value))
    return m


class ReferenceLoader:
    """The ``load_reference`` fixture's value: call it as ``load_reference(name, path, stubs=...)``."""

    def __init__(self) -> None:
        self._modules_before = dict(sys.modules)
        self._path_before = list(sys.path)
        self._stubbed = False
        self._names: set[str] = set()  # stand-ins put into sys.modules
        self._tops: set[str] = set()  # top-level names of the cached repositories' modules

    def root(self, name: str) -> Path:
        return fidelity_cache() / name

    def __call__(self, name: str, path: str, *, stubs: dict | None = None) -> types.ModuleType:
        pytest.importorskip("torch")
        manifest = MANIFESTS / f"{name}.json"
        if not manifest.is_file():
            raise FileNotFoundError(f"no manifest {manifest}")  # a bug in the test, not a skip
        root = self.root(name)
        file = root / path
        if not file.is_file():
            pytest.skip(f"reference {name}:{path} not in the fidelity cache {fidelity_cache()} "
                        f"(run: python scripts/fetch_fidelity_refs.py --only {name})")
        if not self._stubbed:
            try:
                importlib.import_module("torchvision")
            except ImportError:
                tv = _torchvision_standins()
                sys.modules.update(tv)
                self._names.update(tv)
            self._stubbed = True
        for mod_name, value in (stubs or {}).items():
            sys.modules[mod_name] = _as_module(mod_name, value)
            self._names.add(mod_name)
        self._tops.update(p.stem if p.suffix == ".py" else p.name for p in root.iterdir() if not p.name.startswith("."))
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        mod_name = path[:-3].replace("/", ".") if path.endswith(".py") else path.replace("/", ".")
        if mod_name.endswith(".__init__"):
            mod_name = mod_name[: -len(".__init__")]
        importlib.invalidate_caches()
        with warnings.catch_warnings():  # the references' own docstrings ("\\sum"): not ours to fix
            warnings.filterwarnings("ignore", "invalid escape sequence", DeprecationWarning)
            warnings.filterwarnings("ignore", "invalid escape sequence", SyntaxWarning)
            return importlib.import_module(mod_name)

    def close(self) -> None:
        """Undo the imports: the stand-ins and every module of a cached repository (other modules
        imported meanwhile, torch's own lazy submodules, stay: importing them twice breaks torch)."""
        for k in list(sys.modules):
            if k in self._names or k.split(".")[0] in self._tops:
                del sys.modules[k]
        for k, v in self._modules_before.items():
            if k in self._names or k.split(".")[0] in self._tops:
                sys.modules[k] = v
        sys.path[:] = self._path_before


@pytest.fixture
def load_reference():
    """``load_reference(name, path, *, stubs=None)``: the cached reference file as a module (skips
    when the cache lacks it); the imports it brought in are undone after the test."""
    loader = ReferenceLoader()
    try:
        yield loader
    finally:
        loader.close()


@pytest.fixture(autouse=True)
def _seeded():
    """Every check starts from the same global seed (the references draw from torch's global RNG)."""
    torch = pytest.importorskip("torch")
    state = torch.random.get_rng_state()
    torch.manual_seed(0)
    yield
    torch.random.set_rng_state(state)


def pytest_collection_modifyitems(config, items):
    """Mark every check here ``fidelity`` (``pytest -m fidelity`` runs just them)."""
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.fidelity)
