"""Every ``vistabench`` verb, generated from one typed options class (the only module that uses argparse).

A verb is a frozen :class:`~vistabench.config.Options` dataclass (fields declared with
:func:`~vistabench.config.option`: type, default, help, ``Literal`` or ``choices=``, bounds, ``flags=``
where the flag is not ``--field-name``, ``metavar``, ``positional=True``) and one call::

    @dataclass(frozen=True, kw_only=True)
    class ProfileOptions(Options):
        num_classes: int = option(flags=("--classes",), low=1, help="number of classes C")
        kind: Literal["exp", "step"] = option("exp", help="count profile")

    group = verb_group(sub, "longtail", help="...", description="...")    # vistabench longtail ...
    add_verb(group, "profile", ProfileOptions, run=_profile,             # run(opts) -> result
             help="...", description="...", human=lambda r: ...)        # human formatter of the result

A field is a flag (a bool ``--x/--no-x``, a tuple several words, a mapping ``KEY=VALUE`` words) or a
positional argument. Flags keep the text typed; :meth:`Options.from_dict` coerces and checks every
value (the one validation vocabulary) and ``run`` receives the options instance. ``add_verb`` adds
``--json``; ``status(result) -> int`` is a verb's exit status (``grid run``: 1 when a cell failed).
:func:`store_field` gives ``--store FILE`` (and ``--no-store``), :class:`RecordOptions` the record's
``--method --dataset --seed --tag`` (the fields verbs share: :mod:`.shared_options`, re-exported here);
:func:`add_run_verb` a protocol's ``run`` verb from its
:class:`~vistabench.config.RunConfig` (every field a flag, ``--config FILE``, ``--print-config``).

Errors are one line, exit 2. :class:`~vistabench.errors.InputError` carries its field (given, or the
message's leading ``name:``); :func:`flag_message` shows it, and a field quoted in backticks, as the
verb's flag (``n_max: ...`` -> ``--n-max: ...``). An unknown option gets the close matches among the
verb's declared flags (``unrecognized option --imbalanse (did you mean --imbalance?)``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Literal, Mapping, get_args, get_origin

from ..config import FieldInfo, Options, RunConfig, read_config_file
from ..errors import InputError
from .shared_options import RecordOptions, RunOptions, TrackOptions, store_field

__all__ = ["Parser", "Verbs", "Verb", "new_command_line", "verb_group", "add_verb", "add_run_verb",
           "store_field", "RecordOptions", "RunOptions", "TrackOptions", "walk", "flag_message", "render_yaml"]

_OPT = "opt__"  # argparse dest of a verb option's flag (``opt__n_max``)
_CFG = "cfg__"  # argparse dest of a run config field's flag (``cfg__lr``)
_CONFIG_FILE, _PRINT_CONFIG = "run__config_file", "run__print_config"
_FROM_FILE = "run__from_config_file"  # (path, the fields whose value the --config file gave)


# ---------------------------------------------------------------------------------------------- parser
class Parser(argparse.ArgumentParser):
    """argparse's parser with our conventions: an error is one line (exit 2) that names each unknown
    option with its close matches among the declared flags; output goes straight to the stream (a
    closed pipe reaches ``main``, which ends quietly with 141)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.flags: list[str] = []  # every option string declared on this parser (for the hints)
        self.verbs: Verbs | None = None  # its sub-commands, when it has some
        self.argv: list[str] = []  # what this (sub-)command was given
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> Any:
        action = super().add_argument(*args, **kwargs)
        self.flags.extend(action.option_strings)
        return action

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self.argv = [str(a) for a in (sys.argv[1:] if args is None else args)]
        namespace, extras = super().parse_known_args(args, namespace)
        if extras and self.verbs is None:  # a verb's own unknown options: named here, with suggestions
            self.error("unrecognized arguments: " + " ".join(extras))
        return namespace, extras

    def unknown_options(self) -> list[str]:
        """"unrecognized option --imbalanse (did you mean --imbalance?)" for each unknown option given."""
        from ..registry import close_names

        if self.verbs is not None:
            return []
        known = [o for o in self.flags if o.startswith("--")]
        out = []
        for token in self.argv:
            if token == "--":
                break
            name = token.split("=", 1)[0]
            if not name.startswith("-") or re.fullmatch(r"-\d[\d.e+-]*", name) or name in self.flags:
                continue
            if self.allow_abbrev and name.startswith("--") and any(o.startswith(name) for o in known):
                continue  # an abbreviation argparse accepts
            close = close_names(name, known, n=2, cutoff=0.6)
            out.append(f"unrecognized option {name}" + (f" (did you mean {' or '.join(close)}?)" if close else
                                                         f" (options: {', '.join(sorted(known))})"))
        return out

    def error(self, message: str) -> typing.NoReturn:  # one line, exit 2 (argparse's own convention)
        unknown = self.unknown_options()
        if unknown:  # the cause of "unrecognized arguments", and often of "required: --x" (a typo of --x)
            message = "; ".join(unknown + ([] if message.startswith("unrecognized arguments") else [message]))
        self.exit(2, f"{self.prog}: error: {message}\n")

    def print_usage(self, file: Any = None) -> None:
        (file or sys.stdout).write(self.format_usage())

    def print_help(self, file: Any = None) -> None:
        (file or sys.stdout).write(self.format_help())

    def exit(self, status: int = 0, message: str | None = None) -> typing.NoReturn:
        if message:
            sys.stderr.write(message)
        sys.exit(status)


