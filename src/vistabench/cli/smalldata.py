"""`vistabench smalldata ...`: split (alias splits), tune, final, run, score, table, list; each verb
generated from its options class below (tune, final and run from the run's config)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from . import store_records
from ..config import Options, option
from .common import TableFormat, TableResult, render_table
from .verbs import RunOptions, Verbs, add_run_verb, add_verb, store_field, verb_group
from .verbs import TrackOptions

Recipe = Literal["gem", "vistabench"]
_DATASET_HELP = "cifair10 | cub200 | isic2018 | eurosat | clamm | mnist5k | digits | folder"
_ROOT_HELP = "the dataset's folder (not for mnist5k/digits)"


@dataclass(frozen=True, kw_only=True)
class SplitOptions(Options):
    """`smalldata split`: :func:`~vistabench.protocols.smalldata.runner.write_dataset_splits`'s arguments (checked
    there as a run's config fields are)."""

    dataset: str = option(metavar="NAME", help=_DATASET_HELP)
    root: str | None = option(None, metavar="DIR", help=_ROOT_HELP)
    recipe: Recipe = option(
        "gem", help="protocol rules: gem = the benchmark's code (fixed train/val sizes per class, the dataset's "
                    "own augmentation, ASHA eta 2, random search, mean val accuracy of the last 5 epochs, best "
                    "among all trials); vistabench = our earlier rules (60/40 train/val, pad-crop + flip, eta 3, "
                    "TPE, last-epoch balanced accuracy, completed trials only)")
    per_class: int | None = option(None, metavar="N", help="trainval images per class (default: the preset's; "
                                   "alone it keeps the preset's train share, e.g. 20 -> 12 train + 8 val)")
    train_per_class: int | None = option(
        None, metavar="N", help="train images per class, the rest of trainval is val (gem: 30; CUB 20, ISIC 50)")
    val_fraction: float | None = option(
        None, metavar="F",
        help="instead of --train-per-class: share of each class's trainval images in val (vistabench: 0.4)")
    seed: int = option(0, help="split seed and search seed")
    image_size: int | None = option(
        None, metavar="PX", help="side length variable-size images are resized to (default: the preset's)")
    out: str = option(metavar="DIR", help="folder to write the split files to")


@dataclass(frozen=True, kw_only=True)
class SmalldataRunOptions(RunOptions):
    """What `smalldata tune | final | run` take besides the config: the work folder and the store."""

    out: str | None = option("smalldata-runs", flags=("--work-dir", "--out"), metavar="DIR",
                             help="where split files and the Optuna study files live")


@dataclass(frozen=True, kw_only=True)
class ScoreOptions(TrackOptions):
    """`smalldata score`: the predictions, the split files they were made on and the record's names."""

    predictions: str = option(metavar="NPZ", help="labels + logits|probs|pred over the split's test set")
    dataset: str = option(metavar="NAME", help="the preset the splits were written for")
    root: str | None = option(None, metavar="DIR", help=_ROOT_HELP)
    image_size: int | None = option(None, metavar="PX", help="side length variable-size images are resized to "
                                                            "(default: the preset's)")
    splits: str = option(metavar="DIR", help="folder of split files (`smalldata split`)")
    split: int = option(metavar="I", help="which split's test set")
    method: str | None = option(
        None, help="method name of the record (default: the predictions file's name without suffix)")
    seed: int | None = option(None, help="seed of the run that made the predictions (stored as is)")
    tag: str | None = option(None, help="free-form tag of the record (it is stored as a final run either way)")
    store: str | None = store_field(optional=True)


@dataclass(frozen=True, kw_only=True)
class TableOptions(Options):
    """`smalldata table`: Table 3 or Table 4 of the store."""

    format: TableFormat = option("markdown", help="table format")
    dataset: str | None = option(None, help="only this dataset")
    cost: bool = option(False, help="Table 4: training images/s and peak memory")
    store: str = store_field(optional=False)


@dataclass(frozen=True, kw_only=True)
class ListOptions(Options):
    """`smalldata list`: the presets of a recipe and the methods."""

    recipe: Recipe = option("gem", help="show this recipe's presets")


def _run_config(config, *, store, work_dir):
    from ..protocols.smalldata.runner import run

    return run(config, store=store, work_dir=work_dir)


def _check_given(given: dict[str, Any]) -> None:
    """``--dataset NAME:DIR`` whose DIR is not a folder, named as the user gave it (before a store opens)."""
    from ..protocols.smalldata.runner import check_dataset_folder

    check_dataset_folder(given.get("dataset"))


