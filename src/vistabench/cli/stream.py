"""`vistabench stream {list,show,split,score,run,pretrain,report,table}`: never-ending task streams (Nevis'22 protocol)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from . import add_json_arg, add_store_arg, store_records
from ..protocols.stream_config import StreamConfig
from .configured import add_config_options, run_verb


def register(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    p = sub.add_parser("stream", help="never-ending task streams with compute accounting (Nevis'22)",
                       description="Run a learner over a chronological stream of tasks, charging every "
                                   "training and search step in FLOPs, and analyse runs: average meta-test "
                                   "error, cFLOP, Pareto front, regret against Indep, forward transfer.")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True

    q = verbs.add_parser("list", help="built-in streams and learners")
    add_json_arg(q)
    q.set_defaults(handler=_list, human=_list_human)

    q = verbs.add_parser("show", help="the tasks of a stream")
    q.add_argument("stream", metavar="NAME|FILE")
    _add_cut_args(q)
    add_json_arg(q)
    q.set_defaults(handler=_show, human=_show_human)

    q = verbs.add_parser("split", help="write a stream's split: its tasks in order, meta-train / meta-test",
                         description="Writes a sealed manifest (sha256) of the stream's tasks in stream order "
                                     "with their year and meta-train/meta-test side; --meta-test-from moves the cut.")
    q.add_argument("--stream", required=True, metavar="NAME|FILE")
    _add_cut_args(q)
    q.add_argument("--out", required=True, metavar="FILE")
    add_json_arg(q)
    q.set_defaults(handler=_split, human=lambda r: f"wrote {r['out']}: {r['tasks']} tasks, meta-test from "
                                                    f"{r['meta_test_from_year']} ({r['meta_test']} tasks)")

    q = verbs.add_parser("score", help="score a run's per-task events from your own learner",
                         description="Reads EVENTS.json: a list, one object per task in stream order, with "
                                     "'task' (the task uid, see `stream show`), 'error' (1 - accuracy; 1 - mAP "
                                     "for multilabel) and 'flops' (compute charged for the task), optionally "
                                     "the other event keys. Prints the average meta-test error and cFLOP and "
                                     "stores one record per task, like `stream run`, under --run-id.")
    q.add_argument("--events", required=True, metavar="EVENTS.json")
    q.add_argument("--stream", required=True, metavar="NAME|FILE")
    _add_cut_args(q)
    q.add_argument("--method", help="learner name of the records (default: the events file's name without suffix)")
    q.add_argument("--seed", type=int, help="seed of the run (stored as is)")
    q.add_argument("--run-id", help="run id of the records (default: STREAM-METHOD-scored)")
    add_store_arg(q)
    add_json_arg(q)
    q.set_defaults(handler=_score, human=lambda r: f"{r['summary']['tasks']} tasks: average meta-test error "
                   f"{r['summary']['avg_error']:.4f}, cFLOP {r['summary']['cflop']:.3g}"
                   + (f"; stored {len(r['record_ids'])} records as run {r['run']!r}" if r["record_ids"] else ""))

    q = verbs.add_parser("run", help="run a learner over a stream (resumes an interrupted run)",
                         description="Hands the learner one task at a time (never a future one), scores "
                                     "each task on its test part, writes one event per task to the store and "
                                     "a checkpoint after each task. Re-running the same command resumes. "
                                     "Every field of the run's config is a flag; --print-config shows the "
                                     "resolved recipe (dm-nevis for the Nevis streams, cpu for embedded).")
    add_config_options(q, StreamConfig)
    q.add_argument("--out", "--work-dir", dest="out", default="vistabench-stream", metavar="DIR",
                   help="checkpoints for resuming (default ./vistabench-stream)")
    add_store_arg(q)
    add_json_arg(q)
    handler, human = run_verb(StreamConfig, _run, human=_run_human)
    q.set_defaults(handler=handler, human=human)

    q = verbs.add_parser("pretrain", help="PT-MT: pre-train on the meta-train tasks, write a checkpoint for --learner pt",
                         description="Trains one network on the union of the stream's meta-train tasks (one output "
                                     "block per task, joint loss) and writes a weights-only state dict that "
                                     "`stream run --learner pt --checkpoint FILE` fine-tunes from. Its compute is "
                                     "reported here and in FILE.json, apart from the stream's cFLOP.")
    q.add_argument("--stream", required=True, metavar="NAME|FILE")
    q.add_argument("--out", required=True, metavar="FILE", help="checkpoint to write (e.g. pt-mt.pt)")
    q.add_argument("--steps", type=int, default=200, help="SGD steps (default 200)")
    q.add_argument("--lr", type=float, default=0.05, help="learning rate (default 0.05)")
    q.add_argument("--max-per-task", type=int, default=2000, metavar="N",
                   help="training examples kept per meta-train task (default 2000)")
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--data-root", metavar="DIR", help="folder with the tasks' data")
    q.add_argument("--arch", default="cnn28", help="backbone (must match the later pt run; default cnn28)")
    q.add_argument("--width", type=int, help="cnn28 width (default 8)")
    q.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    _add_cut_args(q)
    add_json_arg(q)
    q.set_defaults(handler=_pretrain, human=_pretrain_human)

    q = verbs.add_parser("report", help="analyse runs: error, cFLOP, Pareto, regret, forward transfer",
                         description="Summarises the stream runs in the store (all, or the RUN_IDs given).")
    q.add_argument("runs", nargs="*", metavar="RUN_ID")
    q.add_argument("--plot", metavar="PNG", help="write the Pareto plot (cFLOP vs error, every run) here")
    q.add_argument("--cost", choices=("total", "train"), default="total",
                   help="x axis of --plot: vistabench's cFLOP (training + selection forwards; default) or the "
                        "training steps only (dm_nevis's convention)")
    add_store_arg(q, optional=False)
    add_json_arg(q)
    q.set_defaults(handler=_report, human=_report_human)
    return verbs


def _add_cut_args(q: argparse.ArgumentParser) -> None:
    q.add_argument("--meta-test-from", metavar="YEAR|PRESET",
                   help="meta-train / meta-test cut: a year, or a preset of the Nevis streams: 'paper' (2019, "
                        "the paper's last three years: 27 FULL tasks) or 'dm-nevis' (2020, dm_nevis's "
                        "DEFAULT_NEVIS_STOP_YEAR: 14 FULL tasks). Default: the stream file's (paper). The cut used "
                        "is printed.")


def _list(args):
    from ..protocols.stream import catalog

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


def _show(args):
    from ..streams import load_stream

    s = load_stream(args.stream, meta_test_from_year=args.meta_test_from)
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


def _split(args):
    from ..protocols.stream import write_stream_split

    return write_stream_split(args.stream, args.out, meta_test_from_year=args.meta_test_from)


def _score(args):
    from ..protocols.stream import score, to_records
    from ..streams import load_stream

    stream = load_stream(args.stream, meta_test_from_year=args.meta_test_from)
    result = score(args.events, stream)
    method = args.method or Path(args.events).stem
    run_id = args.run_id or f"{stream.name}-{method}-scored"
    ids = store_records(args.store, to_records(result, stream=stream, method=method, seed=args.seed, run_id=run_id))
    return {**result, "run": run_id, "record_ids": ids}


def _run(config, *, store, work_dir):
    from ..protocols.stream import run

    return run(config, store=store, work_dir=work_dir)


def _run_human(res) -> str:
    from ..protocols.stream import summarise_events

    records = res["records"] if "records" in res else [res]
    events = [r["metrics"] for r in records]
    lines = [f"{'task':28} {'split':10} {'error':>7} {'GFLOP':>9} {'params':>9} {'s':>6}"]
    for e in events:
        lines.append(f"{e['task'][:28]:28} {e['split']:10} {100 * e['error']:6.2f}% {e['flops'] / 1e9:9.3f} "
                     f"{e['parameters']:9d} {e['seconds']:6.1f}")
    run_id = records[0]["run_id"] if records else ""
    sm = summarise_events(events, run_id=run_id)
    err = sm["avg_error"]
    lines.append(f"run {run_id}: {sm['tasks']} tasks; average meta-test error "
                 f"{'n/a' if not math.isfinite(err) else f'{100 * err:.2f}%'}; cFLOP {sm['cflop']:.3e} "
                 f"= training {sm['cflop_train']:.3e} + selection/validation forwards {sm['cflop_selection']:.3e}")
    if records:
        st = records[0]["settings"]
        n_test = sum(e["split"] == "meta-test" for e in events)
        lines.append(f"meta-test from {st.get('meta_test_from_year')}: {len(events) - n_test} meta-train, {n_test} "
                     f"meta-test tasks run of {st.get('num_tasks')}; recipe {st.get('recipe', 'cpu')}")
    return "\n".join(lines)


def _pretrain(args):
    from ..extras import require

    require("train", what="`vistabench stream pretrain`")
    from ..protocols.stream import pretrain

    return pretrain(args.stream, args.out, steps=args.steps, lr=args.lr, max_per_task=args.max_per_task,
                    seed=args.seed, data_root=args.data_root, arch=args.arch, width=args.width, device=args.device,
                    meta_test_from=args.meta_test_from)


def _pretrain_human(res) -> str:
    return (f"PT-MT checkpoint {res['checkpoint']}: {len(res['tasks'])} meta-train tasks of {res['stream']}, "
            f"{res['images']} images, {res['steps']} steps of batch {res['batch_size']}; pre-training compute "
            f"{res['flops']:.3e} FLOP (reported apart from the stream's cFLOP; also in {res['checkpoint']}.json)\n"
            f"{res['meta_test_cut']}\nnext: vistabench stream run --stream {res['stream']} --learner pt "
            f"--checkpoint {res['checkpoint']}")


def _report(args):
    from ..report.stream import stream_report

    return stream_report(args.store, args.runs, plot=args.plot, cost=args.cost)


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
