"""vistabench.jobs.run_jobs, the one scheduler behind grid cells, smalldata final runs and stream trials (in-process
engine here; processes and Ray are checked by the callers' tests against their sequential results)."""

import pytest

from vistabench.errors import InputError
from vistabench.jobs import Engine, Job, engine_session, one_line, run_jobs


def _square(x):
    if x < 0:
        raise ValueError(f"negative: {x}\nsecond line")
    return x * x


def test_outcomes_carry_values_errors_and_tags():
    started = []
    jobs = [Job(_square, (x,), tag=f"t{x}") for x in (2, -1, 3)]
    outs = list(run_jobs(jobs, on_start=lambda j: started.append(j.tag)))
    assert started == ["t2", "t-1", "t3"] and [o.job.tag for o in outs] == ["t2", "t-1", "t3"]
    assert [o.ok for o in outs] == [True, False, True] and (outs[0].result(), outs[2].result()) == (4, 9)
    with pytest.raises(ValueError, match="negative: -1"):
        outs[1].result()  # the job's own exception, raised in the driver
    assert one_line(outs[1].error) == "ValueError: negative: -1"


@pytest.mark.parametrize("kw, message", [
    ({"engine": "dask"}, "^engine: expected one of"),
    ({"engine": "local", "max_parallel": 0}, "^max_parallel: expected a number >= 1, got 0"),
    ({"engine": "local", "max_parallel": 1.5}, "^max_parallel: expected an integer"),
    ({"engine": "local", "ray_address": "head:6379"}, "^ray_address: only read with engine 'ray'"),
])
def test_engine_options_are_one_line_input_errors(kw, message):
    with pytest.raises(InputError, match=message):
        Engine(**kw)
    with pytest.raises(InputError, match=message):
        Engine.from_dict(kw)


def test_the_job_runner_takes_an_engine_value():
    with pytest.raises(TypeError, match="engine: expected an Engine"):
        list(run_jobs([Job(_square, (1,))], engine="local"))


def test_a_local_session_without_parallelism_is_a_no_op():
    with engine_session(Engine()):
        assert [o.value for o in run_jobs([Job(_square, (x,)) for x in range(3)])] == [0, 1, 4]


def test_a_task_needing_a_gpu_the_cluster_lacks_is_one_line(monkeypatch):
    """Ray would keep such a task (a grid cell, a stream trial, a small-data trial on Ray Tune) pending
    forever; :func:`check_cluster_gpus` answers once Ray is up (issue 24: ``device: cuda`` without GPU)."""
    import vistabench.jobs as jobs

    class _Ray:
        @staticmethod
        def cluster_resources():
            return {"CPU": 2.0}

    monkeypatch.setattr(jobs, "import_ray", lambda: _Ray)
    jobs.check_cluster_gpus(0.0)  # a CPU task: nothing to check
    with pytest.raises(InputError, match="^device: each task needs 1 GPU but the Ray cluster has 0"):
        jobs.check_cluster_gpus(1.0)


def _die_once(marker: str) -> str:
    import os
    import time

    if not os.path.exists(marker):
        open(marker, "w").close()
        time.sleep(1.0)  # mid-run (an attempt counts once its record, sent as it starts, has landed)
        os._exit(1)  # the worker process dies: a system failure, which Ray runs again
    return "second attempt"


def _raise(_x):
    raise ValueError("the job's own error")


def test_ray_retries_a_dead_worker_and_counts_it_but_never_a_raised_error(tmp_path):
    """Ray's own retries (``max_retries``) run a task again whose worker died; every attempt records
    itself, so the outcome says it was retried once; an error the job raises is never retried."""
    pytest.importorskip("ray")
    jobs = [Job(_die_once, (str(tmp_path / "died"),), tag="dies"), Job(_raise, (0,), tag="raises"),
            Job(_square, (3,), tag="fine")]
    outs = {o.job.tag: o for o in run_jobs(jobs, engine=Engine(engine="ray", max_parallel=1))}
    assert (outs["dies"].value, outs["dies"].retries) == ("second attempt", 1)
    assert not outs["raises"].ok and outs["raises"].retries == 0
    with pytest.raises(ValueError, match="the job's own error"):  # the job's own exception, raised in the driver
        outs["raises"].result()
    assert (outs["fine"].value, outs["fine"].retries) == (9, 0)
