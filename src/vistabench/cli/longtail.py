"""`vistabench longtail ...`: profile, split, sweep, score, run."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import add_json_arg, add_record_args, add_store_arg, int_arg, store_records
from ..protocols.longtail_config import LongtailConfig
from .common import TableResult, render_table
from .configured import add_config_options, run_verb


def run_longtail(config, *, store=None, work_dir=None):
    from ..protocols.longtail import run  # torch only when a run happens

    return run(config, store=store, work_dir=work_dir)

_FMT = argparse.RawDescriptionHelpFormatter


def register(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    lt = sub.add_parser(
        "longtail", help="long-tailed classification under unknown test distributions (Fang et al.)",
        formatter_class=_FMT,
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
    s = lt.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = s.add_parser("profile", help="per-class training counts", description=
                     "Training counts n_r = floor(n_max * rho^(-r/(C-1))) for rank r (exp), or half the "
                     "classes at n_max and half at n_max/rho (step). Example: --classes 10 --n-max 5000 "
                     "--imbalance 100 gives 5000 2997 1796 1077 645 387 232 139 83 50.")
    p.add_argument("--classes", type=int_arg, required=True, help="number of classes C")
    p.add_argument("--n-max", type=int_arg, required=True, help="samples of the head class")
    p.add_argument("--imbalance", type=float, required=True, help="rho = max/min (or the paper's 1/rho)")
    p.add_argument("--kind", choices=["exp", "step"], default="exp")
    add_json_arg(p)
    p.set_defaults(handler=_profile, human=lambda r: " ".join(map(str, r)))

    p = s.add_parser("split", help="long-tailed training subset of a dataset", description=
                     "Writes a split file with the training indices (positions in the dataset's training "
                     "part), the per-class counts and a sha256; the same seed gives a byte-identical file.")
    p.add_argument("--data", required=True, help="mnist5k | digits | cifar10:DIR | cifar100:DIR | folder:DIR | npz:FILE")
    p.add_argument("--imbalance", type=float, required=True)
    p.add_argument("--n-max", type=int_arg, help="head-class count (default: the smallest class size)")
    p.add_argument("--kind", choices=["exp", "step"], default="exp")
    p.add_argument("--val-fraction", type=float, default=0.0, help="hold out this fraction per class (e.g. 0.1)")
    p.add_argument("--seed", type=int_arg, default=0)
    p.add_argument("--out", required=True, help="split file to write (JSON)")
    add_json_arg(p)
    p.set_defaults(handler=_split, human=lambda r: f"wrote {r['out']}: counts {r['counts']} (sha256 {r['sha256'][:12]})")

    p = s.add_parser("sweep", help="build the evolving test sweep", description=
                     "Builds T test distributions peaked at alpha_t = (t-1)C/T + 1 over classes ranked by "
                     "training count, draws R test sets for each from the pool (without replacement when "
                     "the pool allows), and writes them with the divergences to a hashed sweep file.")
    p.add_argument("--labels", required=True, help=".npz with 'labels' of the test pool (a predictions file works)")
    p.add_argument("--train-counts", required=True, help="JSON list of training counts by class index")
    p.add_argument("--test-imbalance", type=float, required=True, help="rho_t of the test distributions")
    p.add_argument("--n-max", type=int_arg, help="n_max of the test counts (default: smallest class pool)")
    p.add_argument("--points", type=int_arg, default=10, help="T (default 10)")
    p.add_argument("--repeats", type=int_arg, default=5, help="R test sets per point (default 5)")
    p.add_argument("--seed", type=int_arg, default=0)
    p.add_argument("--out", required=True, help="sweep file to write (JSON)")
    add_json_arg(p)
    p.set_defaults(handler=_sweep, human=lambda r: f"wrote {r['out']}: {r['points']} points x {r['repeats']} sets "
                                                    f"(sha256 {r['sha256'][:12]})")

    p = s.add_parser("score", help="score predictions against a sweep", description=
                     "Scores a predictions .npz (labels + logits|probs|pred over the test pool, in the sweep's "
                     "pool order) and prints AUC, AVG, STD, MAX, MIN, DR (drop_ratio), BTD (balanced), "
                     "many/medium/few, worst-class accuracy and the per-point accuracies. Fractions in [0,1]; "
                     "null when undefined.")
    p.add_argument("--predictions", required=True)
    p.add_argument("--sweep", required=True)
    p.add_argument("--exact", action="store_true", help="noise-free V_t = sum N_c acc_c / sum N_c (R -> infinity)")
    p.add_argument("--convention", choices=["tade", "oltr"], default="tade",
                   help="many/medium/few thresholds: tade >100/20-100/<20 (default), oltr >=100/21-99/<=20")
    p.add_argument("--bootstrap", type=int_arg, default=0, metavar="B", help="add 95%% bootstrap intervals (B replicates)")
    add_record_args(p, what="predictions")
    add_store_arg(p)
    add_json_arg(p)
    p.set_defaults(handler=_score, human=_score_text)

    p = s.add_parser("run", help="train a reference method and score it", formatter_class=_FMT, description=
                     "Builds the long-tailed split, trains METHOD, predicts the dataset's test part, builds "
                     "the sweep (test imbalance = training imbalance unless given), scores it and stores the "
                     "record. Files go to --out (split.json, predictions.npz, sweep.json).\n\n"
                     "The recipe (optimizer, schedule, method options) is part of the config: --recipe "
                     "reference is the method's authors' CIFAR-LT training (default on cifar10:/cifar100:), "
                     "cpu a CPU-sized one; --print-config [--json] shows everything a run will use.")
    add_config_options(p, LongtailConfig)
    p.add_argument("--out", help="folder for split.json, predictions.npz, sweep.json")
    add_store_arg(p)
    add_json_arg(p)
    handler, human = run_verb(LongtailConfig, run_longtail, human=_run_text)
    p.set_defaults(handler=handler, human=human)

    p = s.add_parser("table", help="print the results table from the store", description=
                     "Renders the store's long-tail records, best bold, second underlined, third italic; "
                     "column titles carry the direction (↑ higher is better, ↓ lower). --layout paper (default): "
                     "AUC, AVG, STD, MAX, MIN, DR, BTD, Many/Med./Few, Worst per (dataset, method, rho). --layout "
                     "survey: AUC, AVG, STD, MAX, MIN, DR, BTD for runs whose test imbalance equals the training "
                     "imbalance and for runs where it differs (--test-imbalance), side by side.")
    p.add_argument("--layout", choices=["paper", "survey"], default="paper")
    p.add_argument("--exact", action="store_true", help="the noise-free (R -> infinity) scores")
    p.add_argument("--format", default="markdown", choices=["markdown", "latex", "csv"])
    p.add_argument("--dataset", help="only records of this dataset")
    add_store_arg(p, optional=False)
    add_json_arg(p)
    p.set_defaults(handler=_table, human=render_table)
    return s


def _table(args):
    from ..report.longtail import longtail_table, survey_table
    from .common import open_store

    build = survey_table if args.layout == "survey" else longtail_table
    with open_store(args.store) as store:
        return TableResult(build(store, dataset=args.dataset, exact=args.exact), args.format)


def _profile(args):
    from ..metrics.longtail import training_profile

    return training_profile(args.classes, n_max=args.n_max, imbalance=args.imbalance, kind=args.kind).tolist()


def _split(args):
    from ..data import load_dataset, write_split
    from ..protocols.longtail import build_training_split

    ds = load_dataset(args.data, what="data")
    split = build_training_split(ds.train.labels, imbalance=args.imbalance, n_max=args.n_max, kind=args.kind,
                                 seed=args.seed, val_fraction=args.val_fraction, dataset=args.data)
    write_split(args.out, split)
    return {"out": args.out, "counts": split["counts"], "sha256": split["sha256"]}


def _sweep(args):
    from ..protocols.longtail_sweep import build_sweep, write_sweep

    sweep = build_sweep(args.labels, args.train_counts, test_imbalance=args.test_imbalance, n_max=args.n_max,
                        points=args.points, repeats=args.repeats, seed=args.seed)
    write_sweep(args.out, sweep)
    return {"out": args.out, "points": len(sweep["points"]), "repeats": sweep["repeats"], "sha256": sweep["sha256"]}


def _score(args):
    from ..protocols.longtail import read_sweep, score, to_record
    from ..protocols.longtail_sweep import sweep_settings

    sweep = read_sweep(args.sweep)
    result = score(args.predictions, sweep, exact=args.exact, convention=args.convention, bootstrap=args.bootstrap)
    settings = {**sweep_settings(sweep), "predictions": str(args.predictions)}
    rec = to_record(result, dataset=args.dataset or "custom", method=args.method or Path(args.predictions).stem, seed=args.seed,
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
    return f"{head} ({rec['method']} on {rec['dataset']})\n" + _score_text(rec["metrics"])
