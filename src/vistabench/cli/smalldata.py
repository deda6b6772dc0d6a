"""`vistabench smalldata ...`: split (alias splits), tune, final, run, score, table, list."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from . import add_json_arg, add_store_arg, read_json_file, store_records
from ..errors import InputError

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
    p.add_argument("--per-class", type=int, metavar="N", help="trainval images per class (default: the preset's; "
                   "alone it keeps the preset's train share, e.g. 20 -> 12 train + 8 val)")
    p.add_argument("--train-per-class", type=int, metavar="N",
                   help="train images per class, the rest of trainval is val (gem: 30; CUB 20, ISIC 50)")
    p.add_argument("--val-fraction", type=float, metavar="F",
                   help="instead of --train-per-class: share of each class's trainval images in val (vistabench: 0.4)")
    p.add_argument("--seed", type=int, default=0, help="split seed and search seed (default 0)")
    p.add_argument("--image-size", type=int, metavar="PX",
                   help="side length variable-size images are resized to (default: the preset's)")


def _run_args(p: argparse.ArgumentParser, *, final: bool, search: bool) -> None:
    _dataset_args(p)
    p.add_argument("--method", required=True, metavar="NAME",
                   help="ce | ce_untuned | cosine | cosine_ce | harmonic | grad_l2")
    p.add_argument("--splits", metavar="DIR", help="folder of split files (default: written to WORK/splits/...)")
    p.add_argument("--split", type=int, nargs="+", metavar="I", help="only these splits (default: all)")
    p.add_argument("--model", help="backbone (default: the preset's: wrn16_8 for cifair10, resnet50, cnn28 for "
                                   "mnist5k/digits); resnet18 for quick runs")
    p.add_argument("--epochs", type=int, help="epochs per trial (default: the preset's)")
    p.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N | auto")
    p.add_argument("--work-dir", default="smalldata-runs", metavar="DIR",
                   help="where split files and the Optuna study files live (default ./smalldata-runs)")
    p.add_argument("--threads", type=int, help="torch CPU threads while training")
    if search:
        p.add_argument("--trials", type=int, help="configurations per split (default: the preset's)")
        p.add_argument("--grace-period", type=int, help="ASHA's minimum epochs (default: the preset's)")
        p.add_argument("--reduction-factor", type=int, help="ASHA's eta (default: the recipe's, gem 2, vistabench 3)")
        p.add_argument("--scheduler", choices=["asha", "none"], default="asha",
                       help="asha stops weak trials early; none trains every trial to --epochs")
        p.add_argument("--sampler", choices=["random", "tpe"],
                       help="how configurations are proposed (default: the recipe's, gem random, vistabench tpe)")
        p.add_argument("--score-window", type=int, metavar="K",
                       help="a trial's score = mean val metric of its last K epochs (default: gem 5, vistabench 1)")
        p.add_argument("--select", choices=["all", "complete"],
                       help="pick the best configuration among all trials, stopped ones included (gem), or among "
                            "completed trials only (vistabench)")
        p.add_argument("--val-metric", choices=["accuracy", "balanced_accuracy"],
                       help="validation metric the search maximises (default: gem accuracy, vistabench balanced)")
        p.add_argument("--augment", choices=["preset", "pad-crop-flip", "none"], default="preset",
                       help="training augmentation: the dataset's own (preset, gem's per dataset), zero-pad-4 crop + "
                            "horizontal flip for every dataset, or none")
        p.add_argument("--engine", choices=["local", "ray"], default="local",
                       help="local: Optuna in-process (resumable SQLite study)" +
                            (", final runs in this process or --max-parallel processes" if final else "") +
                            "; ray: Ray Tune" + (", each final run a Ray task (the grid engine)" if final else ""))
        p.add_argument("--ray-address", metavar="ADDR", help="Ray cluster address (default: start a local Ray)")
        p.add_argument("--space", metavar="JSON|FILE",
                       help='override the search space, e.g. \'{"lr": {"loguniform": [1e-3, 0.1]}}\'')
        p.add_argument("--batch-sizes", type=int, nargs="+", metavar="B", help="override the searched batch sizes")
    if final:
        p.add_argument("--repeats", type=int, default=10, help="final runs per split (default 10)")
        p.add_argument("--final-epochs", type=int, help="epochs of the final runs (default: --epochs)")
        p.add_argument("--highres-scale", type=int, default=1, metavar="S",
                       help="after each final run, fine-tune it for the same epochs with the same "
                            "hyper-parameters on S x larger images and score it there (the paper's "
                            "448 px step on CUB/CLaMM: S=2); stored with tag 'highres' (default 1: off)")
        p.add_argument("--max-parallel", type=int, metavar="N",
                       help="final runs in flight at once (local: N worker processes, default 1 = in this process; "
                            "ray: default as many as the cluster allows); each uses --threads CPUs (default 1 "
                            "when dispatched). Records are the same as one after another")
    add_store_arg(p)
    add_json_arg(p)


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

    for verb, final, search, helptext in (
            ("tune", False, True, "search hyper-parameters on every split"),
            ("final", True, True, "final runs with each split's best configuration (tune first)"),
            ("run", True, True, "tune + final runs")):
        p = s.add_parser(verb, help=helptext, description=helptext + ". Records go to the results store.")
        _run_args(p, final=final, search=search)
        p.set_defaults(handler=_run, human=_run_text, mode=verb)

    p = s.add_parser("score", help="score a predictions file on a split's test set", description=
                     "Scores a predictions .npz (labels + logits|probs|pred over split I's test set: the "
                     "official test set, or test{I}.json where the dataset has none) with balanced accuracy "
                     "over the dataset's declared classes, and stores a record shaped like a final run's.")
    p.add_argument("--predictions", required=True, metavar="NPZ")
    p.add_argument("--dataset", required=True, metavar="NAME", help="the preset the splits were written for")
    p.add_argument("--root", metavar="DIR", help="the dataset's folder (not for mnist5k/digits)")
    p.add_argument("--image-size", type=int, metavar="PX")
    p.add_argument("--splits", required=True, metavar="DIR", help="folder of split files (`smalldata split`)")
    p.add_argument("--split", type=int, required=True, metavar="I", help="which split's test set")
    p.add_argument("--method", help="method name of the record (default: the predictions file's name without suffix)")
    p.add_argument("--seed", type=int, help="seed of the run that made the predictions (stored as is)")
    p.add_argument("--tag", default="final", help="record tag (default: final, as the final runs)")
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
    p.set_defaults(handler=_table)

    p = s.add_parser("list", help="dataset presets and methods")
    p.add_argument("--recipe", choices=["gem", "vistabench"], default="gem", help="show this recipe's presets")
    add_json_arg(p)
    p.set_defaults(handler=_list, human=_list_text)
    return s


# ---------------------------------------------------------------------------------- handlers
def _check_ranges(args) -> None:
    """Every integer option's range, before any data is loaded (CLI option names in the message)."""
    from .._validation import check_int

    for dest, low in (("per_class", 1), ("image_size", 1), ("epochs", 1), ("threads", 1), ("trials", 1),
                      ("grace_period", 1), ("reduction_factor", 2), ("repeats", 1), ("final_epochs", 1),
                      ("train_per_class", 1), ("score_window", 1)):
        check_int(getattr(args, dest, None), f"--{dest.replace('_', '-')}", min=low, allow_none=True)
    vf = getattr(args, "val_fraction", None)
    if vf is not None and not 0 < vf < 1:
        raise InputError(f"--val-fraction: expected a fraction in (0, 1), got {vf}")
    for dest, low in (("batch_sizes", 1), ("split", 0)):
        for v in getattr(args, dest, None) or []:
            check_int(v, f"--{dest.replace('_', '-')}", min=low)


