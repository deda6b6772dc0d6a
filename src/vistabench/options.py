"""Typed options: how a field is declared (:func:`option`), how a given value is coerced and checked
against that declaration, and :class:`Options`, the frozen dataclass of such fields (a method's
hyper-parameters; :class:`vistabench.config.RunConfig` builds on it).

A field is declared with :func:`option`: its default, help text, allowed values or range, and whether it
is *runtime-only* (it changes where or how fast a run goes, never its result). :meth:`Options.from_dict`
accepts ``-`` or ``_`` in names (one option under both spellings is refused), coerces strings (from a
command line or an environment) to the field's type, refuses an unknown name with close matches, and
raises :class:`~vistabench.errors.InputError` whose message starts with the field's name
(``lr: expected a number > 0, got -1``).

The same rules check a function's arguments at the boundary: :func:`check_value` runs a field's
coercion and range checks on one value (the one validation vocabulary of the package).

This module imports neither torch nor any protocol; :mod:`vistabench.config` re-exports its names.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
import types
import typing
from dataclasses import MISSING, dataclass, field
from typing import Any, Literal, Mapping, TypeVar, Union, get_args, get_origin

from .errors import InputError
from .registry import did_you_mean

__all__ = ["option", "FieldInfo", "Options", "NO_KEY_DEFAULT", "INT_LIMIT", "FLOAT32_MAX", "base_type",
           "check_value", "check_bounds", "check_fields", "field_infos", "jsonable", "parse_int"]

_META = "vistabench"


class _NoKeyDefault:
    def __repr__(self) -> str:
        return "NO_KEY_DEFAULT"


#: ``key_default`` of a field that is always part of a grid cell's key.
NO_KEY_DEFAULT: Any = _NoKeyDefault()

C = TypeVar("C", bound="Options")

@dataclass(frozen=True)
class FieldInfo:
    """What :func:`option` declares about one field (plus its name, type and default)."""

    name: str
    type: Any
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    runtime: bool = False
    flags: tuple[str, ...] = ()
    key_default: Any = NO_KEY_DEFAULT
    metavar: str | None = None
    finite: bool = True
    repeatable: bool = False
    positional: bool = False
    none_flag: str | None = None
    none_help: str | None = None

    @property
    def required(self) -> bool:
        return self.default is MISSING

    def flag(self) -> str:
        """The command-line flag: the first of ``flags``, else ``--name-with-dashes``."""
        return self.flags[0] if self.flags else "--" + self.name.replace("_", "-")

    def describe(self) -> dict[str, Any]:
        """JSON-able description (``vistabench <p> run --print-config --json`` documents fields by it)."""
        return {"name": self.name, "type": _type_name(self.type),
                "default": None if self.required else jsonable(self.default), "required": self.required,
                "help": self.help, "choices": None if self.choices is None else list(self.choices),
                "low": self.low, "high": self.high, "runtime_only": self.runtime}


def option(default: Any = MISSING, *, help: str, choices: typing.Sequence[Any] | None = None,
           low: float | None = None, high: float | None = None, low_open: bool = False,
           runtime: bool = False, flags: typing.Sequence[str] = (), key_default: Any = NO_KEY_DEFAULT,
           metavar: str | None = None, finite: bool = True, repeatable: bool = False,
           positional: bool = False, none_flag: str | None = None, none_help: str | None = None,
           default_factory: Any = MISSING) -> Any:
    """Declare a config field.

    Parameters
    ----------
    default : the value when the user gives none (omit for a required field).
    help : one sentence for ``--help`` and the printed config's documentation.
    choices : the allowed values (checked after coercion; close matches are suggested).
    low, high : inclusive bounds of a number (``low_open=True``: ``> low``); for a tuple, of each item.
        An integer field without ``low`` is ``>= 0`` (counts, indices and seeds are never negative), and
        every integer lies within ``±INT_LIMIT`` (int32); an integer written with a leading zero
        (``010``, octal to YAML) is refused.
    runtime : changes where or how fast a run goes, never its result (left out of a grid cell's key).
    flags : command-line spellings, the first being the main one (default ``--name-with-dashes``).
    key_default : a field added after grids existed drops out of the cell key while it holds this
        value (the value older runs used), so stored cells keep their keys.
    finite : refuse NaN and infinities (default).
    repeatable : a list field whose flag may be given several times, the values adding up
        (``--track mlflow --track tensorboard``); other list flags keep their last use.
    positional : on the command line, a positional argument (``vistabench grid run CONFIG.yaml``) rather
        than a flag; a list field takes every remaining word.
    none_flag, none_help : a flag that sets the field to None and its help (``--no-store``: store
        nothing); ``none_help`` None hides the flag from ``--help``.
    """
    meta = {"help": help, "choices": None if choices is None else tuple(choices), "low": low, "high": high,
            "low_open": low_open, "runtime": runtime, "flags": tuple(flags), "key_default": key_default,
            "metavar": metavar, "finite": finite, "repeatable": repeatable, "positional": positional,
            "none_flag": none_flag, "none_help": none_help}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata={_META: meta})
    return field(default=default, metadata={_META: meta})


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(map(repr, get_args(tp)))
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(a) for a in get_args(tp))
    if origin is tuple:
        return f"list of {_type_name(get_args(tp)[0])}"
    if origin is dict:
        return "mapping"
    return getattr(tp, "__name__", str(tp))


def jsonable(value: Any) -> Any:
    """``value`` as JSON writes it: options as their dict, tuples as lists, mapping keys as strings."""
    if isinstance(value, Options):
        return value.to_dict()
    if isinstance(value, tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return value


#: the largest float32: every number of a config ends up in float32 tensors
FLOAT32_MAX = 3.4028234663852886e38

#: every integer of a config is a count, an index or a seed: within int32's range, so that it is the same
#: number in numpy, torch and SQLite on every platform (a bigger one would end in their internal errors)
INT_LIMIT = 2**31 - 1

#: an integer written with a leading zero: YAML 1.1 reads ``010`` as octal 8, Python and JSON as 10 (or not
#: at all), so such a value is refused rather than guessed
_LEADING_ZERO = re.compile(r"[+-]?0[0-9_]+")

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _coerce(value: Any, tp: Any, name: str, info: FieldInfo | None) -> Any:
    """``value`` as type ``tp`` (strings from a command line are parsed); InputError naming ``name``."""
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        return _coerce_union(value, tp, name, info)
    if origin is Literal:
        allowed = get_args(tp)
        if value in allowed:
            return value
        raise InputError(f"{name}: expected one of {', '.join(map(str, allowed))}, got {value!r}"
                         f"{did_you_mean(value, allowed, n=2)}")
    if origin is tuple:
        return _coerce_tuple(value, get_args(tp)[0], name, info)
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            raise InputError(f"{name}: expected a mapping (KEY: VALUE), got {value!r}")
        return {str(k): v for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, Options):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise InputError(f"{name}: expected a mapping of options, got {value!r}")
        return tp.from_dict(value, prefix=f"{name}.")
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise InputError(f"{name}: expected true or false, got {value!r}")
    if tp is int:
        return _coerce_int(value, name)
    if tp is float:
        return _coerce_float(value, name, info)
    if tp is str:
        if isinstance(value, (dict, list, tuple)) or value is None:
            raise InputError(f"{name}: expected a string, got {value!r}")
        return str(value)
    raise TypeError(f"config field {name}: unsupported type {tp!r}")  # a bug of the config's declaration


def _coerce_union(value: Any, tp: Any, name: str, info: FieldInfo | None) -> Any:
    """None (or none/null) where allowed, else the first member taking ``value`` (else the first's error)."""
    args = get_args(tp)
    if value is None or (isinstance(value, str) and value.lower() in ("none", "null") and type(None) in args):
        if type(None) in args:
            return None
    errors = []
    for arg in (a for a in args if a is not type(None)):
        try:
            return _coerce(value, arg, name, info)
        except InputError as exc:
            errors.append(exc)
    raise errors[0] if errors else InputError(f"{name}: expected {_type_name(tp)}, got {value!r}")


def _coerce_tuple(value: Any, item: Any, name: str, info: FieldInfo | None) -> tuple:
    """A tuple of ``item``: from a list, an array, one value, or words separated by commas or spaces."""
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split() if v]
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):  # a numpy array
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        value = [value]
    if item is not str:  # the words of a command line's list flag may be comma-separated too (--ap old,fixed)
        value = [w for v in value for w in (v.replace(",", " ").split() if isinstance(v, str) else [v])]
    return tuple(_coerce(v, item, name, info) for v in value)


