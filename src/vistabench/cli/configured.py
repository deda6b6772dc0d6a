"""Command-line options generated from a typed run configuration (:mod:`vistabench.config`).

:func:`add_config_options` gives a ``run`` verb one flag per config field (``--name-with-dashes``,
or the field's declared ``flags``), plus ``--config FILE`` (YAML or JSON; flags override it) and
``--print-config`` (print the fully resolved config and exit; with ``--json`` as JSON). Flags keep
their values as the user typed them; :func:`config_from_args` hands file values and flags to
``Config.from_dict``, the one place where they are coerced and checked, so a bad value gets the same
message from a flag, a config file and a grid cell (the CLI shows the field as its flag).
"""

from __future__ import annotations

import argparse
import sys
import types
import typing
from typing import Any, Literal, get_args, get_origin

from ..config import FieldInfo, Options, RunConfig, read_config_file
from ..errors import InputError

_PREFIX = "cfg__"  # argparse dest of a config field's flag (``cfg__lr``); ``cfg___file`` etc. are ours

__all__ = ["add_config_options", "config_from_args", "print_config_result", "flag_names",
           "field_of_dest"]


def field_of_dest(dest: str) -> str:
    """The config field an argparse ``dest`` holds (``dest`` itself when it is no config field's)."""
    return dest[len(_PREFIX):] if dest.startswith(_PREFIX) and not dest.startswith(_PREFIX + "_") else dest


def _is_tuple(tp: Any) -> bool:
    if get_origin(tp) is tuple:
        return True
    return any(get_origin(a) is tuple for a in get_args(tp))


def _is_mapping(tp: Any) -> bool:
    if get_origin(tp) is dict or tp is dict:
        return True
    if get_origin(tp) in (typing.Union, types.UnionType):  # e.g. ``dict | MethodOptions``
        return all(_is_mapping(a) for a in get_args(tp) if a is not type(None))
    return isinstance(tp, type) and issubclass(tp, Options)


def _is_bool(tp: Any) -> bool:
    return tp is bool


class _KeyValue(argparse.Action):
    """``--flag KEY=VALUE`` (repeatable) collected into a dict of strings."""

    def __call__(self, parser, namespace, values, option_string=None):  # noqa: D102
        current = dict(getattr(namespace, self.dest, None) or {})
        for item in values:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                parser.error(f"{option_string}: expected KEY=VALUE, got {item!r}")
            current[key.strip()] = value
        setattr(namespace, self.dest, current)


def _literal_values(tp: Any) -> tuple[Any, ...]:
    """The values of a ``Literal[...]`` type (also inside ``X | None``); () otherwise."""
    if get_origin(tp) is Literal:
        return get_args(tp)
    return tuple(v for a in get_args(tp) if get_origin(a) is Literal for v in get_args(a))


def _help(info: FieldInfo) -> str:
    text = info.help.replace("%", "%%")
    choices = info.choices if info.choices is not None else _literal_values(info.type)
    if choices:
        text += f" (one of: {', '.join(map(str, choices))})"
    if info.required:
        text += " [required]"
    elif info.default is not None and not _is_mapping(info.type):
        default = info.default
        if isinstance(default, tuple):
            default = " ".join(map(str, default))
        text += f" (default: {default})"
    if info.runtime:
        text += " [runtime only: never changes the result]"
    return text


def flag_names(config_cls: type[Options]) -> dict[str, str]:
    """Field name -> its main flag (for messages)."""
    return {i.name: i.flag() for i in config_cls.fields_info()}