def _splits(args):
    from ..data.smalldata import get_preset, load_smalldata

    _check_ranges(args)
    from ..data.smalldata_splits import write_preset_splits

    preset = get_preset(args.dataset, recipe=args.recipe)
    _check_sizes(args)
    data = load_smalldata(args.dataset, args.root, image_size=args.image_size)
    res = write_preset_splits(data, args.out, dataset_name=args.dataset, preset=preset, seed=args.seed,
                              per_class=args.per_class, train_per_class=args.train_per_class,
                              val_fraction=args.val_fraction)
    res["dataset"] = args.dataset
    res["recipe"] = args.recipe
    return res


def _check_sizes(args) -> None:
    if args.train_per_class is not None and args.val_fraction is not None:
        raise InputError(f"--val-fraction {args.val_fraction}: give either --train-per-class or --val-fraction, "
                         "not both")


def _augmentation(name: str):
    from ..data.augment import NO_AUGMENTATION, PAD_CROP_FLIP

    return {"preset": None, "pad-crop-flip": PAD_CROP_FLIP, "none": NO_AUGMENTATION}[name]


def _splits_text(r: dict) -> str:
    return f"wrote {len(r['files'])} split files to {r['out']}: " + ", ".join(
        f"{k} ({v})" for k, v in r["counts"].items())


def _space_override(args) -> dict | None:
    out: dict = {}
    if getattr(args, "space", None):
        text = args.space.strip()
        if text.startswith("{"):
            try:
                out = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(f"--space: malformed JSON ({exc.msg})") from exc
        else:
            out = read_json_file(text, "--space")
        if not isinstance(out, dict):
            raise InputError(f"--space {text[:60]!r}: expected a JSON object of parameter -> range, "
                             f'e.g. {{"lr": {{"loguniform": [0.001, 0.1]}}}}, got a {type(out).__name__}')
    if getattr(args, "batch_sizes", None):
        out["batch_size"] = {"choice": list(args.batch_sizes)}
    return out or None


