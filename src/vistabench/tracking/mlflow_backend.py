"""MLflow: a run in the tracking server that MLflow's own conventions name.

Where: ``MLFLOW_TRACKING_URI`` (unset: MLflow's default, a local store in the working folder);
the experiment ``MLFLOW_EXPERIMENT_NAME`` (unset: ``vistabench``). Parameters are MLflow params,
scores and training curves metrics with their steps, figures and files artifacts (``figures/``,
the report page, ``records.json``). Talks to MLflow through ``MlflowClient`` only (no global
active run), so a tracked run never disturbs a run the caller has open.
"""

from __future__ import annotations

import math
import os
import socket
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import InputError, one_line
from .backends import Backend, Param

#: MLflow's longest parameter value (characters); a longer value is in the ``config.json`` artifact
MAX_PARAM = 6000
_BATCH = 100  # MLflow's log_batch takes at most 100 params (and 1000 metrics) per call


def check_reachable(uri: str, timeout: float = 5.0) -> None:
    """One line within ``timeout`` seconds when an ``http(s)`` tracking server does not answer
    (MLflow itself would retry for minutes before failing)."""
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except OSError as exc:
        raise InputError(f"track: mlflow: no tracking server answers at {uri} (MLFLOW_TRACKING_URI): "
                         f"{exc.strerror or exc}; start one (`mlflow server`) or unset MLFLOW_TRACKING_URI "
                         "for MLflow's local store") from None


def experiment_name() -> str:
    """``MLFLOW_EXPERIMENT_NAME``, else ``vistabench``."""
    return os.environ.get("MLFLOW_EXPERIMENT_NAME") or "vistabench"


def find_runs(tag: str, value: str) -> list[str]:
    """Ids of the runs of :func:`experiment_name` whose tag ``tag`` is ``value`` or, for a tag
    holding a comma-separated list (``vistabench.record_keys``), contains it."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    found = client.get_experiment_by_name(experiment_name())
    if found is None:
        return []
    runs = client.search_runs([found.experiment_id], filter_string=f"tags.`{tag}` LIKE '%{value}%'")
    return [r.info.run_id for r in runs if value in r.data.tags.get(tag, "").split(",")]


class MlflowTracker(Backend):
    tool = "mlflow"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        from mlflow import get_tracking_uri
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        uri = get_tracking_uri()
        check_reachable(uri)
        self.client = MlflowClient()
        experiment = experiment_name()
        try:
            found = self.client.get_experiment_by_name(experiment)
            exp_id = found.experiment_id if found is not None else self.client.create_experiment(experiment)
            self.run = self.client.create_run(exp_id, run_name=self.name, tags=self.tags)
        except MlflowException as exc:  # refused by the server (authentication, a deleted experiment, ...)
            raise InputError(one_line(f"track: mlflow at {uri} refused the run: {exc.message}")) from None
        self.run_id = self.run.info.run_id
        self.experiment = experiment

    def log_params(self, params: dict[str, Param]) -> None:
        from mlflow.entities import Param as MlParam

        items = [MlParam(k, v if len(v := str(p)) <= MAX_PARAM else "(too long: see config.json)")
                 for k, p in params.items()]
        for i in range(0, len(items), _BATCH):
            self.client.log_batch(self.run_id, params=items[i:i + _BATCH])

    def log_metrics(self, metrics: dict[str, float], *, step: int, axis: str) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, step) for k, v in metrics.items() if not math.isnan(v)]
        for i in range(0, len(items), 1000):
            self.client.log_batch(self.run_id, metrics=items[i:i + 1000])

    def set_tags(self, tags: dict[str, str]) -> None:
        for k, v in tags.items():
            self.client.set_tag(self.run_id, k, v)

    def log_figure(self, name: str, png: bytes) -> None:
        with tempfile.TemporaryDirectory(prefix="vistabench-fig-") as tmp:
            path = Path(tmp) / f"{name}.png"
            path.write_bytes(png)
            self.client.log_artifact(self.run_id, str(path), artifact_path="figures")

    def log_file(self, path: Path) -> None:
        self.client.log_artifact(self.run_id, str(path))

    def finish(self, ok: bool) -> str:
        import contextlib
        import io
        import re

        from mlflow import get_tracking_uri

        said = io.StringIO()  # MLflow prints the run's web address on stdout: ours carries JSON only
        with contextlib.redirect_stdout(said):
            self.client.set_terminated(self.run_id, status="FINISHED" if ok else "FAILED")
        url = re.search(r"View run .* at: (\S+)", said.getvalue())
        where = url.group(1) if url else f"experiment {self.experiment!r} at {get_tracking_uri()}"
        return f"mlflow run {self.run_id} ({where})"


TRACKER = MlflowTracker
