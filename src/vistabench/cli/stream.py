"""`vistabench stream {list,show,split,score,run,pretrain,report,table}`: never-ending task streams (Nevis'22
protocol); each verb generated from its options class below (run from the run's config)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from . import store_records
from ..config import Options, option
from ..protocols.stream.config import CutOptions, PretrainOptions, StreamConfig
from .verbs import RunOptions, Verbs, add_run_verb, add_verb, store_field, verb_group
from .verbs import TrackOptions

_STREAM_HELP = "a built-in stream (`stream list`) or a stream file"


@dataclass(frozen=True, kw_only=True)
class ListOptions(Options):
    """`stream list` takes no options."""


@dataclass(frozen=True, kw_only=True)
class ShowOptions(CutOptions):
    """`stream show NAME|FILE`."""

    stream: str = option(positional=True, metavar="NAME|FILE", help=_STREAM_HELP)


@dataclass(frozen=True, kw_only=True)
class SplitOptions(CutOptions):
    """`stream split`: :func:`~vistabench.protocols.stream.runner.write_stream_split`'s arguments."""

    stream: str = option(metavar="NAME|FILE", help=_STREAM_HELP)
    out: str = option(metavar="FILE", help="split file to write")


@dataclass(frozen=True, kw_only=True)
class ScoreOptions(TrackOptions, CutOptions):
    """`stream score`: the events of your own learner, the stream and the records' names."""

    events: str = option(metavar="EVENTS.json", help="the per-task events, one object per task in stream order")
    stream: str = option(metavar="NAME|FILE", help=_STREAM_HELP)
    method: str | None = option(
        None, help="learner name of the records (default: the events file's name without suffix)")
    seed: int | None = option(None, help="seed of the run (stored as is)")
    run_id: str | None = option(None, help="run id of the records (default: STREAM-METHOD-scored)")
    store: str | None = store_field(optional=True)


@dataclass(frozen=True, kw_only=True)
class StreamRunOptions(RunOptions):
    """What `stream run` takes besides the config: the checkpoint folder and the store."""

    out: str | None = option("vistabench-stream", flags=("--out", "--work-dir"), metavar="DIR",
                             help="checkpoints for resuming")


@dataclass(frozen=True, kw_only=True)
class ReportOptions(Options):
    """`stream report [RUN_ID ...]`: :func:`~vistabench.report.stream.stream_report`'s arguments."""

    runs: tuple[str, ...] = option((), positional=True, metavar="RUN_ID",
                                   help="the runs to analyse (default: every stream run in the store)")
    plot: str | None = option(None, metavar="PNG", help="write the Pareto plot (cFLOP vs error, every run) here")
    cost: Literal["total", "train"] = option(
        "total", help="x axis of --plot: vistabench's cFLOP (training + selection forwards) or the training steps "
                      "only (dm_nevis's convention)")
    store: str = store_field(optional=False)