class _Version(argparse.Action):
    """``--version``: print it and exit."""

    def __init__(self, option_strings: Any, version: str, dest: str = argparse.SUPPRESS,
                 help: str = "show the version and exit") -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, help=help)
        self.version = version

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        sys.stdout.write(self.version + "\n")
        parser.exit()


def _formatter(description: str | None) -> Any:
    """A description written with line breaks is shown as written; a paragraph is wrapped."""
    return argparse.RawDescriptionHelpFormatter if description and "\n" in description else argparse.HelpFormatter


class Verbs:
    """The sub-commands of one parser (``vistabench longtail`` -> profile, split, ...).

    ``words``: the command line's leading words (``("detection", "score")``), when only the verb they
    name will be parsed: every other verb on the way is added with its name and help line only (what
    "invalid choice" and ``--help`` list), not its flags. Empty: every verb whole."""

    def __init__(self, parser: Parser, path: tuple[str, ...], *, dest: str, metavar: str = "VERB",
                 words: tuple[str, ...] = (), on_path: bool = True) -> None:
        self.parser, self.path, self.words, self.on_path = parser, path, words, on_path
        self.children: dict[str, Verb | Verbs] = {}
        self.action = parser.add_subparsers(dest=dest, metavar=metavar, parser_class=Parser, required=True)
        parser.verbs = self

    def names(self) -> list[str]:
        """The sub-commands' names (aliases included)."""
        return list(self.action.choices)

    def wants(self, name: str, aliases: typing.Sequence[str] = ()) -> bool:
        """True when the verb ``name`` is to be added whole: it is on the command line's path, or
        the words stop before this level."""
        depth = len(self.path)
        return self.on_path and (len(self.words) <= depth or self.words[depth] in (name, *aliases))

    def new_parser(self, name: str, *, help: str, description: str | None = None,
                   aliases: typing.Sequence[str] = ()) -> Parser:
        return self.action.add_parser(name, help=help, description=description, aliases=list(aliases),
                                      formatter_class=_formatter(description))


def new_command_line(*, prog: str, description: str, epilog: str, version: str,
                     words: typing.Sequence[str] = ()) -> tuple[Parser, Verbs]:
    """The top-level parser (``--version``, ``--help``) and its commands; ``words``: see :class:`Verbs`."""
    parser = Parser(prog=prog, description=description, epilog=epilog, formatter_class=_formatter(description))
    parser.add_argument("--version", action=_Version, version=version)
    return parser, Verbs(parser, (), dest="command", metavar="COMMAND", words=tuple(words))


def verb_group(group: Verbs, name: str, *, help: str, description: str | None = None,
               aliases: typing.Sequence[str] = ()) -> Verbs:
    """``vistabench ... NAME VERB``: a command whose verbs are added to the returned group."""
    parser = group.new_parser(name, help=help, description=description, aliases=aliases)
    verbs = Verbs(parser, group.path + (name,), dest="verb" if not group.path else f"verb{len(group.path) + 1}",
                  words=group.words, on_path=group.wants(name, aliases))
    for n in (name, *aliases):
        group.children[n] = verbs
    return verbs