def add_config_options(parser: argparse.ArgumentParser, config_cls: type[RunConfig], *,
                       extra_flags: dict[str, tuple[str, ...]] | None = None) -> None:
    """Add ``--config``, ``--print-config`` and one flag per field of ``config_cls`` to ``parser``.

    ``extra_flags``: more spellings of a field's flag (kept for compatibility).
    """
    group = parser.add_argument_group(
        "configuration", "every field of the run's config; a flag overrides --config FILE; "
                         "--print-config shows the resolved values")
    group.add_argument("--config", metavar="FILE", dest=_PREFIX + "_file",
                       help="YAML or JSON file of config fields (as --print-config writes it)")
    group.add_argument("--print-config", action="store_true", dest=_PREFIX + "_print",
                       help="print the fully resolved config (defaults and recipe filled in; with --json as "
                            "JSON) and exit without running")
    for info in config_cls.fields_info():
        flags = list(info.flags) or ["--" + info.name.replace("_", "-")]
        alt = "--" + info.name.replace("_", "-")
        if alt not in flags and "--" + info.name not in flags:
            flags.append(alt)
        for extra in (extra_flags or {}).get(info.name, ()):
            if extra not in flags:
                flags.append(extra)
        kwargs: dict[str, Any] = {"dest": _PREFIX + info.name, "default": argparse.SUPPRESS, "help": _help(info)}
        if info.metavar:
            kwargs["metavar"] = info.metavar
        elif not _is_bool(info.type) and not _is_mapping(info.type):  # not argparse's "CFG__NAME"
            choices = info.choices if info.choices is not None else _literal_values(info.type)
            kwargs["metavar"] = "{" + ",".join(map(str, choices)) + "}" if choices else info.name.upper()
        if info.repeatable:
            group.add_argument(*flags, action="extend", nargs="+", **kwargs)
        elif _is_bool(info.type):
            group.add_argument(*flags, action=argparse.BooleanOptionalAction, **kwargs)
        elif _is_mapping(info.type):
            kwargs.setdefault("metavar", "KEY=VALUE")
            group.add_argument(*flags, action=_KeyValue, nargs="+", **kwargs)
        elif _is_tuple(info.type):
            group.add_argument(*flags, nargs="+", **kwargs)
        else:
            group.add_argument(*flags, **kwargs)


def given_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields set by ``--config`` and the flags (flags win), as given."""
    values: dict[str, Any] = {}
    path = getattr(args, _PREFIX + "_file", None)
    if path is not None:
        values.update(read_config_file(path, "--config"))
    for dest, value in vars(args).items():
        name = field_of_dest(dest)
        if name != dest:
            if name in values and isinstance(values[name], dict) and isinstance(value, dict):
                value = {**values[name], **value}  # --method-opt k=v adds to the file's options
            values = {k: v for k, v in values.items() if k.replace("-", "_") != name}
            values[name] = value
    return values


def config_from_args(config_cls: type[RunConfig], args: argparse.Namespace) -> RunConfig:
    """The run's config from ``--config`` and the flags (the one place they are checked)."""
    return config_cls.from_dict(given_from_args(args))


def wants_print(args: argparse.Namespace) -> bool:
    return bool(getattr(args, _PREFIX + "_print", False))


def print_config_result(config: RunConfig) -> dict[str, Any]:
    """What ``--print-config`` prints: the resolved config (loadable by ``--config``)."""
    return config.to_dict()


def render_yaml(config: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(config, sort_keys=False, default_flow_style=None, allow_unicode=True).rstrip()


def run_verb(config_cls: type[RunConfig], run: Any, *, human: Any = None, pinned: dict[str, Any] | None = None,
             verb: str = "run", other_verb: str = "run") -> tuple[Any, Any]:
    """A handler for ``vistabench <p> run``: build the config, print it or run it.

    Returns ``(handler, human)`` for ``set_defaults``. ``run(config, *, store, work_dir)`` is the
    protocol's run; ``--store``/``--no-store`` and ``--out`` (the work folder) come from ``args``.
    ``pinned``: fields this verb (named ``verb``) fixes, e.g. ``smalldata tune`` runs ``stages="tune"``;
    a flag or ``--config`` giving another value is refused (``other_verb`` runs any).
    """

    def handler(args: argparse.Namespace) -> Any:
        given = given_from_args(args)
        for name, value in (pinned or {}).items():
            if given.get(name, value) != value:
                raise InputError(f"{name}: `{verb}` runs {name} {value!r}, got {given[name]!r}; use `{other_verb}`")
            given[name] = value
        config = config_cls.from_dict(given)
        if wants_print(args):
            args.human = render_yaml
            return print_config_result(config)
        from contextlib import nullcontext

        from ..extras import require
        from ..store import ResultsStore
        from ..suite import get_protocol

        command = f"`vistabench {config_cls.protocol} {getattr(args, 'verb', 'run')}`"
        require(*get_protocol(config_cls.protocol).needs("run"), what=command)

        store_path = getattr(args, "store", None)
        from ..tracking import run_tracked

        log = None if getattr(args, "json", False) else (lambda line: print(line, file=sys.stderr))
        with (ResultsStore(store_path) if store_path else nullcontext()) as store:
            records = run_tracked(run, config, store=store, work_dir=getattr(args, "out", None), log=log)
        dicts = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in records]
        if store is None:
            for d in dicts:
                d["id"] = None
        return dicts[0] if len(dicts) == 1 else {"records": dicts}

    return handler, human

