"""Typed run configurations: the one description of a run that the CLI, the grid and notebooks build.

A protocol's :class:`RunConfig` is a frozen dataclass. Every field is typed and declared with
:func:`option`: its default, help text, allowed values or range, and whether it is *runtime-only*
(it changes where or how fast a run goes, never its result: ``device``, ``threads``, ...). A
method's own hyper-parameters are an :class:`Options` dataclass of the same kind, so they are
validated, printed and stored the same way.

Building a config is the single place where input is checked::

    cfg = LongtailConfig.from_dict({"data": "digits", "method": "ce", "imbalance": 10})

:meth:`Options.from_dict` accepts ``-`` or ``_`` in names (one option under both spellings is
refused), coerces strings (from a command line or an environment) to the field's type, refuses an
unknown name with close matches, and raises :class:`~vistabench.errors.InputError` whose message
starts with the field's name (``lr: expected a number > 0, got -1``): the CLI shows it with the flag
(``--lr``), a grid with the config key. A config class may fill in defaults that depend on other
fields (a *recipe*: a named preset of fields, chosen by the data or by the user) by overriding
:meth:`Options.resolve`; what the user gave always wins over a preset.

:meth:`RunConfig.to_dict` is the fully resolved config (JSON-able; ``--print-config`` prints it
and ``--config`` reads it back); :meth:`RunConfig.key_dict` drops the runtime-only fields, and the
fields added after grids existed while they hold the value older runs used (``key_default``), so a
stored grid cell keeps its key when a field is added.

The parts live in small modules, all re-exported here: :mod:`vistabench.options` (declaring a field,
coercing and checking values, :class:`Options`), this module (:class:`RunConfig`) and
:mod:`vistabench.config_files` (reading a YAML or JSON config file). This module imports neither
torch nor any protocol.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from .config_files import load_yaml_text, read_config_file
from .errors import InputError
from .options import (FLOAT32_MAX, INT_LIMIT, NO_KEY_DEFAULT, FieldInfo, Options, base_type, check_bounds, check_fields,
                      check_value, field_infos, jsonable, option, parse_int)

__all__ = ["option", "FieldInfo", "Options", "RunConfig", "read_config_file", "load_yaml_text", "NO_KEY_DEFAULT",
           "TRACKERS", "INT_LIMIT", "FLOAT32_MAX", "base_type", "field_infos", "jsonable", "parse_int", "check_value",
           "check_bounds", "check_fields"]

R = TypeVar("R", bound="RunConfig")


#: the experiment trackers a run can log to (``track`` of every :class:`RunConfig`)
TRACKERS = ("mlflow", "tensorboard", "wandb")


@dataclass(frozen=True, kw_only=True)
class RunConfig(Options):
    """A protocol's run configuration: ``run(config, *, store=None, work_dir=None) -> list[Record]``.

    ``protocol`` names the protocol (class attribute). Runtime-only fields are in :meth:`to_dict` but
    not in :meth:`key_dict`.
    """

    protocol: ClassVar[str] = ""
    #: fields that :meth:`Options.resolve` fills in from the data's name and the recipe when the user
    #: leaves them unset -> the value they had unset before they were resolved (``None``, ``"auto"``).
    #: A grid cell's key keeps that value while the user does not set the field, so stored cells keep
    #: their keys; a value the user gives is keyed as given.
    resolved_fields: ClassVar[dict[str, Any]] = {}

    def spells_out_resolved(self) -> bool:
        """Whether the config was given with every :attr:`resolved_fields` field set (a printed config
        read back): it is keyed as the config it was printed from."""
        given = self.given()
        return bool(self.resolved_fields) and all(name in given for name in self.resolved_fields)

    def unset_fields(self) -> set[str]:
        """The :attr:`resolved_fields` the user left unset (or set to their unset value); for a printed
        config read back, those holding the value the recipe resolves them to when unset."""
        given = self.given()
        out = {name for name, unset in self.resolved_fields.items()
               if name not in given or jsonable(given[name]) == jsonable(unset)}
        if self.spells_out_resolved():  # each field: what the recipe gives it when it alone is left out
            values = self.to_dict()
            for name in self.resolved_fields:
                fresh = type(self).resolve({k: v for k, v in values.items() if k != name})
                if jsonable(fresh.get(name)) == jsonable(getattr(self, name)):
                    out.add(name)
        return out

    #: the experiment trackers that receive the run (:mod:`vistabench.tracking`, docs/tracking.md)
    track: tuple[str, ...] = option(
        (), choices=TRACKERS, runtime=True, repeatable=True, metavar="TRACKER",
        help="also log the run to this experiment tracker (repeatable): the resolved config as parameters, "
             "the scores as metrics, the training curves per epoch, the report's figures as artifacts")
    track_dir: str | None = option(
        None, runtime=True, metavar="DIR",
        help="TensorBoard's log folder for --track tensorboard (default: ./runs, TensorBoard's convention)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.track_dir is not None and "tensorboard" not in self.track:
            raise InputError(f"track_dir: TensorBoard's log folder, set to {self.track_dir!r}, but the run is not "
                             "tracked with tensorboard; add `track` tensorboard or drop `track_dir`")

    def without_tracking(self: R) -> R:
        """This config with no trackers (``track`` empty, ``track_dir`` None): what a tracked run hands
        to the protocol's ``run`` (:func:`vistabench.tracking.run_tracked`)."""
        given = {k: v for k, v in self.given().items() if k not in ("track", "track_dir")}
        out = dataclasses.replace(self, track=(), track_dir=None)
        object.__setattr__(out, "_given", given)
        return out

    def refuse_tracking(self) -> None:
        """A protocol's ``run`` calls this first: it does not track by itself, so a config asking for
        trackers is refused in one line rather than run untracked."""
        if self.track:
            raise InputError(f"track: {', '.join(self.track)} asked for, but a protocol's run(config) does not "
                             "track by itself; call vistabench.tracking.run_tracked(run, config) (as the command "
                             "line and the grid do)")

    @classmethod
    def fields_info(cls) -> list[FieldInfo]:
        """Every field's declaration: the protocol's own in declaration order, then the fields every
        run config has (``track``, ``track_dir``)."""
        infos = super().fields_info()
        common = {f.name for f in dataclasses.fields(RunConfig)}
        return [i for i in infos if i.name not in common] + [i for i in infos if i.name in common]

    def key_dict(self) -> dict[str, Any]:
        """The canonical config minus runtime-only fields (and fields at their ``key_default``); a
        :attr:`resolved_fields` field the user left unset is keyed by its unset value."""
        out = {}
        unset = self.unset_fields()
        for info in self.fields_info():
            if info.runtime:
                continue
            value = jsonable(self.resolved_fields[info.name] if info.name in unset else getattr(self, info.name))
            if info.key_default is not NO_KEY_DEFAULT and value == jsonable(info.key_default):
                continue
            out[info.name] = value
        return dict(sorted(out.items()))

    def runtime_dict(self) -> dict[str, Any]:
        return {i.name: jsonable(getattr(self, i.name)) for i in self.fields_info() if i.runtime}