def _coerce_int(value: Any, name: str) -> int:
    """An integer (numpy's too; a float with an integral value; a decimal string), within ``INT_LIMIT``."""
    if isinstance(value, bool):
        raise InputError(f"{name}: expected an integer, got {value!r}")
    out: int | None = None
    if isinstance(value, numbers.Integral):  # numpy's integers included
        out = int(value)
    elif isinstance(value, numbers.Real) and float(value).is_integer():
        out = int(value)
    elif isinstance(value, str):
        _refuse_leading_zero(value, name)
        try:
            out = int(value.strip())
        except ValueError:
            pass
    if out is None:
        raise InputError(f"{name}: expected an integer, got {value!r}")
    if abs(out) > INT_LIMIT:
        raise InputError(f"{name}: expected an integer between {-INT_LIMIT} and {INT_LIMIT}, got {value!r}")
    return out


def _coerce_float(value: Any, name: str, info: FieldInfo | None) -> float:
    """A number; finite and within float32's range unless the field allows infinities (``info.finite``)."""
    if isinstance(value, bool):
        raise InputError(f"{name}: expected a number, got {value!r}")
    if isinstance(value, str):
        _refuse_leading_zero(value, name)
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name}: expected a number, got {value!r}") from None
    if (info is None or info.finite) and not math.isfinite(out):
        raise InputError(f"{name}: expected a finite number, got {value!r}")
    if (info is None or info.finite) and abs(out) > FLOAT32_MAX:  # torch would overflow converting it
        raise InputError(f"{name}: expected a number within float32's range (|x| <= {FLOAT32_MAX:.4g}), "
                         f"got {value!r}")
    return out


