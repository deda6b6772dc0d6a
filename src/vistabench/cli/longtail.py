"""`vistabench longtail ...`: profile, split, sweep, score, run, table."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from . import store_records
from ..config import Options, option
from ..protocols.longtail.config import LongtailConfig
from .common import TableFormat, TableResult, render_table
from .verbs import RecordOptions, RunOptions, Verbs, add_run_verb, add_verb, store_field, verb_group
from .verbs import TrackOptions


def run_longtail(config, *, store=None, work_dir=None):
    from ..protocols.longtail.runner import run  # torch only when a run happens

    return run(config, store=store, work_dir=work_dir)


Kind = Literal["exp", "step"]
_KIND_HELP = "exp: counts fall exponentially with the class rank; step: half the classes at n_max, half at n_max/rho"


@dataclass(frozen=True, kw_only=True)
class ProfileOptions(Options):
    num_classes: int = option(flags=("--classes",), metavar="CLASSES", help="number of classes C")
    n_max: int = option(help="samples of the head class")
    imbalance: float = option(help="rho = max/min (or the paper's 1/rho)")
    kind: Kind = option("exp", help=_KIND_HELP)


@dataclass(frozen=True, kw_only=True)
class SplitOptions(Options):
    data: str = option(help="mnist5k | digits | cifar10:DIR | cifar100:DIR | folder:DIR | npz:FILE")
    imbalance: float = option(help="rho = max/min (or the paper's 1/rho)")
    n_max: int | None = option(None, help="head-class count (default: the smallest class size)")
    kind: Kind = option("exp", help=_KIND_HELP)
    val_fraction: float = option(0.0, help="hold out this fraction per class (e.g. 0.1)")
    seed: int = option(0, help="seed of the subset")
    out: str = option(help="split file to write (JSON)")


@dataclass(frozen=True, kw_only=True)
class SweepOptions(Options):
    pool_labels: str = option(flags=("--labels",), metavar="LABELS",
                              help=".npz with 'labels' of the test pool (a predictions file works)")
    train_counts: str = option(help="JSON list of training counts by class index")
    test_imbalance: float = option(help="rho_t of the test distributions")
    n_max: int | None = option(None, help="n_max of the test counts (default: smallest class pool)")
    points: int = option(10, help="T, the number of test distributions")
    repeats: int = option(5, help="R test sets per point")
    seed: int = option(0, help="seed of the test sets")
    out: str = option(help="sweep file to write (JSON)")


@dataclass(frozen=True, kw_only=True)
class ScoreOptions(TrackOptions, RecordOptions):
    predictions: str = option(help="predictions .npz (labels + logits|probs|pred over the test pool)")
    sweep: str = option(help="sweep file (`vistabench longtail sweep`)")
    exact: bool = option(False, help="noise-free V_t = sum N_c acc_c / sum N_c (R -> infinity)")
    convention: Literal["tade", "oltr"] = option(
        "tade", help="many/medium/few thresholds: tade >100/20-100/<20, oltr >=100/21-99/<=20")
    bootstrap: int = option(0, metavar="B", help="add 95% bootstrap intervals (B replicates)")
    store: str | None = store_field(optional=True)


@dataclass(frozen=True, kw_only=True)
class LongtailRunOptions(RunOptions):
    out: str | None = option(None, help="folder for split.json, predictions.npz, sweep.json")


@dataclass(frozen=True, kw_only=True)
class TableOptions(Options):
    layout: Literal["paper", "survey"] = option("paper", help="paper: one row per (dataset, method, rho); "
                                                "survey: matched and mismatched test imbalance side by side")
    mode: Literal["resampled", "exact"] | None = option(
        None, help="the scoring mode whose results the table shows (never mixed): resampled (default; the "
        "protocol's R drawn test sets per point) or exact (noise-free, R -> infinity; every scored record "
        "keeps these too)")
    exact: bool = option(False, help="the same as --mode exact")
    format: TableFormat = option("markdown", help="table format")
    dataset: str | None = option(None, help="only records of this dataset")
    store: str = store_field(optional=False)


def register(sub: Verbs) -> Verbs:
    s = verb_group(
        sub, "longtail", help="long-tailed classification under unknown test distributions (Fang et al.)",
        description="Long-tailed protocol (docs/longtail.md).\n\n"
                    "  profile  per-class training counts of the CIFAR-LT convention\n"
                    "  split    pick a long-tailed training subset of a dataset (seeded, hashed file)\n"
                    "  sweep    build the evolving test sweep over a test pool (seeded, hashed file)\n"
                    "  score    score a predictions file against a sweep: AUC, AVG, STD, MAX, MIN, DR, BTD, ...\n"
                    "           and store the record (--no-store to skip)\n"
                    "  run      split -> train a reference method -> predict -> sweep -> score -> store\n"
                    "  table    the paper-style table of the stored runs (--layout survey: the survey's\n"
                    "           rho_trn = rho_tst / rho_trn != rho_tst columns)\n\n"
                    "Imbalance ratios are max/min class count (>= 1); the paper's notation 0.01 is read as 100.")

    add_verb(s, "profile", ProfileOptions, run=_profile, human=lambda r: " ".join(map(str, r)),
             help="per-class training counts", description=
             "Training counts n_r = floor(n_max * rho^(-r/(C-1))) for rank r (exp), or half the "
             "classes at n_max and half at n_max/rho (step). Example: --classes 10 --n-max 5000 "
             "--imbalance 100 gives 5000 2997 1796 1077 645 387 232 139 83 50.")

    add_verb(s, "split", SplitOptions, run=_split,
             human=lambda r: f"wrote {r['out']}: counts {r['counts']} (sha256 {r['sha256'][:12]})",
             help="long-tailed training subset of a dataset", description=
             "Writes a split file with the training indices (positions in the dataset's training "
             "part), the per-class counts and a sha256; the same seed gives a byte-identical file.")

    add_verb(s, "sweep", SweepOptions, run=_sweep,
             human=lambda r: f"wrote {r['out']}: {r['points']} points x {r['repeats']} sets (sha256 {r['sha256'][:12]})",
             help="build the evolving test sweep", description=
             "Builds T test distributions peaked at alpha_t = (t-1)C/T + 1 over classes ranked by "
             "training count, draws R test sets for each from the pool (without replacement when "
             "the pool allows), and writes them with the divergences to a hashed sweep file.")

    add_verb(s, "score", ScoreOptions, run=_score, human=_score_text,
             help="score predictions against a sweep", description=
             "Scores a predictions .npz (labels + logits|probs|pred over the test pool, in the sweep's "
             "pool order) and prints AUC, AVG, STD, MAX, MIN, DR (drop_ratio), BTD (balanced), "
             "many/medium/few, worst-class accuracy and the per-point accuracies. Fractions in [0,1]; "
             "null when undefined.")

    add_run_verb(s, "run", LongtailConfig, run=run_longtail, options=LongtailRunOptions, human=_run_text,
                 help="train a reference method and score it", description=
                 "Builds the long-tailed split, trains METHOD, predicts the dataset's test part, builds "
                 "the sweep (test imbalance = training imbalance unless given), scores it and stores the "
                 "record. Files go to --out (split.json, predictions.npz, sweep.json).\n\n"
                 "The recipe (optimizer, schedule, method options) is part of the config: --recipe "
                 "reference is the method's authors' CIFAR-LT training (default on cifar10:/cifar100:), "
                 "cpu a CPU-sized one; --print-config [--json] shows everything a run will use.")

    add_verb(s, "table", TableOptions, run=_table, human=render_table,
             help="print the results table from the store", description=
             "Renders the store's long-tail results of one scoring mode (--mode; resampled by default): "
             "each row gives N, the number of distinct results (seeds or predictions files: the same "
             "predictions scored twice count once), and each cell the mean ± SD over them; best bold, "
             "second underlined, third italic, by mean only and only between rows with N >= 2. Column "
             "titles carry the direction (↑ higher is better, ↓ lower). --layout paper (default): "
             "AUC, AVG, sweep SD (the survey's STD: spread over the test sweep, not over seeds), MAX, MIN, "
             "DR, BTD, Many/Med./Few, Worst per (dataset, method, rho). --layout "
             "survey: AUC, AVG, STD, MAX, MIN, DR, BTD for runs whose test imbalance equals the training "
             "imbalance and for runs where it differs (--test-imbalance), side by side.")
    return s


def _table(opts: TableOptions) -> TableResult:
    from ..report.longtail import longtail_table, survey_table
    from .common import open_store

    from ..errors import InputError

    if opts.exact and opts.mode not in (None, "exact"):
        raise InputError(f"--exact: the same as --mode exact; it cannot go with --mode {opts.mode}")
    build = survey_table if opts.layout == "survey" else longtail_table
    with open_store(opts.store) as store:
        return TableResult(build(store, dataset=opts.dataset, mode="exact" if opts.exact else opts.mode),
                           opts.format)


def _profile(opts: ProfileOptions) -> list[int]:
    from ..metrics.longtail import training_profile

    return training_profile(opts.num_classes, n_max=opts.n_max, imbalance=opts.imbalance, kind=opts.kind).tolist()


def _split(args: SplitOptions) -> dict[str, Any]:
    from ..data import load_dataset, write_split
    from ..protocols.longtail.runner import build_training_split

    ds = load_dataset(args.data, what="data")
    split = build_training_split(ds.train.labels, imbalance=args.imbalance, n_max=args.n_max, kind=args.kind,
                                 seed=args.seed, val_fraction=args.val_fraction, dataset=args.data)
    write_split(args.out, split)
    return {"out": args.out, "counts": split["counts"], "sha256": split["sha256"]}


def _sweep(args: SweepOptions) -> dict[str, Any]:
    from ..protocols.longtail.sweep import build_sweep, write_sweep

    sweep = build_sweep(args.pool_labels, args.train_counts, test_imbalance=args.test_imbalance, n_max=args.n_max,
                        points=args.points, repeats=args.repeats, seed=args.seed)
    write_sweep(args.out, sweep)
    return {"out": args.out, "points": len(sweep["points"]), "repeats": sweep["repeats"], "sha256": sweep["sha256"]}


def _score(args: ScoreOptions) -> dict[str, Any]:
    from ..data.predictions import load_predictions, predictions_sha256
    from ..protocols.longtail.runner import read_sweep, score, to_record
    from ..protocols.longtail.sweep import sweep_settings

    sweep = read_sweep(args.sweep)
    pred = load_predictions(args.predictions)
    result = score(pred, sweep, exact=args.exact, convention=args.convention, bootstrap=args.bootstrap)
    settings = {**sweep_settings(sweep), "predictions": str(args.predictions),
                "predictions_sha256": predictions_sha256(pred)}
    rec = to_record(result, dataset=args.record_dataset(), method=args.method or Path(args.predictions).stem, seed=args.seed,
                    split_hash=sweep["sha256"], settings=settings, tag=args.tag)
    ids = store_records(args.store, rec)
    return {**result, "record_id": ids[0] if ids else None}


def _pct(v):
    return "–" if v is None or v != v else f"{100 * v:.2f}"


def _score_text(r) -> str:
    names = [("AUC", "auc"), ("AVG", "avg"), ("STD", "std"), ("MAX", "max"), ("MIN", "min"), ("DR", "drop_ratio"),
             ("BTD", "balanced"), ("Many", "many"), ("Med.", "medium"), ("Few", "few"), ("Worst", "worst_class")]
    lines = [f"mode: {r['mode']} (values in %)", "  ".join(f"{a}={_pct(r[k])}" for a, k in names)]
    if "ci" in r:
        lines.append("95% CI: " + "  ".join(f"{a}=[{_pct(r['ci'][k][0])}, {_pct(r['ci'][k][1])}]" for a, k in names))
    lines.append("point  alpha    divergence  accuracy")
    for i, p in enumerate(r["points"], 1):
        lines.append(f"{i:5d}  {p['alpha']:6.2f}  {p['divergence']:10.4f}  {_pct(p['accuracy']):>8}")
    if r.get("record_id") is not None:
        lines.append(f"stored record {r['record_id']}")
    return "\n".join(lines)


def _run_text(rec) -> str:
    head = f"stored record {rec['id']}" if rec.get("id") is not None else "not stored (--no-store)"
    head += f" ({rec['method']} on {rec['dataset']})\n"
    st = rec.get("settings") or {}
    if st.get("profile") == "listed":  # imbalance listed: the list's own imbalance
        head += (f"trained on the list as it is: imbalance {st['imbalance']:g} (n_max {st['n_max']}, "
                 f"n_min {st['n_min']}); test imbalance {st['test_imbalance']:g}\n")
    return head + _score_text(rec["metrics"])
