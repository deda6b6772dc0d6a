"""Reading a config file: a YAML or JSON mapping, a key written twice refused (PyYAML keeps the last),
integers only in plain decimal (YAML 1.1's octal, hex and base-60 forms stay text, which an integer
field refuses in one line)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .errors import InputError

__all__ = ["read_config_file", "load_yaml_text"]


def read_config_file(path: str | Path, name: str = "config") -> dict[str, Any]:
    """A YAML or JSON mapping from ``path``; duplicate keys anywhere in it are refused.

    ``name`` names the argument in messages (``--config 'x.yaml': ...``).
    """
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{name} {str(path)!r}: is a folder, expected a YAML or JSON file")
    if not p.is_file():
        raise InputError(f"{name} {str(path)!r}: no such file")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{name} {str(path)!r}: not a text file (expected YAML or JSON)") from None
    data = load_yaml_text(text, f"{name} {str(path)!r}")
    if data is None:
        raise InputError(f"{name} {str(path)!r}: empty file")
    if not isinstance(data, dict):
        raise InputError(f"{name} {str(path)!r}: expected a mapping of options, got {type(data).__name__}")
    return data


def load_yaml_text(text: str, where: str) -> Any:
    """Parse YAML (JSON is YAML) refusing a key written twice in one mapping (PyYAML keeps the last)."""
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        loader.flatten_mapping(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=deep)
            try:
                dup = key in out
            except TypeError:
                raise InputError(f"{where}: line {key_node.start_mark.line + 1}: a key must be a plain value") from None
            if dup:
                raise InputError(f"{where}: line {key_node.start_mark.line + 1}: key {key!r} written twice "
                                 "in one mapping (keep one; YAML would silently drop the first)")
            out[key] = loader.construct_object(value_node, deep=deep)
        return out

    def integer(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
        # YAML 1.1 reads 010 as octal 8, 0x10 as 16 and 1:30 as 90 (base 60); only a plain decimal is an
        # integer here: the others stay the text written, which a config's integer field refuses in one
        # line naming the field (and a string field keeps as written)
        text = loader.construct_scalar(node)
        if re.fullmatch(r"[-+]?(0|[1-9][0-9_]*)", text):
            return int(text.replace("_", ""))
        return text

    _Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    _Loader.add_constructor("tag:yaml.org,2002:int", integer)
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{where}: {at}not valid YAML/JSON ({problem})") from None
