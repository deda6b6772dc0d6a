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


def test_did_you_mean_and_the_field_leading_the_message():
    from vistabench.registry import did_you_mean

    assert did_you_mean("tinny", ["tiny", "huge"]) == "; did you mean 'tiny'?"
    assert did_you_mean("zzz", ["tiny"]) == ""
    assert did_you_mean("dims", ["dim", "depth"], quote=False) == "; did you mean dim?"
    reg = Registry("widget")
    reg.add("alpha", 1)
    with pytest.raises(InputError, match=r"^method: unknown widget 'alpah'; did you mean 'alpha'\? \(known: alpha\)$"):
        reg.get("alpah", field="method")


def test_resolve_ref_imports_module_attributes_and_modules():
    import os.path

    from vistabench.registry import resolve_ref

    assert resolve_ref("os.path:join") is os.path.join
    assert resolve_ref("os.path") is os.path
    with pytest.raises(ValueError, match="module:attribute"):
        resolve_ref(":join")
    with pytest.raises(AttributeError):
        resolve_ref("os.path:no_such_name")


def test_suggestions_ignore_case_hyphens_and_spaces_but_never_accept():
    from vistabench.registry import close_names

    assert close_names("LDAM-DRW", ["ce", "ldam_drw", "focal"]) == ["ldam_drw"]
    assert close_names("Logit Adjust", ["logit_adjust", "lade"])[0] == "logit_adjust"
    assert close_names("xyz", ["ldam_drw"]) == []
    r = Registry("method")
    r.add("ldam_drw", object())
    with pytest.raises(InputError, match=r"unknown method 'LDAM-DRW'; did you mean 'ldam_drw'\?"):
        r.get("LDAM-DRW")
