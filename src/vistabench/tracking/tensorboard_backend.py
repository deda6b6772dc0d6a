"""TensorBoard: event files in a log folder (``tensorboard --logdir runs``).

Where: ``<track_dir>/<run name>/`` with ``track_dir`` from ``--track-dir`` (default ``runs``,
TensorBoard's and PyTorch's convention). Written with tensorboardX, which needs neither torch nor
TensorFlow. Scores and training curves are scalars (``train/...`` by epoch, a run of several
records by record index), figures are images under ``figures/``, the parameters are the HParams
dashboard's session (written when the run ends, with the scores as its metrics) and a ``config``
text; the report page and ``records.json`` are written beside the event files (TensorBoard has no
artifacts; they stay in the run's folder).
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

from .backends import Backend, Param

DEFAULT_DIR = "runs"


class TensorboardTracker(Backend):
    tool = "tensorboard"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        from tensorboardX import SummaryWriter

        root = Path(self.track_dir or DEFAULT_DIR)
        folder = root / self.name
        n = 1
        while folder.exists():  # two runs with one name in the same second: their own folders
            n += 1
            folder = root / f"{self.name}-{n}"
        folder.mkdir(parents=True)
        self.folder = folder
        self.writer = SummaryWriter(logdir=str(folder))
        self.params: dict[str, Param] = {}
        self.scores: set[str] = set()
        self.set_tags({})

    def log_params(self, params: dict[str, Param]) -> None:
        self.params.update(params)
        text = "\n".join(f"    {k}: {json.dumps(v)}" for k, v in params.items())  # markdown code block
        self.writer.add_text("config", text, 0)

    def log_metrics(self, metrics: dict[str, float], *, step: int, axis: str) -> None:
        for k, v in metrics.items():
            self.writer.add_scalar(k, v, step)
        if axis == "record":
            self.scores.update(metrics)

    def set_tags(self, tags: dict[str, str]) -> None:
        self.tags.update(tags)
        self.writer.add_text("tags", "\n".join(f"    {k}: {v}" for k, v in sorted(self.tags.items())), 0)

    def log_figure(self, name: str, png: bytes) -> None:
        from PIL import Image
        from tensorboardX.proto.summary_pb2 import Summary

        with Image.open(io.BytesIO(png)) as im:
            width, height = im.size
            channels = len(im.getbands())
        image = Summary.Image(height=height, width=width, colorspace=channels, encoded_image_string=png)
        self.writer.file_writer.add_summary(Summary(value=[Summary.Value(tag=f"figures/{name}", image=image)]), 0)

    def log_file(self, path: Path) -> None:
        shutil.copy2(path, self.folder / path.name)

    def finish(self, ok: bool) -> str:
        from tensorboardX.summary import hparams

        if self.params:  # the HParams dashboard: the config against the scores (scalars of this folder)
            exp, ssi, sei = hparams(self.params, {k: float("nan") for k in sorted(self.scores)})
            for summary in (exp, ssi, sei):
                self.writer.file_writer.add_summary(summary)
        self.writer.add_text("status", "finished" if ok else "failed", 0)
        self.writer.close()
        return f"tensorboard log {str(self.folder)!r} (tensorboard --logdir {str(self.folder.parent)!r})"


TRACKER = TensorboardTracker