def register(sub: Verbs) -> Verbs:
    from ..protocols.smalldata.config import SmalldataConfig

    s = verb_group(
        sub, "smalldata", help="small-data benchmark with fair tuning (Brigato et al.)",
        description="Small-data protocol (docs/smalldata.md).\n\n"
                    "  split   write trainval{i}/train{i}/val{i} (+test{i}) split files, i = 0..2 (alias: splits)\n"
                    "  tune    ASHA search per split on train/val (same budget for every method)\n"
                    "  final   train each split's best configuration --repeats times on trainval; score the test set\n"
                    "  run     tune + final\n"
                    "  score   score your model's predictions on a split's test set and store the record\n"
                    "  table   Table 3 (balanced accuracy, Welch italics) or Table 4 (--cost) from the store\n"
                    "  list    dataset presets and methods\n\n"
                    "Metric: balanced accuracy over the dataset's declared classes.")

    add_verb(s, "split", SplitOptions, run=_splits, human=_splits_text, aliases=["splits"],
             help="write the split files (alias: splits)", description=
             "Writes trainval0..2.json, train0..2.json, val0..2.json (and test0..2.json for datasets without an "
             "official test set) to --out. Each holds the sorted `indices` (positions in the dataset's training "
             "pool), per-class counts and a sha256. Per class, train/val sizes follow the recipe: gem's fixed "
             "counts (30/20; CUB 20/rest; ISIC 50/30) or vistabench's 60%/40%. The same seed writes "
             "byte-identical files.")

    for verb, stages, helptext in (
            ("tune", "tune", "search hyper-parameters on every split"),
            ("final", "final", "final runs with each split's best configuration (tune first)"),
            ("run", "tune+final", "tune + final runs")):
        add_run_verb(s, verb, SmalldataConfig, run=_run_config, options=SmalldataRunOptions, human=_run_text,
                     pinned=None if stages == "tune+final" else {"stages": stages}, check=_check_given,
                     help=helptext, description=helptext + ". Records go to the results store. Every flag is a "
                     "field of the run's config (--print-config shows them all, resolved).")

    add_verb(s, "score", ScoreOptions, run=_score,
             human=lambda r: f"balanced accuracy {100 * r['balanced_accuracy']:.2f} (accuracy "
                             f"{100 * r['accuracy']:.2f}) on {r['settings']['test']}"
                             + (f"; stored record {r['record_id']}" if r.get("record_id") is not None else ""),
             help="score a predictions file on a split's test set", description=
             "Scores a predictions .npz (labels + logits|probs|pred over split I's test set: the official test "
             "set, or test{I}.json where the dataset has none) with balanced accuracy over the dataset's declared "
             "classes, and stores a record shaped like a final run's.")

    add_verb(s, "table", TableOptions, run=_table, human=render_table, help="print Table 3 or Table 4 from the store")
    add_verb(s, "list", ListOptions, run=_list, human=_list_text, help="dataset presets and methods")
    return s


# ---------------------------------------------------------------------------------- handlers
def _splits(opts: SplitOptions) -> dict[str, Any]:
    from ..protocols.smalldata.runner import write_dataset_splits

    return write_dataset_splits(opts.dataset, opts.out, root=opts.root, recipe=opts.recipe, per_class=opts.per_class,
                                train_per_class=opts.train_per_class, val_fraction=opts.val_fraction, seed=opts.seed,
                                image_size=opts.image_size)


def _splits_text(r: dict) -> str:
    return f"wrote {len(r['files'])} split files to {r['out']}: " + ", ".join(
        f"{k} ({v})" for k, v in r["counts"].items())


def _score(opts: ScoreOptions) -> dict[str, Any]:
    from ..protocols.smalldata.runner import prepare, score, to_record

    from ..data.predictions import load_predictions, predictions_sha256

    ctx = prepare(opts.dataset, root=opts.root, split_dir=opts.splits, image_size=opts.image_size, splits=[opts.split])
    pred = load_predictions(opts.predictions)
    result = score(pred, ctx, split=opts.split)
    rec = to_record(result, dataset=opts.dataset, method=opts.method or Path(opts.predictions).stem, seed=opts.seed,
                    split_hash=result["settings"]["split_hash"],
                    settings={"predictions": str(opts.predictions), "predictions_sha256": predictions_sha256(pred)},
                    tag=opts.tag)
    ids = store_records(opts.store, rec)
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


def _table(opts: TableOptions) -> TableResult:
    from .common import open_store
    from ..report.smalldata import accuracy_table, cost_table

    with open_store(opts.store) as store:
        return TableResult((cost_table if opts.cost else accuracy_table)(store, dataset=opts.dataset), opts.format,
                           with_styles=True)


def _list(opts: ListOptions) -> dict[str, Any]:
    from ..protocols.smalldata.runner import catalog

    return catalog(opts.recipe)


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
