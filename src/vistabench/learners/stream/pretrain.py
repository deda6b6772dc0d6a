"""PT-MT: pre-train one network on the meta-train tasks of a stream (for the ``pt`` learner).

Every meta-train task gets its own output block on a shared backbone and the network is trained
for ``steps`` SGD steps (the learner config's learning rate) on the union of the tasks' training
parts (at most ``max_per_task`` examples each; batches drawn uniformly over the union) with the
joint loss of the ``mt`` learner (cross-entropy per multiclass block, sigmoid BCE per multilabel
block). The backbone is written as a weights-only state dict; ``pt`` replaces the classifier. The
pre-training compute is counted with the same ledger as stream runs and reported separately
(``<checkpoint>.json``), as the paper reports pre-training apart from the stream's cFLOP.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ...atomic import write_text
from ...errors import InputError
from ...jsonutil import decode_user_json
from ...streams import Stream, Task, load_stream
from ...streams.sources import TaskSplits, resolve_task
from .base import ComputeLedger, save_checkpoint
from .losses import JointLoss, LossPart
from .options import LearnerConfig, PretrainSettings, batch_size_for

__all__ = ["pretrain_meta_train", "pretrain_cost"]


def pretrain_meta_train(stream: Stream | str, settings: PretrainSettings, *, config: LearnerConfig | None = None,
                        resolver: Callable[[Task], TaskSplits] | None = None) -> dict[str, Any]:
    """Pre-train on ``stream``'s meta-train tasks and write the checkpoint ``settings.out`` (+ ``.json``).

    ``settings``: the pre-training's own arguments (:class:`~.options.PretrainSettings`, checked when
    made); ``config``: the learner config of the later ``pt`` run (its recipe: learning rate, backbone
    and its options, device; default :class:`~.options.LearnerConfig`'s, seeded with ``settings.seed``).

    Returns
    -------
    dict
        ``{"checkpoint", "stream", "meta_test_cut", "model", "arch_options", "tasks", "images", "steps",
        "batch_size", "flops", "seconds", "torch"}``; ``flops`` is the pre-training compute (training steps
        only).
    """
    import torch

    from ..models import build_model
    from ..trainer import TrainConfig, Trainer

    if not isinstance(settings, PretrainSettings):
        raise TypeError(f"settings: expected PretrainSettings, got {type(settings).__name__}")  # a caller's bug
    steps, seed, out, data_root = settings.steps, settings.seed, settings.out, settings.data_root
    cfg = config or LearnerConfig(seed=seed)
    if isinstance(stream, str):
        stream = load_stream(stream)
    tasks = stream.meta_train()
    if not tasks:
        raise InputError(f"stream {stream.name!r}: no meta-train task before {stream.meta_test_from_year} to pre-train on")
    resolve = resolver or (lambda t: resolve_task(t, stream, data_root=data_root))
    rng = np.random.default_rng(seed)
    xs, ys, parts, used = [], [], [], []
    label_off = out_off = 0
    for t in tasks:
        tr = resolve(t).train
        k = min(len(tr), settings.max_per_task)
        idx = np.sort(rng.permutation(len(tr))[:k])
        if t.kind == "multilabel":
            patterns, lab = np.unique(tr.targets, axis=0, return_inverse=True)
            lab = lab.reshape(-1)
            n_labels, n_out = len(patterns), max(tr.targets.shape[1], len(patterns))
        else:
            patterns, lab = None, np.asarray(tr.targets)
            n_labels = n_out = tr.num_classes
        parts.append(LossPart(label_off, n_labels, out_off, n_out, 1.0, patterns, 0.0))
        xs.append(tr.images[idx])
        ys.append(lab[idx] + label_off)
        used.append({"task": t.uid, "images": int(k), "outputs": int(n_out)})
        label_off += n_labels
        out_off += n_out
    x, y = np.concatenate(xs), np.concatenate(ys)
    n, h, w, b = x.shape
    bs = batch_size_for(n, max_batch=cfg.max_batch, min_batch=cfg.min_batch)
    reps = int(np.ceil(steps * bs / n))
    order = np.concatenate([rng.permutation(n) for _ in range(reps)])[: steps * bs]
    model = build_model(cfg.model, num_classes=out_off, in_channels=b, image_size=h, seed=int(rng.integers(2**31)),
                        pretrained=cfg.pretrained, **cfg.arch_options)
    loss = JointLoss(parts)
    tcfg = TrainConfig.from_recipe(cfg, epochs=1, lr=cfg.lr, batch_size=bs, seed=int(rng.integers(2**31)),
                                   nesterov=False, count_flops=False)  # plain momentum, as PT-MT always trained
    t0 = time.perf_counter()
    res = Trainer(model, tcfg, loss_fn=loss).fit(x[order], y[order])
    seconds = time.perf_counter() - t0
    ledger = ComputeLedger()
    ledger.charge_train(model, (b, h, w), bs, res.steps, loss_fn=loss, what="pre-training")
    path = save_checkpoint(model.cpu() if hasattr(model, "cpu") else model, out)
    report = {"checkpoint": str(path), "stream": stream.name, "meta_test_cut": stream.meta_test_cut(),
              "model": cfg.model, "arch_options": dict(cfg.arch_options), "tasks": used, "images": int(n),
              "steps": int(res.steps), "batch_size": int(bs), "flops": int(ledger.train_flops),
              "seconds": float(seconds), "torch": torch.__version__}
    write_text(str(path) + ".json", json.dumps(report, indent=1), what="checkpoint report file")
    return report


def pretrain_cost(checkpoint: str | Path) -> int | None:
    """The pre-training FLOPs recorded next to a checkpoint (``<checkpoint>.json``), or None."""
    p = Path(str(checkpoint) + ".json")
    if not p.is_file():
        return None
    try:
        return int(decode_user_json(p.read_bytes())["flops"])
    except (ValueError, KeyError, TypeError):  # a malformed or non-UTF-8 file (ValueError) records no cost
        return None