def register(sub: Verbs) -> Verbs:
    verbs = verb_group(sub, "stream", help="never-ending task streams with compute accounting (Nevis'22)",
                       description="Run a learner over a chronological stream of tasks, charging every training and "
                                   "search step in FLOPs, and analyse runs: average meta-test error, cFLOP, Pareto "
                                   "front, regret against Indep, forward transfer.")

    add_verb(verbs, "list", ListOptions, run=_list, human=_list_human, help="built-in streams and learners")
    add_verb(verbs, "show", ShowOptions, run=_show, human=_show_human, help="the tasks of a stream")
    add_verb(verbs, "split", SplitOptions, run=_split,
             human=lambda r: f"wrote {r['out']}: {r['tasks']} tasks, meta-test from {r['meta_test_from_year']} "
                             f"({r['meta_test']} tasks)",
             help="write a stream's split: its tasks in order, meta-train / meta-test",
             description="Writes a sealed manifest (sha256) of the stream's tasks in stream order with their year "
                         "and meta-train/meta-test side; --meta-test-from moves the cut.")
    add_verb(verbs, "score", ScoreOptions, run=_score,
             human=lambda r: f"{r['summary']['tasks']} tasks: average meta-test error {r['summary']['avg_error']:.4f}, "
                             f"cFLOP {r['summary']['cflop']:.3g}"
                             + (f"; stored {len(r['record_ids'])} records as run {r['run']!r}" if r["record_ids"]
                                else ""),
             help="score a run's per-task events from your own learner",
             description="Reads EVENTS.json: a list, one object per task in stream order, with 'task' (the task "
                         "uid, see `stream show`), 'error' (1 - accuracy; 1 - mAP for multilabel) and 'flops' "
                         "(compute charged for the task), optionally the other event keys. Prints the average "
                         "meta-test error and cFLOP and stores one record per task, like `stream run`, under "
                         "--run-id.")
    add_run_verb(verbs, "run", StreamConfig, run=_run, options=StreamRunOptions, human=_run_human,
                 help="run a learner over a stream (resumes an interrupted run)",
                 description="Hands the learner one task at a time (never a future one), scores each task on its "
                             "test part and writes a checkpoint (with the events so far) after each task; the events "
                             "go to the store as the run's records when it ends (also when a task fails or it is "
                             "interrupted). Re-running the same command resumes. Every field of the run's config is a flag; "
                             "--print-config shows the resolved recipe (dm-nevis for the Nevis streams, cpu for "
                             "embedded).")
    add_verb(verbs, "pretrain", PretrainOptions, run=_pretrain, human=_pretrain_human,
             help="PT-MT: pre-train on the meta-train tasks, write a checkpoint for --learner pt",
             description="Trains one network on the union of the stream's meta-train tasks (one output block per "
                         "task, joint loss) and writes a weights-only state dict that `stream run --learner pt "
                         "--checkpoint FILE` fine-tunes from. Its compute is reported here and in FILE.json, apart "
                         "from the stream's cFLOP.")
    add_verb(verbs, "report", ReportOptions, run=_report, human=_report_human,
             help="analyse runs: error, cFLOP, Pareto, regret, forward transfer",
             description="Summarises the stream runs in the store (all, or the RUN_IDs given).")
    return verbs


def _list(opts: ListOptions) -> dict[str, Any]:
    from ..protocols.stream.runner import catalog

    return catalog()


def _list_human(res) -> str:
    lines = ["Streams:"]
    for s in res["streams"]:
        lines.append(f"  {s['name']:17s} {s['tasks']:4d} tasks ({s['meta_train']} meta-train, {s['meta_test']} "
                     f"meta-test from {s['meta_test_from_year']}), input {s['image_size']} px x {s['channels']}")
    lines.append("Learners:")
    for n in res["learners"]:
        lines.append(f"  {n:9s} {res.get('learner_docs', {}).get(n, '')}")
    return "\n".join(lines)


def _show(opts: ShowOptions) -> dict[str, Any]:
    from ..streams import load_stream

    s = load_stream(opts.stream, meta_test_from_year=opts.meta_test_from)
    return {**s.summary(), "description": s.description, "meta_test_cut": s.meta_test_cut(),
            "tasks": [{**t.info(), "resolution": list(t.resolution) if t.resolution else None} for t in s.tasks]}


def _show_human(res) -> str:
    lines = [f"{res['name']}: {len(res['tasks'])} tasks, {res['meta_test_cut']}", res["description"], "",
             f"{'#':>3} {'year':4} {'split':10} {'kind':10} {'domain':12} {'size':>8} {'res':>11}  name"]
    for t in res["tasks"]:
        r = "x".join(str(v) for v in t["resolution"]) if t["resolution"] else "-"
        lines.append(f"{t['index']:3d} {t['year']:4d} {t['split']:10} {t['kind']:10} {t['domain'][:12]:12} "
                     f"{t['size'] if t['size'] is not None else '-':>8} {r:>11}  {t['name']}")
    return "\n".join(lines)


def _split(opts: SplitOptions) -> dict[str, Any]:
    from ..protocols.stream.runner import write_stream_split

    return write_stream_split(opts.stream, opts.out, meta_test_from_year=opts.meta_test_from)


