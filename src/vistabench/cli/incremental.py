"""`vistabench incremental ...`: split (alias sessions), score, run, table, reference (few-shot class-incremental, gAcc)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import store_records
from ..config import Options, option
from ..protocols.incremental.config import IncrementalConfig
from .verbs import RecordOptions, RunOptions, Verbs, add_run_verb, add_verb, store_field, verb_group
from .verbs import TrackOptions

_PRESET_HELP = "cifar100 | mini_imagenet | cub200"


@dataclass(frozen=True, kw_only=True)
class SplitOptions(Options):
    data: str = option(help="mnist5k | digits | cifar100:DIR | folder:DIR | npz:FILE")
    preset: str | None = option(None, help=_PRESET_HELP)
    base_classes: int | None = option(None, help="|Y_1| (base classes 0..B-1)")
    way: int | None = option(None, help="classes per novel session")
    shot: int | None = option(None, help="training samples per novel class")
    num_sessions: int | None = option(None, help="sessions including the base session (default: all that fit)")
    base_shot: int | None = option(None, help="training samples per base class (default: all)")
    index_lists: str | None = option(None, metavar="DIR", help="folder with session_1.txt .. session_n.txt")
    seed: int = option(0, help="seed of the shot selection")
    out: str = option(help="sessions file to write")


@dataclass(frozen=True, kw_only=True)
class ScoreOptions(TrackOptions, RecordOptions):
    record_what = "first predictions (or matrix)"

    matrix: str | None = option(None, metavar="ACC.json", help="JSON object with a lower-triangular 'matrix'")
    predictions: tuple[str, ...] | None = option(None, metavar="NPZ",
                                                 help="one predictions file per session, in order")
    sessions: str | None = option(None, metavar="FILE", help="sessions file (with --predictions)")
    base_classes: int | None = option(None, help="|Y_1| (with --matrix)")
    way: int | None = option(None, help="classes per novel session (with --matrix)")
    compat: bool = option(False, help="the authors' public gAcc formula (integer beta grid, trapezoid)")
    alphas: int = option(101, help="points of the reported curve")
    plot: str | None = option(None, metavar="PNG", help="also draw gAcc(alpha) with the corner cases to this file")
    store: str | None = store_field(optional=True)


@dataclass(frozen=True, kw_only=True)
class IncrementalRunOptions(RunOptions):
    out: str | None = option("incremental-run", help="work folder: sessions file and per-session predictions")


@dataclass(frozen=True, kw_only=True)
class ReferenceOptions(Options):
    preset: str | None = option(None, help=_PRESET_HELP)
    base_classes: int | None = option(None, help="|Y_1| (base classes 0..B-1)")
    way: int | None = option(None, help="classes per novel session")
    num_sessions: int | None = option(None, help="sessions including the base session")
    base_accuracy: float = option(0.85, help="A_1^1 (0.85 as in the paper)")
    compat: bool = option(False, help="the authors' public gAcc formula (integer beta grid, trapezoid)")


def register(sub: Verbs) -> Verbs:
    s = verb_group(
        sub, "incremental", help="few-shot class-incremental learning: aAcc, gAcc, PD, KR (FSCIL)",
        description="Few-shot class-incremental protocol (docs/incremental.md).\n\n"
                    "  split      build the session split (preset, B/W/K, or the literature's session_<i>.txt);\n"
                    "             alias: sessions\n"
                    "  score      aAcc, lAcc, tAcc, gAcc (+ curve), PD, KR from an accuracy matrix or from\n"
                    "             one predictions file per session, and store the record (--no-store to skip)\n"
                    "  run        sessions -> learner (prototype | finetune | fr) -> predictions -> scores -> store\n"
                    "  reference  the paper's corner cases (Lazy, Greedy, Greedy-NF) for a session layout\n\n"
                    "Accuracies are fractions in [0, 1]. gAcc is the area under gAcc(alpha), alpha in [0, 1],\n"
                    "computed in closed form; --compat reproduces the authors' public formula instead.")

    add_verb(s, "split", SplitOptions, run=_sessions, aliases=["sessions"], human=lambda r: (
        f"wrote {r['out']}: {r['num_sessions']} sessions, classes per session {r['session_sizes']}, "
        f"train samples per session {r['train_sizes']} (sha256 {r['sha256'][:12]})"),
        help="build a sessions file (alias: sessions)", description=
        "Writes a sessions file (JSON with sha256): the classes of each session (base = 0..B-1,\n"
        "then W per session, in label order), the training indices of each session (all base\n"
        "samples, K seeded shots per novel class) and the test pool. Presets: cifar100 and\n"
        "mini_imagenet (60 base, 8 x 5-way 5-shot), cub200 (100 base, 10 x 10-way 5-shot).\n"
        "--index-lists DIR reads the literature's session_<i>.txt files instead (integer lines:\n"
        "training positions; path lines: matched to a folder dataset's training images).")

    add_verb(s, "score", ScoreOptions, run=_score, human=_human_scores,
             help="score an accuracy matrix or per-session predictions", description=
             "From a matrix:      --matrix ACC.json --base-classes B --way W\n"
             "  ACC.json = {\"matrix\": [[A_1^1], [A_2^1, A_2^2], ...]} (fractions; row i = accuracy\n"
             "  after session i on the test samples of sessions 1..i).\n"
             "From predictions:   --predictions S1.npz S2.npz ... --sessions SESSIONS.json\n"
             "  file i covers the test pool after session i (classes of sessions 1..i, in the sessions\n"
             "  file's order); logits/probs are arg-maxed over the classes seen so far.\n"
             "Give one of --matrix and --predictions.\n"
             "Prints aacc, lacc, tacc, gacc, pd, kr, per-session {aacc, tacc, gacc, base_acc,\n"
             "novel_acc} and the gAcc(alpha) curve.")

    add_run_verb(s, "run", IncrementalConfig, run=_run, options=IncrementalRunOptions, human=_human_record,
                 help="run a reference learner through the sessions", description=
                 "prototype: train the backbone on the base session, freeze it, classify by cosine\n"
                 "  similarity to class-mean prototypes; each novel session adds its prototypes.\n"
                 "finetune:  train on the base session, then grow the linear head and fine-tune the whole\n"
                 "  network on each novel session's few shots (it forgets: the contrast to show).\n"
                 "fr:        the paper's feature rectification: a frozen ViT + prototypes, and per\n"
                 "  intermediate block an FR module X_FR = M_m(cat(M_F(X_final), M_I(X_inter))) trained\n"
                 "  with the IR (pairwise distances) and CR (prototype similarities) relation losses,\n"
                 "  a cosine constraint and novel-class CE; branches averaged at test time. Its options\n"
                 "  (--method-opt KEY=VALUE) default to the authors' run script of --preset's dataset\n"
                 "  (else miniImageNet's); --fr-recipe paper: their budget and ViT shape (dim 256, depth 12,\n"
                 "  8 heads), cpu (default): a CPU-sized budget and ViT (dim 64, depth 6, 4 heads).\n"
                 "  See the resolved values with --print-config.\n"
                 "Writes OUT/sessions.json (when built) and OUT/session_<i>.npz, scores the run and adds\n"
                 "a record to the store.\n\n"
                 "example: vistabench incremental run --data mnist5k --method fr --base-classes 5 --way 1 \\\n"
                 "           --shot 5 --epochs 1 --store /tmp/fs.sqlite\n"
                 "         vistabench incremental run --data cifar100:DIR --preset cifar100 --method fr \\\n"
                 "           --fr-recipe paper --print-config")

    add_verb(s, "reference", ReferenceOptions, run=_reference, human=lambda r: "\n".join(
        f"{k:10s} aAcc {100 * v['aacc']:6.2f}  gAcc {100 * v['gacc']:6.2f}  PD {100 * v['pd']:6.2f}  KR {v['kr']:.3f}"
        for k, v in r.items()),
        help="scores of the corner cases Lazy, Greedy, Greedy-NF", description=
        "Lazy keeps A_i^1 = base accuracy and learns nothing new; Greedy learns only the current "
        "session (A_i^i = 1); Greedy-NF also keeps every novel session (A_i^j = 1, j > 1).")
    return s


def _sessions(args: SplitOptions) -> dict[str, Any]:
    from ..data import load_dataset
    from ..protocols.incremental.runner import sessions_for_data, write_sessions

    content = sessions_for_data(load_dataset(args.data, what="data"), data_name=args.data, preset=args.preset,
                                base_classes=args.base_classes, way=args.way, shot=args.shot,
                                num_sessions=args.num_sessions, base_shot=args.base_shot, seed=args.seed,
                                index_lists=args.index_lists)
    content = write_sessions(args.out, content)
    return {"out": args.out, "sha256": content["sha256"], "num_sessions": content["num_sessions"],
            "session_sizes": [len(c) for c in content["classes"]],
            "train_sizes": [len(t) for t in content["train_indices"]],
            "test_pool": len(content["test_indices"])}


def _score(args: ScoreOptions) -> dict[str, Any]:
    from ..protocols.incremental.runner import score_from, to_record

    predictions = list(args.predictions) if args.predictions is not None else None
    scores, sessions = score_from(matrix=args.matrix, predictions=predictions, sessions=args.sessions,
                                  base_classes=args.base_classes, way=args.way,
                                  mode="compat" if args.compat else "exact", num_alphas=args.alphas)
    out = scores.to_dict()
    if args.plot:
        from ..report.incremental import save_gacc_plot

        out["plot"] = save_gacc_plot(scores, args.plot)
    import numpy as np

    from ..data.predictions import load_predictions, predictions_sha256

    first = args.matrix or args.predictions[0]
    # what was scored: the predictions (as a run hashes them), or the accuracy matrix given instead
    digest = (predictions_sha256(*map(load_predictions, predictions)) if predictions is not None
              else predictions_sha256(*(np.asarray(row, dtype=np.float64) for row in scores.matrix)))
    rec = to_record(out, dataset=args.record_dataset(), method=args.method or Path(first).stem,
                    seed=args.seed, sessions=sessions, settings={"source": "score", "predictions_sha256": digest},
                    tag=args.tag)
    ids = store_records(args.store, rec)
    out["record_id"] = ids[0] if ids else None
    return out


def _run(config: Any, *, store: Any = None, work_dir: Any = None) -> Any:
    from ..protocols.incremental.runner import run

    return run(config, store=store, work_dir=work_dir)


def _reference(args: ReferenceOptions) -> dict[str, Any]:
    from ..protocols.incremental.runner import reference_for

    res = reference_for(preset=args.preset, base_classes=args.base_classes, way=args.way,
                        num_sessions=args.num_sessions, base_accuracy=args.base_accuracy,
                        mode="compat" if args.compat else "exact")
    return {k: v.to_dict() for k, v in res.items()}


def _pct(v: Any) -> str:
    return "   –  " if v is None or v != v else f"{100 * v:6.2f}"


def _human_scores(r: dict[str, Any]) -> str:
    lines = ["session   aAcc   tAcc   gAcc   base  novel"]
    for s in r["sessions"]:
        lines.append(f"{s['session']:7d} {_pct(s['aacc'])} {_pct(s['tacc'])} {_pct(s['gacc'])} "
                     f"{_pct(s['base_acc'])} {_pct(s['novel_acc'])}")
    kr = "–" if r["kr"] is None or r["kr"] != r["kr"] else f"{r['kr']:.3f}"
    lines.append(f"aAcc {_pct(r['aacc']).strip()}  lAcc {_pct(r['lacc']).strip()}  tAcc {_pct(r['tacc']).strip()}  "
                 f"gAcc {_pct(r['gacc']).strip()}  PD {_pct(r['pd']).strip()}  KR {kr}   (%, mode {r['settings']['mode']})")
    if r.get("plot"):
        lines.append(f"plot: {r['plot']}")
    if r.get("record_id") is not None:
        lines.append(f"stored as record {r['record_id']}")
    return "\n".join(lines)


def _human_record(r: dict[str, Any]) -> str:
    """A run's record (or records) as the score table."""
    records = r["records"] if "records" in r else [r]
    return "\n\n".join(_human_scores({**rec["metrics"], "settings": rec["settings"], "record_id": rec["id"]})
                       for rec in records)