# ---------------------------------------------------------------------------------------------- verbs
@dataclass(frozen=True)
class Verb:
    """One generated verb: what it takes and what runs it."""

    path: tuple[str, ...]  # ("longtail", "profile")
    options: type[Options]
    run: Callable[..., Any]  # run(opts); a run verb's: the protocol's run(config, *, store, work_dir)
    human: Callable[[Any], str] | None = None
    status: Callable[[Any], int] | None = None
    config: type[RunConfig] | None = None  # a run verb's config class
    pinned: Mapping[str, Any] = field(default_factory=dict)
    check: Callable[[dict[str, Any]], None] | None = None
    flags: tuple[str, ...] = ()  # every option string of the verb (``--json`` and ``--help`` included)

    @property
    def command(self) -> str:
        return " ".join(self.path)

    def fields(self) -> list[FieldInfo]:
        """The verb's fields: its options' and, for a run verb, its config's."""
        return self.options.fields_info() + (self.config.fields_info() if self.config else [])

    def flag_of(self, name: str) -> str | None:
        """How the user gives the field ``name`` (``n_max`` -> ``--n-max``; a positional: its metavar)."""
        for info in self.fields():
            if info.name == name:
                return (info.metavar or info.name.upper()) if info.positional else info.flag()
        return None

    def invoke(self, ns: argparse.Namespace) -> tuple[Any, Callable[[Any], str] | None]:
        """Build the options from the parsed words and run: ``(result, human formatter)``."""
        opts = self.options.from_dict(_given(ns, _OPT))
        if self.config is None:
            if isinstance(opts, TrackOptions) and opts.track:
                return self._run_tracked(ns, opts), self.human
            return self.run(opts), self.human
        return self._run_config(ns, opts)

    def _run_tracked(self, ns: argparse.Namespace, opts: Any) -> Any:
        """A ``score`` verb with ``--track``: its records logged (:func:`vistabench.tracking.track_scores`)."""
        from ..tracking import track_scores

        log = None if getattr(ns, "json", False) else (lambda line: print(line, file=sys.stderr))
        options = {k: v for k, v in opts.to_dict().items() if k not in ("track", "track_dir")}
        return track_scores(lambda: self.run(opts), protocol=self.path[0], command=self.command, options=options,
                            tools=opts.track, track_dir=opts.track_dir, store=getattr(opts, "store", None),
                            log=log)

    def _run_config(self, ns: argparse.Namespace, opts: Any) -> tuple[Any, Callable[[Any], str] | None]:
        given = config_given(ns)
        for name, value in self.pinned.items():
            if given.get(name, value) != value:
                raise InputError(f"{name}: `{self.command}` runs {name} {value!r}, got {given[name]!r}; use `run`")
            given[name] = value
        printing = bool(getattr(ns, _PRINT_CONFIG, False))
        if self.check is not None and not printing:  # printing a config reads no data
            self.check(given)
        assert self.config is not None
        config = self.config.from_dict(given)
        if printing:
            return config.to_dict(), render_yaml
        from contextlib import nullcontext

        from ..extras import require
        from ..store import ResultsStore
        from ..suite import get_protocol
        from ..tracking import run_tracked

        require(*get_protocol(self.config.protocol).needs("run"), what=f"`vistabench {self.command}`")
        log = None if getattr(ns, "json", False) else (lambda line: print(line, file=sys.stderr))
        store_path = getattr(opts, "store", None) if writes_records() else None
        with (ResultsStore(store_path) if store_path else nullcontext()) as store:
            records = run_tracked(self.run, config, store=store, work_dir=getattr(opts, "out", None), log=log)
        dicts = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in records]
        if store is None:
            for d in dicts:
                d["id"] = None
        return (dicts[0] if len(dicts) == 1 else {"records": dicts}), self.human


