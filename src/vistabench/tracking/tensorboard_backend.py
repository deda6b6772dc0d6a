"""TensorBoard: event files in a log folder (``tensorboard --logdir runs``).

Where: ``<track_dir>/<run name>/`` with ``track_dir`` from ``--track-dir`` (default ``runs``,
TensorBoard's and PyTorch's convention). Written with tensorboardX, which needs neither torch nor
TensorFlow. Scores and training curves are scalars (``train/...`` by epoch, a run of several
records by record index), figures are images under ``figures/``, the parameters are the HParams
dashboard's session (written when the run ends, with the scores as its metrics) and a ``config``
text; the report page and ``records.json`` are written beside the event files (TensorBoard has no
artifacts; they stay in the run's folder).

Written synchronously (no writer thread of tensorboardX's): every write happens in the call that
asks for it, so an error — a full disk — reaches the caller (:mod:`.guard`: one warning during a run,
one line from ``vistabench export``) instead of a background thread's traceback; a run that fails
that way has its folder removed (:meth:`TensorboardTracker.abandon`: no partial event file left),
and the files beside the event files are written whole or not at all (:mod:`vistabench.atomic`).
"""

from __future__ import annotations

import io
import json
import shutil
import time
from pathlib import Path

from ..atomic import disk_error, write_bytes
from .backends import Backend, Param

DEFAULT_DIR = "runs"


class TensorboardTracker(Backend):
    tool = "tensorboard"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        from tensorboardX.event_file_writer import EventsWriter

        root = Path(self.track_dir or DEFAULT_DIR)
        folder = root / self.name
        n = 1
        while folder.exists():  # two runs with one name in the same second: their own folders
            n += 1
            folder = root / f"{self.name}-{n}"
        self.folder = folder
        self.writer = None
        try:
            folder.mkdir(parents=True)
            self.writer = EventsWriter(str(folder / "events"))
            self.params: dict[str, Param] = {}
            self.scores: set[str] = set()
            self.set_tags({})
        except BaseException as exc:  # a full disk, an unwritable folder: nothing of this run is left
            self.abandon()
            err = disk_error(exc, folder / "events", "tensorboard log") if isinstance(exc, OSError) else None
            if err is not None:
                raise err from None
            raise

    def _event_file(self) -> Path:
        """The run's event file (tensorboardX names it when it opens it; no private attribute read)."""
        return next(iter(sorted(self.folder.glob("events.out.tfevents.*"))), self.folder / "events")

    def _add(self, summary, step: int = 0) -> None:
        from tensorboardX.proto import event_pb2

        try:
            self.writer.write_event(event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary))
            self.writer.flush()  # on disk now: TensorBoard shows the run live, an error is this call's
        except OSError as exc:
            err = disk_error(exc, self._event_file(), "tensorboard log")
            if err is not None:
                raise err from None
            raise

    def _text(self, tag: str, text: str) -> None:
        from tensorboardX.summary import text as text_summary

        self._add(text_summary(tag, text))

    def log_params(self, params: dict[str, Param]) -> None:
        tag = "settings" if self.params else "config"  # the run's config first; the scores' settings later
        self.params.update(params)
        self._text(tag, "\n".join(f"    {k}: {json.dumps(v)}" for k, v in params.items()))  # a code block

    def log_metrics(self, metrics: dict[str, float], *, step: int, axis: str) -> None:
        from tensorboardX.proto.summary_pb2 import Summary

        values = [Summary.Value(tag=k, simple_value=float(v)) for k, v in metrics.items()]
        if values:
            self._add(Summary(value=values), step)
        if axis == "record":
            self.scores.update(metrics)

    def set_tags(self, tags: dict[str, str]) -> None:
        self.tags.update(tags)
        self._text("tags", "\n".join(f"    {k}: {v}" for k, v in sorted(self.tags.items())))

    def log_figure(self, name: str, png: bytes) -> None:
        from PIL import Image
        from tensorboardX.proto.summary_pb2 import Summary

        with Image.open(io.BytesIO(png)) as im:
            width, height = im.size
            channels = len(im.getbands())
        image = Summary.Image(height=height, width=width, colorspace=channels, encoded_image_string=png)
        self._add(Summary(value=[Summary.Value(tag=f"figures/{name}", image=image)]))

    def log_file(self, path: Path) -> None:
        write_bytes(self.folder / path.name, path.read_bytes(), what="tensorboard file")

    def finish(self, ok: bool) -> str:
        from tensorboardX.summary import hparams

        if self.params:  # the HParams dashboard: the config against the scores (scalars of this folder)
            exp, ssi, sei = hparams(self.params, {k: float("nan") for k in sorted(self.scores)})
            for summary in (exp, ssi, sei):
                self._add(summary)
        self._text("status", "finished" if ok else "failed")
        self.writer.close()
        return f"tensorboard log {str(self.folder)!r} (tensorboard --logdir {str(self.folder.parent)!r})"

    def abandon(self) -> None:
        """Remove the run's folder (only ours: made by this run): no partial event file stays."""
        if self.writer is not None:
            try:
                self.writer.close()
            except OSError:
                pass
        shutil.rmtree(self.folder, ignore_errors=True)


TRACKER = TensorboardTracker