def _score(args):
    from ..protocols.smalldata import prepare, score, to_record

    ctx = prepare(args.dataset, root=args.root, split_dir=args.splits, image_size=args.image_size, splits=[args.split])
    result = score(args.predictions, ctx, args.split)
    rec = to_record(result, dataset=args.dataset, method=args.method or Path(args.predictions).stem, seed=args.seed,
                    split_hash=result["settings"]["split_hash"], settings={"predictions": str(args.predictions)},
                    tag=args.tag)
    ids = store_records(args.store, rec)
    return {**result, "record_id": ids[0] if ids else None}


def _run(args):
    from contextlib import nullcontext

    from ..data.smalldata import get_preset
    from ..learners.smalldata import get_method
    from ..protocols.smalldata import Options, prepare, run_method
    from ..store import ResultsStore

    _check_ranges(args)
    get_method(args.method)  # unknown names fail before the data is loaded
    _check_sizes(args)
    split_out = None
    if args.splits is None:
        sizes = get_preset(args.dataset, recipe=args.recipe).split_sizes(
            per_class=args.per_class, train_per_class=args.train_per_class, val_fraction=args.val_fraction)
        pc, tpc, vf = sizes["per_class"], sizes["train_per_class"], sizes["val_fraction"]
        split_out = (Path(args.work_dir) / "splits" /
                     f"{args.dataset}-pc{pc if pc is not None else 'all'}-{f'train{tpc}' if tpc else f'vf{vf:g}'}"
                     f"-seed{args.seed}")
    ctx = prepare(args.dataset, root=args.root, split_dir=args.splits, per_class=args.per_class, seed=args.seed,
                  image_size=args.image_size, splits=args.split, out_splits=split_out, recipe=args.recipe,
                  train_per_class=args.train_per_class, val_fraction=args.val_fraction)
    opts = Options(model=args.model, epochs=args.epochs, final_epochs=getattr(args, "final_epochs", None),
                   trials=args.trials, grace_period=args.grace_period, reduction_factor=args.reduction_factor,
                   repeats=getattr(args, "repeats", 10), device=args.device, engine=args.engine,
                   ray_address=args.ray_address, sampler=args.sampler, scheduler=args.scheduler, seed=args.seed,
                   score_window=args.score_window, select=args.select, val_metric=args.val_metric,
                   augmentation=_augmentation(args.augment),
                   space=_space_override(args), work_dir=args.work_dir, threads=args.threads,
                   highres_scale=_highres_scale(args), max_parallel=getattr(args, "max_parallel", None))
    with (ResultsStore(args.store) if args.store else nullcontext()) as store:
        return run_method(ctx, args.method, opts, store, do_tune=args.mode in ("tune", "run"),
                          do_final=args.mode in ("final", "run"), require_search=args.mode == "final")


def _highres_scale(args) -> int:
    s = getattr(args, "highres_scale", 1)
    if s < 1:
        raise InputError(f"--highres-scale: expected an integer >= 1 (1 = off), got {s}")
    return s


def _run_text(r: dict) -> str:
    lines = [f"{r['dataset']} / {r['method']}:"]
    for e in r["splits"]:
        s = f"  split {e['split']}: "
        if e.get("trials"):
            s += f"{e['trials']} trials, {e['total_epochs']} epochs, best val score {100 * e['best_val']:.2f}% "
        s += f"config {json.dumps(e['best_config'], sort_keys=True)}"
        if "test_balanced_accuracy" in e:
            v = [x for x in e["test_balanced_accuracy"] if x is not None]
            s += "; test balanced acc " + " ".join(f"{100 * x:.2f}" for x in v)
        if e.get("highres_test_balanced_accuracy"):
            s += "; after high-res fine-tuning " + " ".join(f"{100 * x:.2f}" for x in e["highres_test_balanced_accuracy"])
        lines.append(s)
    if "mean_balanced_accuracy" in r:
        lines.append(f"  mean test balanced accuracy over {r['runs']} runs: {100 * r['mean_balanced_accuracy']:.2f}%")
    return "\n".join(lines)


def _table(args):
    from .common import _open_store
    from ..report.smalldata import accuracy_table, cost_table

    with _open_store(args.store) as store:
        table = (cost_table if args.cost else accuracy_table)(store, dataset=args.dataset)
    if args.json:
        return {"columns": [c.key for c in table.columns], "rows": table.rows,
                "styles": [{"row": i, "column": k, "style": v} for (i, k), v in sorted(table.styles.items())]}
    print(table.render(args.format))
    return None


def _list(args):
    from ..data.smalldata import presets
    from ..learners.smalldata import methods
    from ..tuning import space_to_json

    from ..data.smalldata import get_preset

    return {"recipe": args.recipe,
            "datasets": {n: get_preset(n, recipe=args.recipe).to_dict() for n in presets.names()},
            "methods": {n: {"title": methods.get(n).title, "family": methods.get(n).family,
                            "space": space_to_json(methods.get(n).space), "fixed": methods.get(n).fixed,
                            "tuned": methods.get(n).tuned} for n in methods.names()}}


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
        extra = json.dumps(m["space"]) if m["space"] else ""
        lines.append(f"  {n:10s} {m['title']} {extra}".rstrip())
    return "\n".join(lines)