def check_bounds(v: float, name: str, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, noun: str = "a number") -> None:
    """The range rule of :func:`option` (``low``/``high``/``low_open``) on one number: InputError
    naming ``name`` (``lr: expected a number > 0, got -1``; ``noun`` words what is expected)."""
    if low is not None and (v <= low if low_open else v < low):
        bound = f"> {low:g}" if low_open else f">= {low:g}"
        if high is not None:
            bound += f" and <= {high:g}"
        raise InputError(f"{name}: expected {noun} {bound}, got {v!r}")
    if high is not None and v > high:
        raise InputError(f"{name}: expected {noun} <= {high:g}, got {v!r}")


def parse_int(value: Any, name: str, *, low: int | None = 0) -> int:
    """``value`` (a command-line string, a number) as an integer by the rules of every config integer:
    no fraction, no bool, no leading zero, within ``±INT_LIMIT``, ``>= low`` (None: no lower bound)."""
    out = _coerce(value, int, name, None)
    check_bounds(out, name, low=low, noun="an integer")
    return out


def _refuse_leading_zero(text: str, name: str) -> None:
    if _LEADING_ZERO.fullmatch(text.strip()):
        raise InputError(f"{name}: {text.strip()!r} has a leading zero, which YAML reads as an octal number and "
                         "Python as a decimal one; write the number without the leading zero")


