"""The verb generator (cli/verbs.py): a verb declared by one options class, run through ``main``."""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from typing import Literal

import pytest

from vistabench.cli import main
from vistabench.cli.verbs import (RecordOptions, Verbs, add_verb, new_command_line, store_field, verb_group,
                                  walk)
from vistabench.config import option
from vistabench.errors import USER_ERROR, InputError


@dataclass(frozen=True, kw_only=True)
class _Opts(RecordOptions):
    record_what = "input"

    source: str = option(positional=True, metavar="SRC", help="what to read")
    rest: tuple[str, ...] = option((), positional=True, metavar="MORE", help="more of it")
    n_max: int = option(flags=("--n-max", "--nmax"), low=1, help="head count")
    rate: float = option(0.5, low=0, high=1, help="a fraction")
    kind: Literal["exp", "step"] = option("exp", help="profile")
    sizes: tuple[int, ...] = option((3,), help="sizes")
    exact: bool = option(False, help="noise-free")
    num_classes: int | None = option(None, flags=("--classes",), help="classes")
    store: str | None = store_field(optional=True)


def _parser(run=None, human=None, status=None):
    parser, sub = new_command_line(prog="vb", description="test", epilog="", version="vb 1")
    group = verb_group(sub, "t", help="a group", description="Some verbs.\n\n  go  goes")
    add_verb(group, "go", _Opts, run=run or (lambda opts: {**opts.to_dict(), "dataset_used": opts.record_dataset()}),
             human=human or (lambda r: f"n_max={r['n_max']}"), status=status, help="go", aliases=["went"])
    return parser


def _main(capsys, argv, **kw):
    try:
        rc = main(argv, parser=_parser(**kw))
    except SystemExit as exc:  # argparse's own usage errors and --help
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def test_a_verb_gets_one_argument_per_field_typed_and_checked_by_the_options(capsys):
    rc, out, err = _main(capsys, ["t", "go", "a.txt", "b", "c", "--n-max", "7", "--rate", "0.25", "--kind", "step",
                                  "--sizes", "1", "2", "--exact", "--classes", "4", "--seed", "3", "--json"])
    assert rc == 0, err
    r = json.loads(out)
    assert (r["source"], r["rest"], r["n_max"], r["rate"], r["kind"], r["sizes"], r["exact"], r["num_classes"],
            r["seed"]) == ("a.txt", ["b", "c"], 7, 0.25, "step", [1, 2], True, 4, 3)
    assert r["store"] == "vistabench.sqlite" and r["dataset_used"] == "custom"  # the declared defaults
    rc, out, err = _main(capsys, ["t", "went", "a", "--nmax", "2", "--no-exact", "--no-store", "--json"])
    r = json.loads(out)
    assert rc == 0 and (r["n_max"], r["exact"], r["store"], r["rest"], r["sizes"]) == (2, False, None, [], [3])


def test_human_output_and_exit_status(capsys):
    rc, out, err = _main(capsys, ["t", "go", "a", "--n-max", "5"], status=lambda r: 3 if r["n_max"] == 5 else 0)
    assert (rc, out, err) == (3, "n_max=5\n", "")


@pytest.mark.parametrize("argv,line", [
    (["--n-max", "0"], "--n-max: expected a number >= 1, got 0"),
    (["--n-max", "ten"], "--n-max: expected an integer, got 'ten'"),
    (["--n-max", "010"], "--n-max: '010' has a leading zero"),
    (["--n-max", "2", "--rate", "nan"], "--rate: expected a finite number, got 'nan'"),
    (["--n-max", "2", "--kind", "stpe"], "--kind: expected one of exp, step, got 'stpe'; did you mean 'step'?"),
    (["--n-max", "2", "--classes", "-1"], "--classes: expected a number >= 0, got -1"),
    (["--n-max", "2", "--sizes", "1", "x"], "--sizes: expected an integer, got 'x'"),
    ([], "--n-max: required (no default); give a value"),
])
def test_a_bad_value_is_one_line_naming_the_flag_exit_2(capsys, argv, line):
    rc, out, err = _main(capsys, ["t", "go", "a", *argv])
    assert rc == USER_ERROR and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"vistabench: error: {line}")


