"""Weights & Biases: a run where wandb's own settings send it.

Where: ``WANDB_MODE`` (``offline``: written under ``WANDB_DIR``, default the working folder, and
uploaded later with ``wandb sync``; no account needed), ``WANDB_PROJECT`` (unset: ``vistabench``),
``WANDB_ENTITY``. The parameters are the run's config, the training curves are logged against
their own step metric ``train/step``, the scores of a one-record run are its summary (a run of
several records logs record i against ``record``), figures are images under ``figures/`` and the
report page and ``records.json`` are saved as run files.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

from ..errors import InputError
from .backends import Backend, Param


class WandbTracker(Backend):
    tool = "wandb"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        import wandb

        self.wandb = wandb
        try:
            self.run = wandb.init(project=os.environ.get("WANDB_PROJECT") or "vistabench", name=self.name,
                                  tags=[f"{k}={v}" for k, v in self.tags.items()][:64], reinit="create_new",
                                  settings=wandb.Settings(silent=True, console="off", disable_git=True))
        except (wandb.errors.UsageError, wandb.errors.CommError) as exc:  # no account, no network
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"track: wandb could not start a run ({first}); set WANDB_MODE=offline to log "
                             "without an account, or run `wandb login`") from None
        self.run.define_metric("train/step")
        self.run.define_metric("train/*", step_metric="train/step")
        self.run.define_metric("record")
        self._records: list[dict[str, float]] = []

    def log_params(self, params: dict[str, Param]) -> None:
        self.run.config.update(params, allow_val_change=True)

    def log_metrics(self, metrics: dict[str, float], *, step: int, axis: str) -> None:
        if axis == "epoch":
            self.run.log({**metrics, "train/step": step})
        else:
            self._records.append(dict(metrics))  # one record: the summary; several: a series (at finish)

    def set_tags(self, tags: dict[str, str]) -> None:
        self.tags.update(tags)
        for k, v in tags.items():
            self.run.summary[k] = v

    def log_figure(self, name: str, png: bytes) -> None:
        from PIL import Image

        with Image.open(io.BytesIO(png)) as im:
            self.run.log({f"figures/{name}": self.wandb.Image(im.copy(), caption=name)})

    def log_file(self, path: Path) -> None:
        folder = Path(self.run.dir)
        shutil.copy2(path, folder / path.name)
        self.run.save(str(folder / path.name), base_path=str(folder), policy="now")

    def _log_records(self) -> None:
        if len(self._records) == 1:
            self.run.summary.update(self._records[0])
            return
        for i, values in enumerate(self._records):
            for k in values:
                self.run.define_metric(k, step_metric="record")
            self.run.log({**values, "record": i})

    def finish(self, ok: bool) -> str:
        self._log_records()
        where = self.run.settings.sync_dir if self.run.offline else self.run.url
        self.run.finish(exit_code=0 if ok else 1)
        return f"wandb run {self.run.id} ({where})"


TRACKER = WandbTracker
