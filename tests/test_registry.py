"""Registry: close-match suggestions, and entries registered by modules imported on first lookup."""

import sys
import types

import pytest

from vistabench.errors import InputError
from vistabench.registry import Registry


def test_entries_from_plugin_modules_are_loaded_on_first_lookup(monkeypatch):
    reg = Registry("widget", modules=("_vb_test_plugin",))
    imported = []

    def _plugin():
        mod = types.ModuleType("_vb_test_plugin")
        imported.append(True)
        reg.register("late")(42)
        return mod

    class _Finder:  # import hook standing in for a real module file
        def find_spec(self, name, path=None, target=None):
            if name != "_vb_test_plugin":
                return None
            import importlib.util

            loader = types.SimpleNamespace(create_module=lambda spec: _plugin(), exec_module=lambda m: None)
            return importlib.util.spec_from_loader(name, loader)

    monkeypatch.setattr(sys, "meta_path", [_Finder()] + sys.meta_path)
    monkeypatch.delitem(sys.modules, "_vb_test_plugin", raising=False)
    reg.register("early")(1)
    assert not imported  # registering does not load the plugins
    assert reg.get("late") == 42 and imported == [True]
    assert reg.names() == ["early", "late"] and imported == [True]  # loaded once


def test_unknown_name_suggests_close_matches():
    reg = Registry("widget")
    reg.register("alpha")(1)
    with pytest.raises(InputError, match="did you mean 'alpha'"):
        reg.get("alpah")
    with pytest.raises(RuntimeError, match="registered twice"):
        reg.register("alpha")(2)