def writes_records() -> bool:
    """Whether this process writes the run's records: under ``torchrun`` (``RANK``, ``WORLD_SIZE``,
    ``LOCAL_RANK`` set) every process runs the same command and trains the same model together
    (``TrainConfig.devices``); only rank 0 opens the results store, the others run with no store
    (their records keep ``id`` None)."""
    if "RANK" not in os.environ:
        return True
    from ..learners.distributed import torchrun_env  # under torchrun the run imports torch anyway

    env = torchrun_env()
    return env is None or env[0] == 0


def add_verb(group: Verbs, name: str, options: type[Options], *, run: Callable[[Any], Any], help: str,
             description: str | None = None, human: Callable[[Any], str] | None = None,
             status: Callable[[Any], int] | None = None, json: bool = True,
             aliases: typing.Sequence[str] = ()) -> Verb:
    """``vistabench ... NAME``: one flag (or positional) per field of ``options``; ``run(opts)`` returns
    the result, which ``--json`` prints as JSON and ``human`` renders otherwise."""
    parser = group.new_parser(name, help=help, description=description, aliases=aliases)
    verb = Verb(group.path + (name,), options, run, human, status)
    if not group.wants(name, aliases):
        return verb  # not on the command line: its name and help line only
    for info in options.fields_info():
        _add_field(parser, parser, info, _OPT)
    return _finish(group, parser, verb, json, (name, *aliases))


def add_run_verb(group: Verbs, name: str, config: type[RunConfig], *, run: Callable[..., Any], help: str,
                 description: str | None = None, options: type[Options] | None = None,
                 human: Callable[[Any], str] | None = None, pinned: Mapping[str, Any] | None = None,
                 check: Callable[[dict[str, Any]], None] | None = None,
                 aliases: typing.Sequence[str] = ()) -> Verb:
    """A protocol's ``run`` verb: every field of ``config`` a flag, ``--config FILE``, ``--print-config``,
    and the fields of ``options`` (default :class:`RunOptions`: ``--out``, ``--store``/``--no-store``).

    ``run(config, *, store, work_dir)`` is the protocol's run (called through
    :func:`vistabench.tracking.run_tracked`; ``work_dir`` is ``opts.out``); the verb returns its
    record, or ``{"records": [...]}``. ``pinned``: config fields this verb fixes (``smalldata tune``
    runs ``stages="tune"``); a flag or ``--config`` giving another value is refused. ``check(given)``
    looks at the given config values before the config is built (not with ``--print-config``).
    """
    options = options or RunOptions
    parser = group.new_parser(name, help=help, description=description, aliases=aliases)
    verb = Verb(group.path + (name,), options, run, human, None, config, dict(pinned or {}), check)
    if not group.wants(name, aliases):
        return verb  # not on the command line: its name and help line only
    part = parser.add_argument_group(
        "configuration", "every field of the run's config; a flag overrides --config FILE; "
                         "--print-config shows the resolved values")
    _add(parser, part, "--config", metavar="FILE", dest=_CONFIG_FILE,
         help="YAML or JSON file of config fields (as --print-config writes it)")
    _add(parser, part, "--print-config", action="store_true", dest=_PRINT_CONFIG,
         help="print the fully resolved config (defaults and recipe filled in; with --json as JSON) and exit "
              "without running")
    for info in config.fields_info():
        _add_field(parser, part, info, _CFG, alt=True)
    for info in options.fields_info():
        _add_field(parser, parser, info, _OPT)
    return _finish(group, parser, verb, True, (name, *aliases))


def _finish(group: Verbs, parser: Parser, verb: Verb, json: bool, names: tuple[str, ...]) -> Verb:
    if json:
        parser.add_argument("--json", action="store_true",
                            help="print one JSON object (for scripts); no progress output")
    verb = dataclasses.replace(verb, flags=tuple(parser.flags))
    parser.set_defaults(verb_spec=verb, human=verb.human)
    for n in names:
        group.children[n] = verb
    return verb


def walk(parser: Parser, path: tuple[str, ...] = (), *, aliases: bool = False
         ) -> Iterator[tuple[tuple[str, ...], Verb]]:
    """Every verb under ``parser`` with the words that name it: once, or under each alias too."""
    if parser.verbs is None:
        return
    seen: set[int] = set()
    for name, child in parser.verbs.children.items():
        if id(child) in seen and not aliases:
            continue
        seen.add(id(child))
        if isinstance(child, Verb):
            yield path + (name,), child
        else:
            yield from walk(child.parser, path + (name,), aliases=aliases)