def _score(opts: ScoreOptions) -> dict[str, Any]:
    from ..protocols.stream.runner import score, to_records
    from ..streams import load_stream

    stream = load_stream(opts.stream, meta_test_from_year=opts.meta_test_from)
    result = score(opts.events, stream)
    method = opts.method or Path(opts.events).stem
    run_id = opts.run_id or f"{stream.name}-{method}-scored"
    ids = store_records(opts.store, to_records(result, stream=stream, method=method, seed=opts.seed, run_id=run_id))
    return {**result, "run": run_id, "record_ids": ids}


def _run(config, *, store, work_dir):
    from ..protocols.stream.runner import run

    return run(config, store=store, work_dir=work_dir)


def _run_human(res) -> str:
    from ..protocols.stream.runner import summarise_events
    from ..report.units import si_prefix, si_text

    records = res["records"] if "records" in res else [res]
    events = [r["metrics"] for r in records]
    factor, prefix = si_prefix(e["flops"] for e in events)  # one prefix for the column, as the tables
    lines = [f"{'task':28} {'split':10} {'error':>7} {prefix + 'FLOP':>9} {'params':>9} {'s':>6}"]
    for e in events:
        lines.append(f"{e['task'][:28]:28} {e['split']:10} {100 * e['error']:6.2f}% {e['flops'] / factor:9.3f} "
                     f"{e['parameters']:9d} {e['seconds']:6.1f}")
    run_id = records[0]["run_id"] if records else ""
    sm = summarise_events(events, run_id=run_id)
    err = sm["avg_error"]
    lines.append(f"run {run_id}: {sm['tasks']} tasks; average meta-test error "
                 f"{'n/a' if not math.isfinite(err) else f'{100 * err:.2f}%'}; cFLOP {si_text(sm['cflop'])} "
                 f"= training {si_text(sm['cflop_train'])} + selection/validation forwards "
                 f"{si_text(sm['cflop_selection'])}")
    if records:
        st = records[0]["settings"]
        n_test = sum(e["split"] == "meta-test" for e in events)
        lines.append(f"meta-test from {st.get('meta_test_from_year')}: {len(events) - n_test} meta-train, {n_test} "
                     f"meta-test tasks run of {st.get('num_tasks')}; recipe {st.get('recipe', 'cpu')}")
    return "\n".join(lines)


def _pretrain(opts: PretrainOptions) -> dict[str, Any]:
    from ..extras import require

    require("train", what="`vistabench stream pretrain`")
    from ..protocols.stream.runner import pretrain

    return pretrain(opts)


def _pretrain_human(res) -> str:
    from ..report.units import si_text

    return (f"PT-MT checkpoint {res['checkpoint']}: {len(res['tasks'])} meta-train tasks of {res['stream']}, "
            f"{res['images']} images, {res['steps']} steps of batch {res['batch_size']}; pre-training compute "
            f"{si_text(res['flops'])} (reported apart from the stream's cFLOP; also in {res['checkpoint']}.json)\n"
            f"{res['meta_test_cut']}\nnext: vistabench stream run --stream {res['stream']} --learner pt "
            f"--checkpoint {res['checkpoint']}")


def _report(opts: ReportOptions) -> dict[str, Any]:
    from ..report.stream import stream_report

    return stream_report(opts.store, list(opts.runs), plot=opts.plot, cost=opts.cost)


def _report_human(a) -> str:
    from ..report.stream import runs_table

    lines = [runs_table(a).render("markdown"), ""]
    for per in a["verdicts"].values():
        lines += [v["text"] for v in per.values()]
    for rid, ft in a["forward_transfer"].items():
        for name, v in ft["tasks"].items():
            lines.append(f"forward transfer {rid} on {name!r}: {v['forward_transfer']:.3f} "
                         f"(AUC {v['auc_first']:.3f} -> {v['auc_second']:.3f})")
    if a.get("plot"):
        lines.append(f"Pareto plot: {a['plot']}")
    return "\n".join(lines)
