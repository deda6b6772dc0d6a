"""vistabench.jobs.run_jobs, the one scheduler behind grid cells, smalldata final runs and stream trials (in-process
engine here; processes and Ray are checked by the callers' tests against their sequential results)."""

import os
import time
from pathlib import Path

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


def _pid_then_sleep(path, seconds):
    Path(path).write_text(str(os.getpid()))
    time.sleep(seconds)
    return os.getpid()


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_local_workers_give_the_sequential_values_in_and_out_of_a_session():
    jobs = [Job(_square, (x,)) for x in range(5)]
    sequential = sorted(o.value for o in run_jobs(jobs))
    assert sorted(o.value for o in run_jobs(jobs, engine=Engine(max_parallel=2))) == sequential
    with engine_session(Engine(max_parallel=2)):  # one pool for both calls
        assert sorted(o.value for o in run_jobs(jobs, engine=Engine(max_parallel=2))) == sequential
        assert sorted(o.value for o in run_jobs(jobs, engine=Engine(max_parallel=2))) == sequential


@pytest.mark.parametrize("session", [False, True])
def test_closing_the_iterator_terminates_the_worker_still_running_a_job(tmp_path, session):
    """The pool stops its workers at once (their pids reported by each worker, no private attribute of
    the executor): a job sleeping two minutes does not keep the driver waiting."""
    slow = tmp_path / "slow.pid"
    jobs = [Job(_square, (2,)), Job(_pid_then_sleep, (str(slow), 120))]
    with engine_session(Engine(max_parallel=2 if session else None)):
        it = run_jobs(jobs, engine=Engine(max_parallel=2))
        assert next(it).value == 4
        deadline = time.monotonic() + 60
        while not (slow.exists() and slow.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = int(slow.read_text())
        assert _alive(pid)
        start = time.monotonic()
        it.close()
        assert time.monotonic() - start < 30 and not _alive(pid)