def base_type(tp: Any) -> Any:
    """``int`` for ``int``, ``int | None`` and ``tuple[int, ...]`` (the type a range applies to)."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        return base_type(args[0]) if len(args) == 1 else tp
    if origin is tuple:
        return base_type(get_args(tp)[0])
    return tp


def _check_range(value: Any, name: str, info: FieldInfo) -> None:
    items = value if isinstance(value, tuple) else (value,)
    for v in items:
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            continue
        check_bounds(v, name, low=info.low, high=info.high, low_open=info.low_open)
    if info.choices is not None:
        for v in items:
            if v not in info.choices:
                raise InputError(f"{name}: expected one of {', '.join(map(str, info.choices))}, "
                                 f"got {v!r}{did_you_mean(v, info.choices, n=2)}")


def check_value(value: Any, name: str, *, type: Any = None, low: float | None = None, high: float | None = None,
                low_open: bool = False, choices: typing.Sequence[Any] | None = None, finite: bool = True) -> Any:
    """``value`` checked by the rules :func:`option` declares (the same code a config field runs):
    coerced to ``type`` (a wrong kind of value: :class:`~vistabench.errors.InputTypeError`), then its
    range and choices (InputError). The one check of a function's scalar arguments at the boundary.

    ``type``: ``float`` (the default), ``int``, ``str``, ``int | None``, ...; with ``choices`` and no
    ``type``, the value is compared as given. An integer given no ``low`` may be negative here (a
    config's integer field is ``>= 0`` unless it declares ``low``: a function says what it needs).

    >>> check_value("3", "epochs", type=int, low=1)
    3
    >>> check_value(0, "lr", low=0, low_open=True)
    Traceback (most recent call last):
    ...
    vistabench.errors.InputError: lr: expected a number > 0, got 0.0
    """
    from .errors import InputTypeError

    if type is None:
        type = Any if choices is not None else float
    info = FieldInfo(name=name, type=type, default=MISSING, help="", low=low, high=high, low_open=low_open,
                     choices=None if choices is None else tuple(choices), finite=finite)
    try:
        out = _coerce(value, type, name, info)
    except InputError as exc:
        raise InputTypeError(str(exc)) from None
    _check_range(out, name, info)
    return out


def field_infos(cls: type) -> list[FieldInfo]:
    """Every field's declaration of the dataclass ``cls``, in declaration order."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        meta = dict(f.metadata.get(_META) or {"help": ""})
        if meta.get("low") is None and base_type(hints[f.name]) is int:
            meta["low"] = 0  # a config integer (count, index, seed) is never negative unless declared so
        default = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else MISSING)
        out.append(FieldInfo(name=f.name, type=hints[f.name], default=default, **meta))
    return out


def check_fields(obj: Any, *, declared_only: bool = False) -> None:
    """Coerce and check every field of the dataclass ``obj`` by its declaration (type, :func:`option`'s
    range and choices), in place; ``declared_only``: only the fields declared with :func:`option`."""
    declared = {f.name for f in dataclasses.fields(obj) if _META in f.metadata}
    for info in field_infos(type(obj)):
        if declared_only and info.name not in declared:
            continue
        value = getattr(obj, info.name)
        coerced = _coerce(value, info.type, info.name, info)
        _check_range(coerced, info.name, info)
        if coerced is not value:
            object.__setattr__(obj, info.name, coerced)