def test_unknown_option_gets_the_close_declared_flags(capsys):
    rc, out, err = _main(capsys, ["t", "go", "a", "--n-max", "2", "--exakt"])
    assert rc == USER_ERROR and err.splitlines() == [
        "vb t go: error: unrecognized option --exakt (did you mean --exact or --no-exact?)"]
    rc, out, err = _main(capsys, ["t", "go", "a", "--zzzz", "1"])
    assert rc == USER_ERROR and len(err.splitlines()) == 1 and "(options: " in err and "--n-max" in err
    rc, out, err = _main(capsys, ["t", "go"])  # a missing positional: argparse's own one line
    assert rc == USER_ERROR and err.splitlines() == ["vb t go: error: the following arguments are required: SRC"]


def test_the_field_of_an_error_is_shown_as_its_flag(capsys):
    def raising(message, **kw):
        def run(opts):
            raise InputError(message, **kw)
        return run

    cases = [(("n_max: too big",), {}, "--n-max: too big"),
             (("num_classes 'x': odd",), {}, "--classes 'x': odd"),
             (("too big",), {"field": "rate"}, "--rate: too big"),  # the field given, not in the text
             (("source: missing",), {}, "SRC: missing"),  # a positional: its metavar
             (("lr: goes with `sizes` and `nope`",), {}, "lr: goes with --sizes and `nope`"),
             (("grace: n_max=5 is small",), {}, "grace: n_max=5 is small")]
    for args, kw, shown in cases:
        rc, out, err = _main(capsys, ["t", "go", "a", "--n-max", "2"], run=raising(*args, **kw))
        assert rc == USER_ERROR and err == f"vistabench: error: {shown}\n", (args, err)


def test_input_error_field():
    assert InputError("n_max: expected an integer").field == "n_max"
    assert InputError("method_options.lr: expected a number").field == "method_options.lr"
    assert InputError("data 'digitz': unknown").field == "data"
    assert InputError("n_max=5: too big").field == "n_max"
    assert InputError("expected something").field is None
    assert InputError("x", field="lr").field == "lr"
    assert pickle.loads(pickle.dumps(InputError("x", field="lr"))).field == "lr"  # a Ray worker's error keeps it


def test_help_shows_the_declared_options(capsys):
    rc, out, err = _main(capsys, ["t", "go", "--help"])
    assert rc == 0
    out = " ".join(out.split())
    for text in ("SRC", "--n-max N_MAX, --nmax N_MAX", "--kind {exp,step}", "(one of: exp, step)", "(default: exp)",
                 "--exact, --no-exact", "--no-store", "--method METHOD", "the input file's name", "--json"):
        assert text in out, text
    rc, out, err = _main(capsys, ["t", "--help"])
    assert "  go  goes" in out  # a description written with line breaks is shown as written


def test_walk_lists_every_verb_once_or_with_aliases():
    parser = _parser()
    assert [p for p, _ in walk(parser)] == [("t", "go")]
    assert [p for p, _ in walk(parser, aliases=True)] == [("t", "go"), ("t", "went")]
    (_, verb), = walk(parser)
    assert verb.flag_of("n_max") == "--n-max" and verb.flag_of("nope") is None and "--json" in verb.flags
    assert isinstance(parser.verbs, Verbs) and parser.verbs.names() == ["t"]


def test_every_shipped_verb_is_generated():
    from vistabench.cli import build_parser

    verbs = dict(walk(build_parser(), aliases=True))
    assert ("longtail", "profile") in verbs and ("grid", "run") in verbs and ("incremental", "sessions") in verbs
    assert verbs[("longtail", "sweep")].flag_of("pool_labels") == "--labels"
    assert verbs[("longtail", "run")].flag_of("epochs") == "--epochs"  # a run verb: its config's flags
    assert verbs[("longtail", "run")].flag_of("out") == "--out"  # and its own


