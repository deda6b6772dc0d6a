"""Data-parallel training over several devices: ``TrainConfig.devices = N``.

What runs where
---------------
One process per device, each with a full copy of the model. Every process draws the same epoch
order and the same batches as a one-device run (the samplers are seeded with ``TrainConfig.seed``)
and trains on its shard of each batch: rank r gets the r-th of N consecutive, near-equal parts
(``batch_size`` is the **global** batch: a protocol's recipe refuses one that is not a multiple of
N; a batch a method derives — a few-shot session smaller than the batch, a stream task's n/16 —
may split unevenly, into parts one image apart; with N devices a last batch of fewer than N images
joins the one before, as a last batch of one image does on one device).
After every backward pass the gradients are averaged over the processes, weighted by the shard
sizes, so each step applies the gradient of the mean loss over the whole global batch — the
update a one-device run makes, up to float rounding. Every rank then takes the same optimizer
step, so the copies stay equal; rank 0's copy is the trained model.

This is data parallelism as ``torch.nn.parallel.DistributedDataParallel`` (DDP) does it — one
process per device, the weights broadcast from rank 0 at the start, gradients all-reduced after
backward — with the all-reduce done here (one flat buffer per step) rather than by DDP's wrapper:
methods' custom steps (BBN, RIDE, TADE, ...) and classifier-only training call the network's parts
(``features``, branches, experts) directly, and the wrapper only synchronises gradients of a forward
pass that went through it. Losses are assumed to be means over the batch (every built-in loss is).

Processes and backends
----------------------
- Started from :meth:`Trainer.fit <vistabench.learners.trainer.Trainer.fit>`: the calling process
  is rank 0 (so callbacks, epoch listeners, the loss's state and the model are its own, and the
  protocol code and the results store run once, in it) and starts N - 1 helper processes.
  On a CPU they are **forked** (backend gloo): a fork inherits the trainer as it is — loss
  closures, custom steps, subclasses, the data — with nothing to serialise; a forked process
  cannot use the OpenMP thread pool its parent already started (GNU libgomp hangs), so on a CPU
  every rank, the parent included, trains with one thread (one rank per core). More ranks than the
  process's CPU cores are allowed (the result is that of N devices, only slower) with one warning
  naming ``devices``. On CUDA (backend
  NCCL, rank r on ``cuda:(k + r)`` for ``device="cuda:k"``) a fork cannot use the GPU the parent
  already initialised, so the helpers are **spawned** and the trainer is shipped to them with
  cloudpickle (CUDA tensors travel as CPU tensors and land on the helper's device); something that
  cannot be pickled ends in one line naming ``devices`` and the object.
- Under ``torchrun`` (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` set) nothing is started: every
  process runs the whole command, joins torchrun's group (``env://``) and trains on ``cuda:LOCAL_RANK``
  (or the CPU); ``devices`` must equal the processes per node (``LOCAL_WORLD_SIZE``) and the global
  batch is split over all ``WORLD_SIZE`` processes. Only rank 0 writes the results store: the
  command line opens it on rank 0 only (:func:`vistabench.cli.verbs.writes_records`); a script
  passes no store on the other ranks (:func:`torchrun_env`).

What is synchronised
--------------------
Gradients (every step); the initial weights and buffers (broadcast from rank 0); the epoch's loss,
accuracy, FLOPs (summed over ranks) and the early-stop decision (rank 0's callback, broadcast).
Batch norm: on CUDA every ``BatchNorm`` layer is replaced by ``torch.nn.SyncBatchNorm`` for the fit
(statistics over the global batch, as on one device; the original layers, sharing the trained
weights and running averages, are put back afterwards). torch's ``SyncBatchNorm`` runs only on
accelerators, so on a CPU (gloo) each rank normalises with its own shard's statistics and the
running averages are averaged over the ranks at the end of every epoch. Random augmentation and
dropout draw from generators seeded with the seed and the rank (rank 0's are a one-device run's), so
with them ``devices: N`` matches ``devices: 1`` in distribution, not draw for draw.

Reported figures
----------------
``history``: loss and training accuracy over the whole global batch (sums all-reduced);
``val_acc`` is computed by rank 0. ``flops``: summed over the ranks (the work of the whole fit).
``images_per_second``: images of all ranks per second of rank 0's training time.
``peak_memory_bytes``: the largest peak of any one rank (per process: its RSS on a CPU, torch's
maximum allocation on its GPU).
"""

from __future__ import annotations

import atexit
import gc
import io
import multiprocessing
import os
import pickle
import socket
import traceback
import warnings
from datetime import timedelta
from typing import Any, Callable

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from .. import progress
from ..errors import InputError

__all__ = ["DataParallel", "check_devices", "data_parallel_world", "rank_device", "torchrun_env", "run_data_parallel"]

