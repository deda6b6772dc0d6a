"""`vistabench smalldata ...`: split (alias splits), tune, final, run, score, table, list."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from . import add_json_arg, add_store_arg, int_arg, store_records
from .common import TableResult, render_table

_FMT = argparse.RawDescriptionHelpFormatter


def _dataset_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", required=True, metavar="NAME",
                   help="cifair10 | cub200 | isic2018 | eurosat | clamm | mnist5k | digits | folder")
    p.add_argument("--root", metavar="DIR", help="the dataset's folder (not for mnist5k/digits)")
    p.add_argument("--recipe", choices=["gem", "vistabench"], default="gem",
                   help="protocol rules: gem = the benchmark's code (default: fixed train/val sizes per class, the "
                        "dataset's own augmentation, ASHA eta 2, random search, mean val accuracy of the last 5 "
                        "epochs, best among all trials); vistabench = our earlier rules (60/40 train/val, "
                        "pad-crop + flip, eta 3, TPE, last-epoch balanced accuracy, completed trials only)")
    p.add_argument("--per-class", type=int_arg, metavar="N", help="trainval images per class (default: the preset's; "
                   "alone it keeps the preset's train share, e.g. 20 -> 12 train + 8 val)")
    p.add_argument("--train-per-class", type=int_arg, metavar="N",
                   help="train images per class, the rest of trainval is val (gem: 30; CUB 20, ISIC 50)")
    p.add_argument("--val-fraction", type=float, metavar="F",
                   help="instead of --train-per-class: share of each class's trainval images in val (vistabench: 0.4)")
    p.add_argument("--seed", type=int_arg, default=0, help="split seed and search seed (default 0)")
    p.add_argument("--image-size", type=int_arg, metavar="PX",
                   help="side length variable-size images are resized to (default: the preset's)")


def _run_verb(p: argparse.ArgumentParser, stages: str) -> None:
    """A verb generated from :class:`SmalldataConfig`; ``tune``/``final`` fix ``stages``."""
    from ..protocols.smalldata_config import SmalldataConfig
    from .configured import add_config_options, run_verb

    add_config_options(p, SmalldataConfig)
    p.add_argument("--work-dir", "--out", dest="out", default="smalldata-runs", metavar="DIR",
                   help="where split files and the Optuna study files live (default ./smalldata-runs)")
    add_store_arg(p)
    add_json_arg(p)
    pinned = None if stages == "tune+final" else {"stages": stages}
    run_handler, _ = run_verb(SmalldataConfig, _run_config, pinned=pinned, verb=f"smalldata {stages}")

    def handler(args):
        from .configured import given_from_args, wants_print

        if not wants_print(args):  # printing a config reads no data
            _check_dataset_folder(given_from_args(args).get("dataset"))
        return run_handler(args)

    p.set_defaults(handler=handler, human=_run_text)


def _check_dataset_folder(spec) -> None:
    """``--dataset NAME:DIR`` with a DIR that is not a folder: say so naming --dataset (the user never
    typed --root, which the preset's reader would name)."""
    from ..errors import InputError

    if not isinstance(spec, str) or ":" not in spec:
        return
    root = spec.partition(":")[2]
    if root and not Path(root).is_dir():
        raise InputError(f"dataset {spec!r}: " + (f"{root!r} is a file, expected a folder" if Path(root).exists()
                                                  else f"no such folder {root!r}"))


def _run_config(config, *, store, work_dir):
    from ..protocols.smalldata import run

    return run(config, store=store, work_dir=work_dir)


def register(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    sd = sub.add_parser(
        "smalldata", help="small-data benchmark with fair tuning (Brigato et al.)", formatter_class=_FMT,
        description="Small-data protocol (docs/smalldata.md).\n\n"
                    "  split   write trainval{i}/train{i}/val{i} (+test{i}) split files, i = 0..2 (alias: splits)\n"
                    "  tune    ASHA search per split on train/val (same budget for every method)\n"
                    "  final   train each split's best configuration --repeats times on trainval; score the test set\n"
                    "  run     tune + final\n"
                    "  score   score your model's predictions on a split's test set and store the record\n"
                    "  table   Table 3 (balanced accuracy, Welch italics) or Table 4 (--cost) from the store\n"
                    "  list    dataset presets and methods\n\n"
                    "Metric: balanced accuracy over the dataset's declared classes.")
    s = sd.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = s.add_parser("split", aliases=["splits"], help="write the split files (alias: splits)", description=
                     "Writes trainval0..2.json, train0..2.json, val0..2.json (and test0..2.json for datasets "
                     "without an official test set) to --out. Each holds the sorted `indices` (positions in the "
                     "dataset's training pool), per-class counts and a sha256. Per class, train/val sizes follow the "
                     "recipe: gem's fixed counts (30/20; CUB 20/rest; ISIC 50/30) or vistabench's 60%%/40%%. "
                     "The same seed writes byte-identical files.")
    _dataset_args(p)
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write the split files to")
    add_json_arg(p)
    p.set_defaults(handler=_splits, human=_splits_text)

    for verb, stages, helptext in (
            ("tune", "tune", "search hyper-parameters on every split"),
            ("final", "final", "final runs with each split's best configuration (tune first)"),
            ("run", "tune+final", "tune + final runs")):
        p = s.add_parser(verb, help=helptext, description=helptext + ". Records go to the results store. "
                         "Every flag is a field of the run's config (--print-config shows them all, resolved).")
        _run_verb(p, stages)

    p = s.add_parser("score", help="score a predictions file on a split's test set", description=
                     "Scores a predictions .npz (labels + logits|probs|pred over split I's test set: the "
                     "official test set, or test{I}.json where the dataset has none) with balanced accuracy "
                     "over the dataset's declared classes, and stores a record shaped like a final run's.")
    p.add_argument("--predictions", required=True, metavar="NPZ")
    p.add_argument("--dataset", required=True, metavar="NAME", help="the preset the splits were written for")
    p.add_argument("--root", metavar="DIR", help="the dataset's folder (not for mnist5k/digits)")
    p.add_argument("--image-size", type=int_arg, metavar="PX")
    p.add_argument("--splits", required=True, metavar="DIR", help="folder of split files (`smalldata split`)")
    p.add_argument("--split", type=int_arg, required=True, metavar="I", help="which split's test set")
    p.add_argument("--method", help="method name of the record (default: the predictions file's name without suffix)")
    p.add_argument("--seed", type=int_arg, help="seed of the run that made the predictions (stored as is)")
    p.add_argument("--tag", help="free-form tag of the record (it is stored as a final run either way)")
    add_store_arg(p)
    add_json_arg(p)
    p.set_defaults(handler=_score, human=lambda r: f"balanced accuracy {100 * r['balanced_accuracy']:.2f} "
                   f"(accuracy {100 * r['accuracy']:.2f}) on {r['settings']['test']}"
                   + (f"; stored record {r['record_id']}" if r.get("record_id") is not None else ""))

    p = s.add_parser("table", help="print Table 3 or Table 4 from the store")
    p.add_argument("--format", default="markdown", choices=["markdown", "latex", "csv"])
    p.add_argument("--dataset", help="only this dataset")
    p.add_argument("--cost", action="store_true", help="Table 4: training images/s and peak memory")
    add_store_arg(p, optional=False)
    add_json_arg(p)
    p.set_defaults(handler=_table, human=render_table)

    p = s.add_parser("list", help="dataset presets and methods")
    p.add_argument("--recipe", choices=["gem", "vistabench"], default="gem", help="show this recipe's presets")
    add_json_arg(p)
    p.set_defaults(handler=_list, human=_list_text)
    return s


# ---------------------------------------------------------------------------------- handlers
def _splits(args):
    _check_dataset_folder(args.dataset)
    from ..protocols.smalldata import write_dataset_splits

    return write_dataset_splits(args.dataset, args.out, root=args.root, recipe=args.recipe, per_class=args.per_class,
                        train_per_class=args.train_per_class, val_fraction=args.val_fraction, seed=args.seed,
                        image_size=args.image_size)


def _splits_text(r: dict) -> str:
    return f"wrote {len(r['files'])} split files to {r['out']}: " + ", ".join(
        f"{k} ({v})" for k, v in r["counts"].items())


def _score(args):
    from ..protocols.smalldata import prepare, score, to_record

    ctx = prepare(args.dataset, root=args.root, split_dir=args.splits, image_size=args.image_size, splits=[args.split])
    result = score(args.predictions, ctx, split=args.split)
    rec = to_record(result, dataset=args.dataset, method=args.method or Path(args.predictions).stem, seed=args.seed,
                    split_hash=result["settings"]["split_hash"], settings={"predictions": str(args.predictions)},
                    tag=args.tag)
    ids = store_records(args.store, rec)
    return {**result, "record_id": ids[0] if ids else None}


def _run_text(r: dict) -> str:
    """One line per record: what it is and its score (the full records with --json)."""
    lines = []
    for rec in r.get("records", [r]):
        st, m = rec.get("settings", {}), rec.get("metrics", {})
        what = f"{rec['dataset']} / {rec['method']} split {st.get('split')}"
        if rec.get("kind") == "tune":
            lines.append(f"{what}: {m.get('trials')} trials, {m.get('total_epochs')} epochs, best val score "
                         f"{100 * m['best_val_score']:.2f}%")
        else:
            lines.append(f"{what} {rec.get('kind')} run {st.get('repeat')}: test balanced accuracy "
                         f"{100 * m['balanced_accuracy']:.2f}% (config {json.dumps(st.get('config'), sort_keys=True)})")
    return "\n".join(lines)


def _table(args):
    from .common import open_store
    from ..report.smalldata import accuracy_table, cost_table

    with open_store(args.store) as store:
        return TableResult((cost_table if args.cost else accuracy_table)(store, dataset=args.dataset), args.format,
                           with_styles=True)


def _list(args):
    from ..protocols.smalldata import catalog

    return catalog(args.recipe)


def _list_text(r: dict) -> str:
    from ..data.augment import Augmentation

    lines = ["datasets:"]
    for n, p in r["datasets"].items():
        split = (f"{p['train_per_class']} train + {'rest' if p['per_class'] is None else p['per_class'] - p['train_per_class']}"
                 f" val" if p["train_per_class"] else f"val fraction {p['val_fraction']}")
        lines.append(f"  {n:10s} {p['description']}; {p['per_class'] or 'all'}/class ({split}), batch "
                     f"{p['batch_sizes']}, {p['trials']} trials x {p['epochs']} epochs, grace {p['grace_period']}, "
                     f"model {p['model']}; augment {Augmentation(**p['augmentation']).describe()}")
    lines.append(f"search rules ({r['recipe']} recipe): " + ", ".join(
        f"{k} {v}" for k, v in next(iter(r["datasets"].values())).items()
        if k in ("reduction_factor", "sampler", "score_window", "select", "val_metric")))
    lines.append("methods:")
    for n, m in r["methods"].items():
        extra = json.dumps(m["options"]) if m["options"] else ""
        lines.append(f"  {n:10s} {m['title']} {extra}".rstrip())
    return "\n".join(lines)