def test_with_the_command_line_words_only_the_verb_they_name_is_built_whole(capsys):
    from vistabench.cli import build_parser

    parser = build_parser("detection", words=["detection", "calibrate", "fit"])
    built = dict(walk(parser, aliases=True))
    assert list(built) == [("detection", "calibrate", "fit")]  # apply, score, eval ...: name and help only
    whole = dict(walk(build_parser("detection"), aliases=True))
    assert built[("detection", "calibrate", "fit")].flags == whole[("detection", "calibrate", "fit")].flags
    assert {("detection", "score"), ("detection", "eval"), ("detection", "calibrate", "apply")} <= set(whole)
    # the others stay listed: help and "invalid choice" name every verb
    group = parser.verbs.children["detection"]
    assert "score" in group.names() and "rerank" in group.names()
    with pytest.raises(SystemExit) as exc:
        main(["detection", "scroe"])
    assert exc.value.code == USER_ERROR
    err = capsys.readouterr().err
    assert "invalid choice: 'scroe'" in err and "'rerank'" in err and "'operating'" in err
    # words that stop above the verbs (`detection --help`) build every verb of the group
    assert len(dict(walk(build_parser("detection", words=["detection"])))) == len(dict(walk(build_parser("detection"))))
    # an alias on the path counts as its verb
    assert list(dict(walk(build_parser("detection", words=["detection", "eval"]), aliases=True))) == [
        ("detection", "score"), ("detection", "eval")]


def test_a_choice_beside_an_open_type_does_not_read_as_the_only_value(capsys):
    """``int | Literal["smallest_class"]``: the metavar and the help say that a number is accepted too."""
    @dataclass(frozen=True, kw_only=True)
    class Open(RecordOptions):
        n_max: int | Literal["smallest_class"] | None = option(None, low=1, help="head count")
        mode: Literal["a", "b"] = option("a", help="closed")

    parser, sub = new_command_line(prog="vb", description="test", epilog="", version="vb 1")
    add_verb(verb_group(sub, "t", help="g", description="g"), "go", Open, run=lambda o: {}, human=str, help="go")
    with pytest.raises(SystemExit):
        main(["t", "go", "--help"], parser=parser)
    out = " ".join(capsys.readouterr().out.split())
    assert "--n-max {N,smallest_class}" in out and "(an integer, or one of: smallest_class)" in out
    assert "--mode {a,b}" in out and "closed (one of: a, b)" in out


@pytest.mark.parametrize("rank, writes", [("0", True), ("1", False)])
def test_under_torchrun_only_rank_zero_opens_the_store(tmp_path, monkeypatch, capsys, rank, writes):
    """The rank guard is the caller's: a config run opens the results store on torchrun's rank 0 only
    and runs with no store on the others (the store itself writes whatever the environment)."""
    import vistabench.tracking as tracking
    from vistabench.store import Record, ResultsStore

    seen = []

    def fake_run_tracked(run, config, *, store, work_dir, log):
        seen.append(store)
        rec = Record(protocol="longtail", dataset="digits", method="ce", seed=0, split_hash=None, settings={},
                     metrics={"acc": 0.5})
        if store is not None:
            store.add(rec)
        return [rec]

    monkeypatch.setattr(tracking, "run_tracked", fake_run_tracked)
    for k, v in dict(WORLD_SIZE="2", LOCAL_RANK=rank, RANK=rank).items():
        monkeypatch.setenv(k, v)
    path = tmp_path / "r.sqlite"
    assert main(["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10", "--epochs", "1",
                 "--store", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (seen[0] is not None) is writes and path.exists() is writes
    assert out["id"] == (1 if writes else None)
    if writes:
        with ResultsStore(path, read_only=True) as s:
            assert len(s.records()) == 1
