"""The options every verb group shares: ``--store FILE`` (:func:`store_field`), a scored record's
``--method --dataset --seed --tag`` (:class:`RecordOptions`), a ``score`` verb's ``--track``
(:class:`TrackOptions`) and a ``run`` verb's ``--out``/``--store`` (:class:`RunOptions`).
Declarations only: :mod:`.verbs` turns them into flags (and re-exports them).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any

from ..config import TRACKERS, FieldInfo, Options, option
from ..errors import InputError

__all__ = ["store_field", "RecordOptions", "TrackOptions", "RunOptions"]


def store_field(*, optional: bool = True, none_help: str | None = "do not write a record to the results store",
                help: str | None = None) -> Any:
    """``--store FILE`` (the same default everywhere); where storing is ``optional``, ``--no-store``
    (the field None) too. ``none_help=None`` keeps ``--no-store`` out of ``--help`` (a verb that
    refuses it with the reason)."""
    from ..store import DEFAULT_STORE

    return option(DEFAULT_STORE, metavar="FILE", help=help or f"SQLite results store (default: ./{DEFAULT_STORE})",
                  none_flag="--no-store" if optional else None, none_help=none_help if optional else None)


@dataclass(frozen=True, kw_only=True)
class RecordOptions(Options):
    """How a scored file is named in the store: ``--method``, ``--dataset``, ``--seed``, ``--tag``.

    A verb's options inherit it; ``record_what`` names the file the method name defaults to (in the
    help) and ``record_dataset_default`` the dataset name used when none is given.
    """

    record_what: typing.ClassVar[str] = "predictions"
    record_dataset_default: typing.ClassVar[str] = "custom"

    method: str | None = option(None, help="method name of the record (default: the {what} file's name without suffix)")
    dataset: str | None = option(None, help="dataset name of the record (default: {dataset_default})")
    seed: int | None = option(None, help="seed of the run that made the predictions (stored as is)")
    tag: str | None = option(None, help="free-form tag of the record")

    @classmethod
    def fields_info(cls) -> list[FieldInfo]:
        """The verb's own fields first, then the record's (their help naming ``record_what``)."""
        record = {f.name for f in dataclasses.fields(RecordOptions)}
        infos = [dataclasses.replace(i, help=i.help.format(what=cls.record_what,
                                                           dataset_default=cls.record_dataset_default))
                 if i.name in ("method", "dataset") else i for i in super().fields_info()]
        return [i for i in infos if i.name not in record] + [i for i in infos if i.name in record]

    def record_dataset(self) -> str:
        return self.dataset or self.record_dataset_default


@dataclass(frozen=True, kw_only=True)
class TrackOptions(Options):
    """``--track`` / ``--track-dir`` of a ``score`` verb, as a ``run`` verb has them (docs/tracking.md):
    the verb's options as parameters, the stored record's scores as metrics (a verb's options inherit
    it first: ``class ScoreOptions(TrackOptions, RecordOptions)``; its fields come last in ``--help``)."""

    track: tuple[str, ...] = option(
        (), choices=TRACKERS, repeatable=True, metavar="TRACKER",
        help="also log the scored records to this experiment tracker (repeatable): the options and the records' "
             "settings as parameters, only the scores as metrics, the report's figures and records.json as "
             "artifacts (docs/tracking.md)")
    track_dir: str | None = option(
        None, metavar="DIR",
        help="TensorBoard's log folder for --track tensorboard (default: ./runs, TensorBoard's convention)")

    def check(self) -> None:
        super().check()
        if self.track_dir is not None and "tensorboard" not in self.track:
            raise InputError(f"track_dir: TensorBoard's log folder, set to {self.track_dir!r}, but the scores are "
                             "not tracked with tensorboard; add `track` tensorboard or drop `track_dir`")

    @classmethod
    def fields_info(cls) -> list[FieldInfo]:
        infos = super().fields_info()
        return [i for i in infos if i.name not in ("track", "track_dir")] + \
            [i for i in infos if i.name in ("track", "track_dir")]


@dataclass(frozen=True, kw_only=True)
class RunOptions(Options):
    """What a ``run`` verb takes besides its config: the work folder and the results store."""

    out: str | None = option(None, metavar="OUT", help="folder for the run's files")
    store: str | None = store_field(optional=True)
