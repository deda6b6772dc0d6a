"""MLflow: a run in the tracking server that MLflow's own conventions name.

Where: ``MLFLOW_TRACKING_URI`` (unset: MLflow's default, a local store in the working folder);
the experiment ``MLFLOW_EXPERIMENT_NAME`` (unset: ``vistabench``). Parameters are MLflow params,
scores and training curves metrics with their steps, figures and files artifacts (``figures/``,
the report page, ``records.json``). Talks to MLflow through ``MlflowClient`` only (no global
active run), so a tracked run never disturbs a run the caller has open.

Bounded: before the run starts, :func:`check_reachable` asks an ``http(s)`` server for an HTTP answer
(5 s) and checks that a ``sqlite:///`` database can be written; while vistabench talks to MLflow, its
HTTP requests time out after 10 s and are retried once (:data:`HTTP_DEFAULTS`, unless the environment
sets them), and every call has the deadline of :mod:`.guard`.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import InputError, one_line
from .backends import Backend, Param

#: MLflow's longest parameter value (characters); a longer value is in the ``config.json`` artifact
MAX_PARAM = 6000
_BATCH = 100  # MLflow's log_batch takes at most 100 params (and 1000 metrics) per call

#: MLflow's HTTP settings while vistabench talks to it, unless the environment sets them: each request
#: gives up after 10 s (connect and read; MLflow's default: 120 s) and is retried once (MLflow's
#: default: 7 times with backoff, about 4 minutes); MLflow's own print of the run's address (on
#: stdout, which carries vistabench's JSON) is off: vistabench prints it on stderr
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "10", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
                 "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}
_QUIET = {"MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}



class http_settings:
    """:data:`HTTP_DEFAULTS` (where the environment does not set them) while the block runs, then the
    environment as it was (a context manager; also entered and left by hand by :class:`MlflowTracker`)."""

    def __enter__(self) -> "http_settings":
        self._saved = {k: os.environ.get(k) for k in (*HTTP_DEFAULTS, *_QUIET)}
        for k, v in HTTP_DEFAULTS.items():
            os.environ.setdefault(k, v)
        os.environ.update(_QUIET)
        return self

    def __exit__(self, *exc: object) -> None:
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_NO_SERVER = "start one (`mlflow server`) or unset MLFLOW_TRACKING_URI for MLflow's local store"


def tracking_uri() -> str:
    """Where MLflow sends runs, without importing MLflow when it is not imported yet (seconds under
    load): ``MLFLOW_TRACKING_URI``, else MLflow's own answer (``mlflow.set_tracking_uri``, its default)."""
    import sys

    env = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    if env and "mlflow" not in sys.modules:
        return env
    from mlflow import get_tracking_uri

    return get_tracking_uri()


def check_reachable(uri: str, timeout: float = 5.0) -> None:
    """One line (an InputError) within about ``timeout`` seconds when MLflow cannot use ``uri``: an
    ``http(s)`` server that refuses the connection or does not answer an HTTP request (``GET /health``;
    any HTTP answer counts, the calls that follow say what it refuses), or a ``sqlite:///`` database in
    a folder that cannot be written (MLflow itself would retry for minutes before failing)."""
    parts = urlsplit(uri)
    if parts.scheme == "sqlite":
        _check_sqlite(uri)
        return
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return
    import ssl
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=timeout):
            return
    except urllib.error.HTTPError:
        return  # it answers HTTP (an error status: authentication, a proxy, an older server)
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ssl.SSLError):
            return  # it answers TLS; MLflow's own settings (MLFLOW_TRACKING_INSECURE_TLS, ...) decide
        reason = exc.reason
    except (TimeoutError, OSError) as exc:
        reason = exc
    if isinstance(reason, TimeoutError) or "timed out" in str(reason):
        why = f"no answer to an HTTP request within {timeout:g} s (a connection, but no reply)"
    else:
        why = getattr(reason, "strerror", None) or str(reason)
    raise InputError(one_line(f"track: mlflow: no tracking server answers at {uri} (MLFLOW_TRACKING_URI): "
                              f"{why}; {_NO_SERVER}")) from None


def _check_sqlite(uri: str) -> None:
    """A ``sqlite:///PATH`` store whose file or folder cannot be written: one line."""
    path = uri[len("sqlite:///"):].split("?", 1)[0] if uri.startswith("sqlite:///") else ""
    if not path or path == ":memory:":
        return
    db = Path(path)
    try:
        if db.exists():
            with open(db, "ab"):
                pass
        else:
            db.parent.mkdir(parents=True, exist_ok=True)
        probe, name = tempfile.mkstemp(dir=db.parent, prefix=".vistabench-probe-")  # its journal goes here
        os.close(probe)
        os.unlink(name)
    except OSError as exc:
        raise InputError(one_line(f"track: mlflow: cannot write the tracking database {str(db)!r} "
                                  f"(MLFLOW_TRACKING_URI {uri}): {exc.strerror or exc}; point "
                                  "MLFLOW_TRACKING_URI at a folder you can write")) from None


def experiment_name() -> str:
    """``MLFLOW_EXPERIMENT_NAME``, else ``vistabench``."""
    return os.environ.get("MLFLOW_EXPERIMENT_NAME") or "vistabench"


def open_store() -> None:
    """MLflow's store of :func:`experiment_name`, opened once (MLflow keeps it for the next clients)."""
    from mlflow.tracking import MlflowClient

    MlflowClient().get_experiment_by_name(experiment_name())


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
        self._settings = http_settings().__enter__()
        try:
            self._start()
        except BaseException:
            self._restore()
            raise

    @staticmethod
    def check() -> None:
        """Before MLflow is imported (:func:`~.guard.Guarded.open`): the server answers."""
        check_reachable(tracking_uri())

    def _start(self) -> None:
        from mlflow import get_tracking_uri
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        self.uri = uri = get_tracking_uri()
        check_reachable(uri)  # again: MLflow's own answer may differ from the environment's
        self.client = MlflowClient()
        experiment = experiment_name()
        try:
            found = self.client.get_experiment_by_name(experiment)
            exp_id = found.experiment_id if found is not None else self.client.create_experiment(experiment)
            self.run = self.client.create_run(exp_id, run_name=self.name, tags=self.tags)
        except MlflowException as exc:  # refused by the server (authentication, a deleted experiment, ...)
            raise InputError(one_line(f"track: mlflow at {uri} refused the run: {exc.message}")) from None
        self.run_id = self.run.info.run_id
        self.experiment, self.experiment_id = experiment, exp_id

    def _restore(self) -> None:
        self._settings.__exit__(None, None, None)
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
        try:
            self.client.set_terminated(self.run_id, status="FINISHED" if ok else "FAILED")
        finally:
            self._restore()
        parts = urlsplit(self.uri)
        if parts.scheme in ("http", "https"):
            where = f"{self.uri.rstrip('/')}/#/experiments/{self.experiment_id}/runs/{self.run_id}"
        else:
            where = f"experiment {self.experiment!r} at {self.uri}"
        return f"mlflow run {self.run_id} ({where})"

    def abandon(self) -> None:
        self._restore()


TRACKER = MlflowTracker