# ---------------------------------------------------------------------------------------------- fields
def _add(parser: Parser, target: Any, *names: str, **kwargs: Any) -> Any:
    action = target.add_argument(*names, **kwargs)
    if target is not parser:  # an argument group's: the parser's own list has it too
        parser.flags.extend(action.option_strings)
    return action


class _KeyValue(argparse.Action):
    """``--flag KEY=VALUE ...`` (repeatable) collected into a dict of strings."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        current = dict(getattr(namespace, self.dest, None) or {})
        for item in values:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                parser.error(f"{option_string}: expected KEY=VALUE, got {item!r}")
            current[key.strip()] = value
        setattr(namespace, self.dest, current)


def _is_tuple(tp: Any) -> bool:
    return get_origin(tp) is tuple or any(get_origin(a) is tuple for a in get_args(tp))


def _is_mapping(tp: Any) -> bool:
    if get_origin(tp) is dict or tp is dict:
        return True
    if get_origin(tp) in (typing.Union, types.UnionType):  # e.g. ``dict | MethodOptions``
        return all(_is_mapping(a) for a in get_args(tp) if a is not type(None))
    return isinstance(tp, type) and issubclass(tp, Options)


def _literal_values(tp: Any) -> tuple[Any, ...]:
    """The values of a ``Literal[...]`` type (also inside ``X | None`` or ``tuple[...]``); () otherwise."""
    if get_origin(tp) is Literal:
        return get_args(tp)
    return tuple(v for a in get_args(tp) for v in _literal_values(a))


def _open_types(tp: Any) -> tuple[Any, ...]:
    """The non-literal, non-None types of a union beside its ``Literal`` (``int`` in
    ``int | Literal["smallest_class"] | None``): a value of one of them is accepted too."""
    if get_origin(tp) not in (typing.Union, types.UnionType):
        return ()
    return tuple(a for a in get_args(tp) if a is not type(None) and get_origin(a) is not Literal)


_TYPE_WORDS = {int: ("N", "an integer"), float: ("X", "a number"), str: ("TEXT", "a text")}


def _help(info: FieldInfo) -> str:
    text = info.help.replace("%", "%%")
    choices = info.choices if info.choices is not None else _literal_values(info.type)
    if choices:
        words = [_TYPE_WORDS.get(t, ("", "a value"))[1] for t in _open_types(info.type)] if info.choices is None else []
        text += (f" ({' or '.join(words)}, or one of: {', '.join(map(str, choices))})" if words
                 else f" (one of: {', '.join(map(str, choices))})")
    if info.required and not info.positional:
        text += " [required]"
    elif not info.required and info.default not in (None, ()) and not _is_mapping(info.type) \
            and "(default" not in info.help:  # a help that words its default keeps its words
        default = info.default
        if isinstance(default, tuple):
            default = " ".join(map(str, default))
        text += f" (default: {default})".replace("%", "%%")
    if info.runtime:
        text += " [runtime only: not part of the run's key]"
    return text


def _metavar(info: FieldInfo) -> str | None:
    if info.metavar:
        return info.metavar
    if info.type is bool or _is_mapping(info.type):
        return None
    choices = info.choices if info.choices is not None else _literal_values(info.type)
    if not choices:
        return info.name.upper()
    # a Literal beside an open type (int | Literal["smallest_class"]): {N,smallest_class}, not only the word
    opened = [_TYPE_WORDS.get(t, (info.name.upper(), ""))[0] for t in _open_types(info.type)] if info.choices is None else []
    return "{" + ",".join(opened + list(map(str, choices))) + "}"


def _add_field(parser: Parser, target: Any, info: FieldInfo, prefix: str, *, alt: bool = False) -> None:
    """The argument of one field, its value kept as typed: ``Options.from_dict`` checks it, a missing
    required flag included (after the values given, as a config file's fields are checked)."""
    dest = prefix + info.name
    kwargs: dict[str, Any] = {"help": _help(info), "default": argparse.SUPPRESS}
    if info.positional:  # argparse says when a required one is missing (before any option is read)
        metavar = info.metavar or info.name.upper()
        nargs = ("+" if info.required else "*") if _is_tuple(info.type) else (None if info.required else "?")
        _add(parser, target, dest, metavar=metavar, nargs=nargs, **kwargs)
        return
    flags = list(info.flags) or ["--" + info.name.replace("_", "-")]
    if alt:  # a run config's field also answers to --name-with-dashes (older spellings kept)
        dashed = "--" + info.name.replace("_", "-")
        if dashed not in flags and "--" + info.name not in flags:
            flags.append(dashed)
    kwargs["dest"] = dest
    metavar = _metavar(info)
    if metavar is not None:
        kwargs["metavar"] = metavar
    if info.repeatable:
        _add(parser, target, *flags, action="extend", nargs="+", **kwargs)
    elif info.type is bool:
        _add(parser, target, *flags, action=argparse.BooleanOptionalAction, **kwargs)
    elif _is_mapping(info.type):
        kwargs.setdefault("metavar", "KEY=VALUE")
        _add(parser, target, *flags, action=_KeyValue, nargs="+", **kwargs)
    elif _is_tuple(info.type):
        _add(parser, target, *flags, nargs="+", **kwargs)
    else:
        _add(parser, target, *flags, **kwargs)
    if info.none_flag:
        _add(parser, target, info.none_flag, dest=dest, action="store_const", const=None, default=argparse.SUPPRESS,
             help=argparse.SUPPRESS if info.none_help is None else info.none_help.replace("%", "%%"))


def _given(ns: argparse.Namespace, prefix: str) -> dict[str, Any]:
    return {dest[len(prefix):]: value for dest, value in vars(ns).items() if dest.startswith(prefix)}


def config_given(ns: argparse.Namespace) -> dict[str, Any]:
    """A run verb's config fields from ``--config FILE`` and the flags (flags win), as given."""
    values: dict[str, Any] = {}
    path = getattr(ns, _CONFIG_FILE, None)
    if path is not None:
        values.update(read_config_file(path, "--config"))
    from_file = {str(k).replace("-", "_") for k in values}
    for name, value in _given(ns, _CFG).items():
        if name in values and isinstance(values[name], dict) and isinstance(value, dict):
            value = {**values[name], **value}  # --method-opt k=v adds to the file's options
        values = {k: v for k, v in values.items() if k.replace("-", "_") != name}
        values[name] = value
        from_file.discard(name)
    if path is not None:  # a message about a field the file gave names the file and its key, not a flag
        setattr(ns, _FROM_FILE, (str(path), frozenset(from_file)))
    return values


def render_yaml(config: dict[str, Any]) -> str:
    """``--print-config`` without ``--json``: the resolved config as YAML (what ``--config`` reads)."""
    import yaml

    return yaml.safe_dump(config, sort_keys=False, default_flow_style=None, allow_unicode=True).rstrip()


# ---------------------------------------------------------------------------------------------- errors
def flag_message(message: str, exc: BaseException, verb: Verb | None, ns: argparse.Namespace | None = None) -> str:
    """``message`` with the field it names at its start shown as the verb's flag (``n_max: ...`` ->
    ``--n-max: ...``), and a field quoted in backticks (`` `predictions` ``) too. A field whose value
    came from the ``--config`` file (``ns``: the parsed command line) is shown as the file and its key
    (``--config 'c.yaml': key lr: ...``): the user wrote no such flag."""
    if verb is None:
        return message
    name = getattr(exc, "field", None)
    path, from_file = getattr(ns, _FROM_FILE, (None, frozenset()))
    if name is not None and name.split(".")[0] in from_file:
        match = re.match(re.escape(name) + r"(?=: | '|=|:$)", message)
        rest = message[len(name):] if match else f": {message}"
        message = f"--config {path!r}: key {name}{rest}"
    elif name is not None:
        flag = verb.flag_of(name)
        if flag is not None:
            if re.match(re.escape(name) + r"(?=: | '|=|:$)", message):
                message = flag + message[len(name):]
            elif not message.startswith(flag):
                message = f"{flag}: {message}"
    return re.sub(r"`(\w+)`", lambda m: verb.flag_of(m.group(1)) or m.group(0), message)