@dataclass(frozen=True, kw_only=True)
class Options:
    """A frozen, typed, validated set of options (a method's hyper-parameters, a run's config).

    Subclasses are ``@dataclass(frozen=True, kw_only=True)`` with fields declared by :func:`option`.
    Construct them with :meth:`from_dict` (coercion, presets, close-match errors); direct
    construction validates types and ranges too. Override :meth:`check` for rules across fields.
    """

    @classmethod
    def fields_info(cls) -> list[FieldInfo]:
        """Every field's declaration, in declaration order."""
        return field_infos(cls)

    @classmethod
    def field_info(cls, name: str) -> FieldInfo:
        for info in cls.fields_info():
            if info.name == name:
                return info
        raise KeyError(name)

    def __post_init__(self) -> None:
        check_fields(self)
        self.check()

    def check(self) -> None:
        """Rules across fields (override); raise InputError naming the field."""

    @classmethod
    def resolve(cls, given: dict[str, Any]) -> dict[str, Any]:
        """Fill in presets from the given fields (override for recipes); the given values win."""
        return given

    @classmethod
    def normalise_names(cls, values: Mapping[str, Any], *, prefix: str = "") -> dict[str, Any]:
        """``values`` with ``-`` read as ``_``; unknown names and one name spelt two ways are refused."""
        known = {info.name for info in cls.fields_info()}
        out: dict[str, Any] = {}
        spelt: dict[str, str] = {}
        for raw, value in values.items():
            if not isinstance(raw, str):
                raise InputError(f"{prefix}{raw!r}: option names are strings")
            name = raw.strip().replace("-", "_")
            if name in spelt:
                raise InputError(f"{prefix}{name}: given twice ({spelt[name]!r} and {raw!r}); keep one")
            if name not in known:
                hint = did_you_mean(name, sorted(known), cutoff=0.6, quote=False)
                raise InputError(f"{prefix}{raw}: unknown option{hint} (known: {', '.join(sorted(known))})")
            spelt[name] = raw
            out[name] = value
        return out

    @classmethod
    def from_dict(cls: type[C], values: Mapping[str, Any] | None = None, *, prefix: str = "") -> C:
        """Build from a mapping (a config file, CLI flags, a grid cell): coerce, resolve, validate."""
        if values is not None and not isinstance(values, Mapping):
            raise InputError(f"{prefix or 'config'}: expected a mapping of options, got {values!r}")
        given = cls.normalise_names(values or {}, prefix=prefix)
        infos = {i.name: i for i in cls.fields_info()}
        given = {k: _coerce(v, infos[k].type, prefix + k, infos[k]) for k, v in given.items()}
        resolved = cls.resolve(dict(given))
        missing = [i.name for i in infos.values() if i.required and i.name not in resolved]
        if missing:
            raise InputError(f"{prefix}{missing[0]}: required (no default); give a value")
        try:
            obj = cls(**resolved)
        except InputError as exc:
            if prefix and not str(exc).startswith(prefix):
                raise InputError(prefix + str(exc)) from None
            raise
        object.__setattr__(obj, "_given", dict(given))
        return obj

    @classmethod
    def check_field(cls, name: str, value: Any) -> Any:
        """``value`` coerced and checked by the declaration of the field ``name`` (what making the
        options does for each field); InputError naming it. A name not declared is a bug of ours."""
        info = cls.field_info(name)
        out = _coerce(value, info.type, name, info)
        _check_range(out, name, info)
        return out

    @classmethod
    def from_checked(cls: type[C], **values: Any) -> C:
        """Build from values that another declaration with the same or narrower rules has checked
        already (a run config's fields handed to the evaluation it runs): the fields are not checked
        again; the rules across them (:meth:`check`) are. A name this class does not declare is a bug
        of ours."""
        declared = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(declared))
        if unknown:
            raise TypeError(f"{cls.__name__}.from_checked: {unknown[0]!r} is not a field")  # our bug
        obj = object.__new__(cls)
        for name, f in declared.items():
            if name in values:
                value = values[name]
            elif f.default is not dataclasses.MISSING:
                value = f.default
            elif f.default_factory is not dataclasses.MISSING:
                value = f.default_factory()
            else:
                raise TypeError(f"{cls.__name__}.from_checked: {name!r} has no default; give it")  # our bug
            object.__setattr__(obj, name, value)
        obj.check()
        return obj

    def given(self) -> dict[str, Any]:
        """The fields the user set (before presets and defaults)."""
        return dict(getattr(self, "_given", {}))

    def with_changes(self: C, **changes: Any) -> C:
        """A new config with ``changes`` applied to what was given (presets are resolved again)."""
        return type(self).from_dict({**self.given(), **changes})

    def to_dict(self) -> dict[str, Any]:
        """Every field, resolved, JSON-able, in declaration order."""
        return {info.name: jsonable(getattr(self, info.name)) for info in self.fields_info()}