#: how helper processes start, per device type (see the module docstring; tests set "spawn" on a CPU)
START_METHODS = {"cpu": "fork", "cuda": "spawn"}
_BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
_SEED_STRIDE = 10007  # rank r's dropout / augmentation seeds: seed + r * stride (rank 0: a one-device run's)
_TIMEOUT = timedelta(minutes=30)


def torchrun_env() -> tuple[int, int, int, int] | None:
    """(rank, world size, local rank, local world size) when launched by ``torchrun``, else None."""
    if not all(k in os.environ for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")):
        return None
    try:
        rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    except ValueError:
        raise InputError("devices: RANK, WORLD_SIZE and LOCAL_RANK must be integers (as torchrun sets them)") from None
    return rank, world, local, local_world


def data_parallel_world(cfg: Any) -> int:
    """How many processes train together: torchrun's ``WORLD_SIZE``, else ``cfg.devices`` (1: no data parallelism)."""
    env = torchrun_env()
    return cfg.devices if env is None else env[1]


def check_devices(cfg: Any, device: torch.device) -> None:
    """InputError (one line naming ``devices`` or ``batch_size``) when ``cfg.devices`` cannot run on ``device``."""
    n = cfg.devices
    env = torchrun_env()
    if env is not None:
        if env[1] > 1 and n != env[3]:
            raise InputError(f"devices: torchrun started {env[3]} processes per node; set devices to {env[3]}, "
                             f"got {n}")
        n_world = env[1]
    else:
        n_world = n
    if n == 1 and n_world == 1:
        return
    if cfg.batch_size < n_world:
        raise InputError(f"batch_size: expected at least devices={n_world} images (one per device), "
                         f"got {cfg.batch_size}")
    if device.type == "cuda" and env is None:
        base, count = device.index or 0, torch.cuda.device_count()
        if base + n > count:
            raise InputError(f"devices: {n} CUDA devices from cuda:{base} requested but only {count} exist")
    elif device.type not in ("cpu", "cuda"):
        raise InputError(f"devices: data-parallel training runs on cpu or cuda, not {device.type}")
    if device.type == "cpu" and env is None:
        cores = cpu_cores()
        if n > cores:  # allowed: it computes what N devices compute, only slower (one rank per core)
            warnings.warn(f"devices: {n} training processes on {cores} CPU core(s): they share the cores (the "
                          f"result is that of {n} devices, the run slower than with devices={cores})",
                          UserWarning, stacklevel=3)


def cpu_cores() -> int:
    """The CPU cores this process may run on (its affinity where the OS tells it, else the machine's)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def rank_device(device: torch.device) -> torch.device:
    """The device of this process: ``cuda:LOCAL_RANK`` under torchrun on CUDA, else ``device``."""
    env = torchrun_env()
    if env is not None and device.type == "cuda":
        return torch.device("cuda", env[2])
    return device


class DataParallel:
    """This process's part of a data-parallel fit (see the module docstring): its rank, the shard
    of each batch it trains on, and the collective operations the trainer's loop calls."""

    def __init__(self, rank: int, world: int, device: torch.device) -> None:
        self.rank, self.world, self.device = rank, world, device
        self.is_main = rank == 0
        self.seed_offset = rank * _SEED_STRIDE

    def shard(self, batch: np.ndarray) -> np.ndarray:
        """This rank's consecutive part of a global batch (sizes differ by at most one)."""
        return np.array_split(batch, self.world)[self.rank]

    def broadcast_model(self, model: nn.Module) -> None:
        """Rank 0's parameters and buffers to every rank (all start from the same weights)."""
        with torch.no_grad():
            for t in list(model.parameters()) + list(model.buffers()):
                dist.broadcast(t.data, 0)

    def average_gradients(self, params: list[torch.Tensor], n_local: int, n_global: int) -> None:
        """Replace each gradient by the global batch's: sum over ranks of ``n_local * grad`` / ``n_global``
        (one all-reduce). A parameter without a gradient on every rank keeps None (so the optimizer
        skips it, as on one device)."""
        grads = [p.grad for p in params]
        parts = [g.reshape(-1).float() * n_local if g is not None
                 else torch.zeros(p.numel(), device=p.device) for p, g in zip(params, grads)]
        has = torch.tensor([g is not None for g in grads], dtype=torch.float32, device=self.device)
        flat = torch.cat(parts + [has])
        dist.all_reduce(flat)
        seen = flat[-len(params):] if params else flat[:0]
        offset = 0
        for i, p in enumerate(params):
            k = p.numel()
            if seen[i] > 0:
                avg = flat[offset:offset + k].view_as(p).to(p.dtype) / n_global
                if p.grad is None:
                    p.grad = avg
                else:
                    p.grad.copy_(avg)
            offset += k

    def sum_(self, *values: torch.Tensor | int, dtype: torch.dtype = torch.float64) -> list[torch.Tensor]:
        """The sums over ranks of scalars (one all-reduce in ``dtype``; int64 keeps FLOP counts exact)."""
        flat = torch.stack([torch.as_tensor(v).detach().to(self.device, dtype).reshape(()) for v in values])
        dist.all_reduce(flat)
        return list(flat.unbind())

    def max_int(self, value: int) -> int:
        """The largest ``value`` of any rank."""
        t = torch.tensor([value], dtype=torch.int64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t.item())

    def agree(self, flag: bool) -> bool:
        """Rank 0's ``flag`` on every rank (the early-stop decision)."""
        t = torch.tensor([1.0 if flag else 0.0], device=self.device)
        dist.broadcast(t, 0)
        return bool(t.item())

    def average_norm_statistics(self, model: nn.Module) -> None:
        """Average the running statistics of (per-rank) batch norm over the ranks (a CPU's gloo)."""
        stats = [b for m in model.modules() if isinstance(m, _BATCH_NORMS + (nn.SyncBatchNorm,))
                 for b in (m.running_mean, m.running_var) if b is not None]
        if not stats:
            return
        flat = torch.cat([s.reshape(-1).float() for s in stats])
        dist.all_reduce(flat)
        flat /= self.world
        offset = 0
        for s in stats:
            s.copy_(flat[offset:offset + s.numel()].view_as(s))
            offset += s.numel()


class SyncNorm:
    """Context manager: every ``BatchNorm`` layer of ``model`` replaced by a ``SyncBatchNorm`` sharing its
    parameters and running averages (CUDA); the original layers put back afterwards."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.swapped: list[tuple[nn.Module, str, nn.Module]] = []

    def __enter__(self) -> "SyncNorm":
        for parent in list(self.model.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, _BATCH_NORMS):
                    sync = nn.SyncBatchNorm(child.num_features, child.eps, child.momentum, child.affine,
                                            child.track_running_stats)
                    sync.weight, sync.bias = child.weight, child.bias
                    sync.running_mean, sync.running_var = child.running_mean, child.running_var
                    sync.num_batches_tracked = child.num_batches_tracked
                    sync.train(child.training)
                    setattr(parent, name, sync)
                    self.swapped.append((parent, name, child))
        return self

    def __exit__(self, *exc: object) -> None:
        for parent, name, child in reversed(self.swapped):
            child.train(getattr(parent, name).training)
            setattr(parent, name, child)


# ------------------------------------------------------------------------------- processes

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _init_group(backend: str, rank: int, world: int, port: int) -> None:
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=_TIMEOUT)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def _helper(run: Callable[[DataParallel], Any], model: nn.Module, rank: int, world: int, port: int, backend: str,
            device: torch.device, report: Any) -> None:
    """Rank ``rank``'s process: join the group, train, report an error as one line."""
    gc.freeze()  # never collect what a fork inherited: an old process group's destructor would wait forever
    try:
        progress.set_quiet(True)  # rank 0 shows the progress
        if device.type == "cpu":
            torch.set_num_threads(1)  # a forked process cannot use the parent's OpenMP pool
        else:
            torch.cuda.set_device(device)
        _init_group(backend, rank, world, port)
        _under_sync_norm(model, run, DataParallel(rank, world, device))
    except BaseException as exc:  # noqa: BLE001 - reported to rank 0, which raises it
        report.put((isinstance(exc, InputError), _describe(exc), traceback.format_exc()))
        os._exit(1)  # at once, group and all: the other ranks' collectives fail instead of waiting
    dist.destroy_process_group()


_TARGET: list[torch.device] = []  # the device CUDA tensors land on when a spawned helper unpickles


def _rebuild_tensor(t: torch.Tensor, parameter: bool, requires_grad: bool) -> torch.Tensor:
    t = t.to(_TARGET[0]) if _TARGET else t
    return nn.Parameter(t, requires_grad=requires_grad) if parameter else t


def _dumps(obj: Any) -> bytes:
    try:
        import cloudpickle
    except ImportError:  # only the CUDA spawn path ships closures; pip installs it with mlflow, joblib, ray ...
        raise InputError("devices: data-parallel training on CUDA ships the trainer to spawned processes "
                         "with cloudpickle, which is not installed: pip install cloudpickle") from None

    class Pickler(cloudpickle.Pickler):
        def reducer_override(self, o: Any) -> Any:
            if isinstance(o, torch.Tensor) and o.device.type == "cuda":
                return _rebuild_tensor, (o.detach().cpu(), isinstance(o, nn.Parameter), o.requires_grad)
            return super().reducer_override(o)

    buf = io.BytesIO()
    try:
        Pickler(buf).dump(obj)
    except Exception as exc:  # noqa: BLE001 - anything a method holds that cannot travel
        raise InputError(f"devices: the trainer cannot be shipped to spawned processes ({_describe(exc)}); "
                         "launch with torchrun, or train with devices 1") from None
    return buf.getvalue()


def _spawned(payload: bytes, rank: int, world: int, port: int, backend: str, device: torch.device,
             report: Any) -> None:
    try:
        if device.type == "cuda":
            torch.cuda.set_device(device)
            _TARGET[:] = [device]
        trainer, run = pickle.loads(payload)
        trainer.device = device
        trainer.model.to(device)
    except BaseException as exc:  # noqa: BLE001
        report.put((False, _describe(exc), traceback.format_exc()))
        os._exit(1)
    _helper(run, trainer.model, rank, world, port, backend, device, report)


def _end_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def run_data_parallel(trainer: Any, run: Callable[[DataParallel], Any]) -> Any:
    """``run(dp)`` on every rank of a data-parallel fit (see the module docstring); rank 0's result.

    ``run`` builds the rank's data source and runs the trainer's loop with ``dp``; in this process
    it is rank 0 (or torchrun's rank)."""
    device = trainer.device
    env = torchrun_env()
    backend = "nccl" if device.type == "cuda" else "gloo"
    if env is not None:  # join torchrun's group
        if not dist.is_initialized():
            dist.init_process_group(backend, init_method="env://", timeout=_TIMEOUT)
            # the group we made ends before the interpreter does: a gloo group alive at exit aborts
            # the process ("terminate called without an active exception", SIGABRT) after a good run
            atexit.register(_end_group)
        if device.type == "cuda":
            torch.cuda.set_device(device)
        return _under_sync_norm(trainer.model, run, DataParallel(env[0], env[1], device))
    world, port = trainer.cfg.devices, _free_port()
    if dist.is_initialized():
        raise InputError("devices: a torch.distributed process group already exists in this process; "
                         "launch with torchrun (or train with devices 1)")
    ctx = multiprocessing.get_context(START_METHODS[device.type])
    report = ctx.SimpleQueue()
    devs = [device if device.type == "cpu" else torch.device("cuda", (device.index or 0) + r) for r in range(world)]
    if ctx.get_start_method() == "fork":
        gc.collect()  # leave no garbage (an earlier fit's process group) for the forks to inherit
        procs = [ctx.Process(target=_helper, args=(run, trainer.model, r, world, port, backend, devs[r], report))
                 for r in range(1, world)]
    else:
        payload = _dumps((trainer, run))
        procs = [ctx.Process(target=_spawned, args=(payload, r, world, port, backend, devs[r], report))
                 for r in range(1, world)]  # not daemons: a rank may start data-loader workers
    for p in procs:
        p.start()
    threads = torch.get_num_threads()
    try:
        if device.type == "cpu":
            torch.set_num_threads(1)  # as the forked ranks (see the module docstring)
        _init_group(backend, 0, world, port)
        result = _under_sync_norm(trainer.model, run, DataParallel(0, world, device))
    except BaseException as exc:
        # a helper that failed has reported and exited (so this rank's collective failed); the
        # others wait for this rank: end them before the group
        for p in procs:
            p.join(timeout=2)
            if p.is_alive():
                p.terminate()
                p.join()
        if dist.is_initialized():
            dist.destroy_process_group()
        if isinstance(exc, InputError) or not isinstance(exc, Exception):
            raise  # rank 0's own user error (TrainingDiverged: every rank saw the same loss), or an interrupt
        failure = _failure(procs, report)
        if failure is not None:
            raise failure from exc
        raise
    finally:
        torch.set_num_threads(threads)
    dist.destroy_process_group()
    for p in procs:
        p.join()
    failure = _failure(procs, report)
    if failure is not None:
        raise failure
    return result


def _under_sync_norm(model: nn.Module, run: Callable[[DataParallel], Any], dp: DataParallel) -> Any:
    if dp.device.type == "cuda":
        with SyncNorm(model):
            return run(dp)
    return run(dp)


def _failure(procs: list, report: Any) -> Exception | None:
    """The first helper's error as an exception (InputError for a user error), None if none failed
    (the helpers have ended)."""
    if report.empty():
        bad = [p.exitcode for p in procs if p.exitcode not in (0, None, -15)]
        return RuntimeError(f"devices: a training process exited with code {bad[0]}") if bad else None
    user, line, trace = report.get()
    if user:  # the helper's own one-line message
        return InputError(line.split(": ", 1)[1])
    return RuntimeError(f"devices: a training process failed: {line}\n{trace}")
