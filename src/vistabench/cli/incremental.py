"""`vistabench incremental ...`: split (alias sessions), score, run, table, reference (few-shot class-incremental, gAcc)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import add_json_arg, add_record_args, add_store_arg, read_json_file, store_records
from ..errors import InputError

_FMT = argparse.RawDescriptionHelpFormatter


def register(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    inc = sub.add_parser(
        "incremental", help="few-shot class-incremental learning: aAcc, gAcc, PD, KR (FSCIL)",
        formatter_class=_FMT,
        description="Few-shot class-incremental protocol (docs/incremental.md).\n\n"
                    "  split      build the session split (preset, B/W/K, or the literature's session_<i>.txt);\n"
                    "             alias: sessions\n"
                    "  score      aAcc, lAcc, tAcc, gAcc (+ curve), PD, KR from an accuracy matrix or from\n"
                    "             one predictions file per session, and store the record (--no-store to skip)\n"
                    "  run        sessions -> learner (prototype | finetune | fr) -> predictions -> scores -> store\n"
                    "  reference  the paper's corner cases (Lazy, Greedy, Greedy-NF) for a session layout\n\n"
                    "Accuracies are fractions in [0, 1]. gAcc is the area under gAcc(alpha), alpha in [0, 1],\n"
                    "computed in closed form; --compat reproduces the authors' public formula instead.")
    s = inc.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = s.add_parser("split", aliases=["sessions"], help="build a sessions file (alias: sessions)",
                     formatter_class=_FMT, description=
                     "Writes a sessions file (JSON with sha256): the classes of each session (base = 0..B-1,\n"
                     "then W per session, in label order), the training indices of each session (all base\n"
                     "samples, K seeded shots per novel class) and the test pool. Presets: cifar100 and\n"
                     "mini_imagenet (60 base, 8 x 5-way 5-shot), cub200 (100 base, 10 x 10-way 5-shot).\n"
                     "--index-lists DIR reads the literature's session_<i>.txt files instead (integer lines:\n"
                     "training positions; path lines: matched to a folder dataset's training images).")
    p.add_argument("--data", required=True, help="mnist5k | digits | cifar100:DIR | folder:DIR | npz:FILE")
    _layout_args(p)
    p.add_argument("--base-shot", type=int, help="training samples per base class (default: all)")
    p.add_argument("--index-lists", metavar="DIR", help="folder with session_1.txt .. session_n.txt")
    p.add_argument("--seed", type=int, default=0, help="seed of the shot selection (default 0)")
    p.add_argument("--out", required=True, help="sessions file to write")
    add_json_arg(p)
    p.set_defaults(handler=_sessions, human=lambda r: (
        f"wrote {r['out']}: {r['num_sessions']} sessions, classes per session {r['session_sizes']}, "
        f"train samples per session {r['train_sizes']} (sha256 {r['sha256'][:12]})"))

    p = s.add_parser("score", help="score an accuracy matrix or per-session predictions", formatter_class=_FMT,
                     description=
                     "From a matrix:      --matrix ACC.json --base-classes B --way W\n"
                     "  ACC.json = {\"matrix\": [[A_1^1], [A_2^1, A_2^2], ...]} (fractions; row i = accuracy\n"
                     "  after session i on the test samples of sessions 1..i).\n"
                     "From predictions:   --predictions S1.npz S2.npz ... --sessions SESSIONS.json\n"
                     "  file i covers the test pool after session i (classes of sessions 1..i, in the sessions\n"
                     "  file's order); logits/probs are arg-maxed over the classes seen so far.\n"
                     "Prints aacc, lacc, tacc, gacc, pd, kr, per-session {aacc, tacc, gacc, base_acc,\n"
                     "novel_acc} and the gAcc(alpha) curve.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--matrix", metavar="ACC.json", help="JSON object with a lower-triangular 'matrix'")
    src.add_argument("--predictions", nargs="+", metavar="NPZ", help="one predictions file per session, in order")
    p.add_argument("--sessions", metavar="FILE", help="sessions file (with --predictions)")
    p.add_argument("--base-classes", type=int, help="|Y_1| (with --matrix)")
    p.add_argument("--way", type=int, help="classes per novel session (with --matrix)")
    p.add_argument("--compat", action="store_true", help="the authors' public gAcc formula (integer beta grid, trapezoid)")
    p.add_argument("--alphas", type=int, default=101, help="points of the reported curve (default 101)")
    p.add_argument("--plot", metavar="PNG", help="also draw gAcc(alpha) with the corner cases to this file")
    add_record_args(p, what="first predictions (or matrix)")
    add_store_arg(p)
    add_json_arg(p)
    p.set_defaults(handler=_score, human=_human_scores)

    p = s.add_parser("run", help="run a reference learner through the sessions", formatter_class=_FMT,
                     description=
                     "prototype: train the backbone on the base session, freeze it, classify by cosine\n"
                     "  similarity to class-mean prototypes; each novel session adds its prototypes.\n"
                     "finetune:  train on the base session, then grow the linear head and fine-tune the whole\n"
                     "  network on each novel session's few shots (it forgets: the contrast to show).\n"
                     "fr:        the paper's feature rectification: a frozen ViT + prototypes, and per\n"
                     "  intermediate block an FR module X_FR = M_m(cat(M_F(X_final), M_I(X_inter))) trained\n"
                     "  with the IR (pairwise distances) and CR (prototype similarities) relation losses,\n"
                     "  a cosine constraint and novel-class CE; branches averaged at test time. Default\n"
                     "  backbone: vit_small with dim=64, depth=6, heads=4 (CPU-sized; the authors' shape is\n"
                     "  --model vit_small --model-opt dim=256 --model-opt depth=12 --model-opt heads=8).\n"
                     "Writes OUT/session_<i>.npz, scores them and adds a record to the store.\n\n"
                     "example: vistabench incremental run --data mnist5k --method fr --base-classes 5 --way 1 \\\n"
                     "           --shot 5 --epochs 1 --store /tmp/fs.sqlite")
    p.add_argument("--data", required=True, help="mnist5k | digits | cifar100:DIR | folder:DIR | npz:FILE")
    p.add_argument("--sessions", metavar="FILE", help="sessions file (else built from the layout options)")
    _layout_args(p)
    p.add_argument("--base-shot", type=int, help="training samples per base class (default: all)")
    p.add_argument("--method", required=True, help="prototype | finetune | fr")
    p.add_argument("--model", help="backbone (cnn28, resnet32, resnet18, vit_small, ...; default: cnn28, "
                                   "for fr a small vit_small)")
    p.add_argument("--model-opt", action="append", default=[], metavar="KEY=VALUE",
                   help="backbone option, repeatable (vit_small: dim, depth, heads, patch_size; cnn28: width)")
    p.add_argument("--fr-recipe", choices=("cpu", "paper"), default="cpu",
                   help="fr: 'paper' = the authors' FR budget (100 epochs, PK batches of 1024, hidden 512); "
                        "'cpu' (default) = 20 epochs, batches of 256, hidden 128, same losses and weights")
    p.add_argument("--fr-epochs", type=int, help="fr: FR-module epochs per session (overrides the recipe)")
    p.add_argument("--fr-layers", type=int, nargs="+", metavar="BLOCK",
                   help="fr: 0-based ViT blocks feeding FR branches (default: the three before the last)")
    p.add_argument("--fr-weights", metavar="K=V,...",
                   help="fr: loss weights, e.g. cos=0.1,cr=0.1,ir_intra=1,ir_inter=1,ce_novel=0.5 (the default)")
    p.add_argument("--fr-ensemble", choices=("logits", "softmax"), default="logits",
                   help="fr: average the branches' cosine logits (authors' code, default) or softmaxes (paper)")
    p.add_argument("--epochs", type=int, default=5, help="base-session epochs (default 5)")
    p.add_argument("--novel-epochs", type=int, default=10, help="finetune: epochs per novel session (default 10)")
    p.add_argument("--lr", type=float, default=0.05, help="base-session learning rate (default 0.05)")
    p.add_argument("--novel-lr", type=float, default=0.01, help="finetune: novel-session learning rate (default 0.01)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compat", action="store_true", help="score gAcc with the authors' public formula")
    p.add_argument("--out", default="incremental-run", help="folder for the per-session predictions files")
    p.add_argument("--tag", help="tag for the stored record")
    add_store_arg(p)
    add_json_arg(p)
    p.set_defaults(handler=_run, human=_human_scores)

    p = s.add_parser("reference", help="scores of the corner cases Lazy, Greedy, Greedy-NF", description=
                     "Lazy keeps A_i^1 = base accuracy and learns nothing new; Greedy learns only the current "
                     "session (A_i^i = 1); Greedy-NF also keeps every novel session (A_i^j = 1, j > 1).")
    p.add_argument("--preset", help="cifar100 | mini_imagenet | cub200")
    p.add_argument("--base-classes", type=int)
    p.add_argument("--way", type=int)
    p.add_argument("--num-sessions", type=int, help="sessions including the base session")
    p.add_argument("--base-accuracy", type=float, default=0.85, help="A_1^1 (default 0.85, as in the paper)")
    p.add_argument("--compat", action="store_true")
    add_json_arg(p)
    p.set_defaults(handler=_reference, human=lambda r: "\n".join(
        f"{k:10s} aAcc {100 * v['aacc']:6.2f}  gAcc {100 * v['gacc']:6.2f}  PD {100 * v['pd']:6.2f}  KR {v['kr']:.3f}"
        for k, v in r.items()))
    return s


def _layout_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", help="cifar100 | mini_imagenet | cub200")
    p.add_argument("--base-classes", type=int, help="|Y_1| (base classes 0..B-1)")
    p.add_argument("--way", type=int, help="classes per novel session")
    p.add_argument("--shot", type=int, help="training samples per novel class")
    p.add_argument("--num-sessions", type=int, help="sessions including the base session (default: all that fit)")


def _layout(args: Any) -> dict[str, Any]:
    from ..protocols.incremental import preset_settings

    if args.preset:
        st = preset_settings(args.preset)
        for k in ("base_classes", "way", "shot", "num_sessions"):
            v = getattr(args, k, None)
            if v is not None and v != st[k]:
                raise InputError(f"--{k.replace('_', '-')} {v} contradicts --preset {args.preset} ({st[k]})")
        return st
    missing = [f"--{k.replace('_', '-')}" for k in ("base_classes", "way", "shot") if getattr(args, k, None) is None]
    if missing:
        raise InputError(f"give --preset or all of --base-classes, --way, --shot (missing {', '.join(missing)})")
    return {"base_classes": args.base_classes, "way": args.way, "shot": args.shot, "num_sessions": args.num_sessions}


def _build(args: Any, data: Any) -> dict[str, Any]:
    from ..protocols.incremental import build_sessions, image_folder_paths, sessions_from_index_lists

    if data.test is None:
        raise InputError(f"--data {args.data!r}: the dataset has no test part; the test pool comes from it")
    name = args.data
    if getattr(args, "index_lists", None):
        paths = None
        kind, _, arg = args.data.partition(":")
        if kind == "folder":
            root = Path(arg)
            paths = image_folder_paths(root / "train" if (root / "train").is_dir() else root)
        return sessions_from_index_lists(args.index_lists, train_labels=data.train.labels,
                                         test_labels=data.test.labels, train_paths=paths,
                                         class_names=data.train.class_names, dataset=name)
    st = _layout(args)
    if "num_classes" in st and data.train.num_classes != st["num_classes"]:
        raise InputError(f"--preset {args.preset} expects {st['num_classes']} classes, --data has {data.train.num_classes}")
    return build_sessions(data.train.labels, data.test.labels, base_classes=st["base_classes"], way=st["way"],
                          shot=st["shot"], num_sessions=st["num_sessions"], seed=args.seed,
                          base_shot=args.base_shot, dataset=name, preset=args.preset)


def _sessions(args: Any) -> dict[str, Any]:
    from ..data import load_dataset
    from ..protocols.incremental import write_sessions

    content = write_sessions(args.out, _build(args, load_dataset(args.data)))
    return {"out": args.out, "sha256": content["sha256"], "num_sessions": content["num_sessions"],
            "session_sizes": [len(c) for c in content["classes"]],
            "train_sizes": [len(t) for t in content["train_indices"]],
            "test_pool": len(content["test_indices"])}


def _score(args: Any) -> dict[str, Any]:
    from ..metrics.incremental import incremental_scores, session_sizes_uniform
    from ..metrics.incremental import IncrementalScores
    from ..protocols.incremental import load_sessions, score, to_record

    mode = "compat" if args.compat else "exact"
    sessions = None
    if args.matrix:
        if args.sessions:
            raise InputError("--sessions goes with --predictions; with --matrix give --base-classes and --way")
        if args.base_classes is None or args.way is None:
            raise InputError("--matrix needs --base-classes and --way")
        content = read_json_file(args.matrix, "--matrix")
        if not isinstance(content, dict) or "matrix" not in content:
            raise InputError(f"--matrix {args.matrix!r}: expected a JSON object with a 'matrix' key, "
                             f"got {type(content).__name__}{' with keys ' + str(sorted(content)) if isinstance(content, dict) else ''}")
        m = content["matrix"]
        n = len(m) if isinstance(m, list) else 0
        if n == 0:
            raise InputError(f"--matrix {args.matrix!r}: 'matrix' must be a non-empty list of rows")
        sizes = session_sizes_uniform(base_classes=args.base_classes, way=args.way, num_sessions=n)
        try:
            scores = incremental_scores(m, session_sizes=sizes, mode=mode, num_alphas=args.alphas, way=args.way)
        except InputError as exc:
            raise InputError(f"--matrix {args.matrix!r}: {exc}") from exc
    else:
        if not args.sessions:
            raise InputError("--predictions needs --sessions FILE (the session classes and test pool)")
        if args.base_classes is not None or args.way is not None:
            raise InputError("--base-classes/--way go with --matrix; with --predictions the sessions file gives them")
        sessions = load_sessions(args.sessions)
        scores = IncrementalScores(**score(args.predictions, sessions, mode=mode, num_alphas=args.alphas))
    out = scores.to_dict()
    if args.plot:
        _plot(scores, args.plot)
        out["plot"] = args.plot
    if sessions is None:
        import numpy as np

        ends = np.cumsum(scores.settings["session_sizes"]).tolist()
        sessions = {"classes": [list(range(a, b)) for a, b in zip([0] + ends[:-1], ends)],
                    "base_classes": args.base_classes, "way": args.way}
    first = args.matrix or args.predictions[0]
    rec = to_record(scores.to_dict(), dataset=args.dataset or "custom", method=args.method or Path(first).stem,
                    seed=args.seed, sessions=sessions, settings={"source": "score"}, tag=args.tag)
    ids = store_records(args.store, rec)
    out["record_id"] = ids[0] if ids else None
    return out


def _plot(scores: Any, path: str) -> None:
    from ..report.incremental import auc_label, gacc_figure, reference_rows

    sizes = scores.settings["session_sizes"]
    refs = reference_rows(sizes, base_accuracy=scores.matrix[0][0], mode=scores.settings["mode"],
                          way=scores.settings.get("way"))
    fig = gacc_figure({auc_label("scored", scores.gacc): scores.curve},
                      {auc_label(k, v.gacc): v.curve for k, v in refs.items()})
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)


def _run(args: Any) -> dict[str, Any]:
    from contextlib import nullcontext

    from ..data import load_dataset
    from ..protocols.incremental import load_sessions, run, write_sessions
    from ..store import ResultsStore

    from .._validation import check_int, check_positive

    for opt, v in (("--epochs", args.epochs), ("--novel-epochs", args.novel_epochs), ("--batch-size", args.batch_size)):
        check_int(v, opt, min=1)
    for opt, v in (("--lr", args.lr), ("--novel-lr", args.novel_lr)):
        check_positive(v, opt)
    data = load_dataset(args.data)
    if data.test is None:
        raise InputError(f"--data {args.data!r}: the dataset has no test part")
    if args.sessions:
        if any(v is not None for v in (args.preset, args.base_classes, args.way, args.shot)):
            raise InputError("--sessions already fixes the layout; drop --preset/--base-classes/--way/--shot")
        sessions = load_sessions(args.sessions)
    else:
        sessions = write_sessions(Path(args.out) / "sessions.json", _build(args, data))
    with (ResultsStore(args.store) if args.store else nullcontext()) as store:
        scores, paths = run(data, sessions, method=args.method, model=args.model,
                            model_options=_key_values(args.model_opt, "--model-opt"),
                            method_options=_method_options(args), epochs=args.epochs,
                            novel_epochs=args.novel_epochs, lr=args.lr, novel_lr=args.novel_lr,
                            batch_size=args.batch_size, seed=args.seed, device=args.device,
                            mode="compat" if args.compat else "exact", out_dir=args.out, store=store,
                            dataset=args.data, tag=args.tag)
    out = scores.to_dict()
    out["predictions"] = [str(p) for p in paths]
    out["store"] = args.store
    return out


def _number(text: str) -> int | float | str:
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def _key_values(items: list[str], flag: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise InputError(f"{flag}: expected KEY=VALUE, got {item!r}")
        out[key.strip()] = _number(value.strip())
    return out


def _method_options(args: Any) -> dict[str, Any]:
    fr_given = (args.fr_layers or args.fr_weights or args.fr_epochs is not None or args.fr_ensemble != "logits"
                or args.fr_recipe != "cpu")
    if args.method != "fr":
        if fr_given:
            raise InputError(f"--fr-* options go with --method fr, got --method {args.method}")
        return {}
    from ..learners.fscil_fr import FRConfig

    weights = _key_values([w for w in (args.fr_weights or "").split(",") if w.strip()], "--fr-weights")
    known = ("cos", "cr", "ir_intra", "ir_inter", "ce_novel")
    bad = sorted(set(weights) - set(known))
    if bad:
        raise InputError(f"--fr-weights: unknown loss {bad[0]!r} (known: {', '.join(known)})")
    try:
        extra = {} if args.fr_epochs is None else {"epochs": args.fr_epochs}
        return {"fr": FRConfig.recipe(args.fr_recipe, layers=tuple(args.fr_layers) if args.fr_layers else None,
                                      ensemble=args.fr_ensemble, **extra, **weights)}
    except InputError as exc:
        raise InputError(f"--fr-{str(exc).replace('_', '-')}") from exc


def _reference(args: Any) -> dict[str, Any]:
    from ..protocols.incremental import preset_settings, reference_scores

    if args.preset:
        st = preset_settings(args.preset)
        b, w, n = st["base_classes"], st["way"], st["num_sessions"]
    else:
        if args.base_classes is None or args.way is None or args.num_sessions is None:
            raise InputError("give --preset or all of --base-classes, --way, --num-sessions")
        b, w, n = args.base_classes, args.way, args.num_sessions
        from .._validation import check_int

        for opt, v in (("--base-classes", b), ("--way", w), ("--num-sessions", n)):
            check_int(v, opt, min=1)
    if not 0 <= args.base_accuracy <= 1:
        raise InputError(f"--base-accuracy: expected a fraction in [0, 1], got {args.base_accuracy}")
    res = reference_scores(base_classes=b, way=w, num_sessions=n, base_accuracy=args.base_accuracy,
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
