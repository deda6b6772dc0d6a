"""`vistabench <protocol> <verb>`: a thin layer that parses, calls the Python API and prints.

Every verb is generated from a typed options class (:mod:`vistabench.cli.verbs`). Each declared protocol
(:mod:`vistabench.suite`) names its CLI module, whose ``register(sub)`` adds the verb group
``vistabench <protocol>`` with ``split|score|run`` and its own verbs and returns the group; every
protocol then gets the common ``table`` verb. Commands across protocols (demo, table, report, stats,
grid, export) live in ``_COMMON``. One output convention: a verb's ``run(opts)`` returns a
JSON-serialisable result (a dict, a list, or an object with ``to_dict()``) and never prints it;
``main`` prints it as JSON with ``--json``, else with the verb's declared ``human`` formatter. A verb
may declare ``status(result) -> int`` (its exit status, e.g. 1 when some grid cell failed). Progress
and log lines go to stderr.
Bad input (``InputError``, a missing or unwritable file, malformed JSON, a file that is not a results
store) ends with one line on stderr and exit 2; an internal bug shows its traceback and exit 70.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

from .. import __version__
from .._lazy import LazyModules
from ..errors import INTERNAL_ERROR, OUTPUT_CLOSED, USER_ERROR, user_error_message
from .verbs import Parser, Verb, flag_message, new_command_line

#: the modules of the commands across protocols, each with ``register(sub)``
_COMMON = LazyModules({"stats": ".stats", "common": ".common", "grid": ".grid", "export": ".export"},
                      package=__package__)


def build_parser(command: str | None = None, *, words: Sequence[str] = ()) -> Parser:
    """The whole command line, or, when ``command`` names a protocol, a parser with only that
    protocol's sub-commands (what ``main`` parses with: building every protocol's parser, with its
    imports, on every command costs more than a fast evaluation). Anything else (``--help``, a
    common command, a typo) gets the whole command line, so help and "invalid choice" list it all.
    ``words``: the command line's leading words (``main`` gives them); a verb they do not lead to is
    added with its name and help line only (:class:`~.verbs.Verbs`)."""
    parser, sub = new_command_line(
        prog="vistabench",
        description=(
            "Honest evaluation protocols for vision models. Each protocol splits into: build a split "
            "(seeded, hashed file) -> produce predictions (any model) -> score them with pure metrics. "
            "Scored runs go to a SQLite results store; tables, plots and the HTML report are views of it."
        ),
        epilog="Start with `vistabench demo`. Every sub-command has --help.",
        version=f"vistabench {__version__}",
        words=words,
    )
    from ..suite import protocols
    from .common import add_table_verb, register_generated

    chosen = [p for p in protocols() if p.name == command]
    for proto in chosen or protocols():
        verbs = proto.part("cli").register(sub) if proto.has("cli") else register_generated(sub, proto)
        if "table" not in verbs.names() and proto.has("table"):
            add_table_verb(verbs, proto.name)
    if not chosen:
        for name in _COMMON:
            _COMMON[name].register(sub)
    return parser


def _words(argv: Sequence[str] | None) -> list[str]:
    """The leading arguments that can be command and verb names (up to the first option)."""
    args = sys.argv[1:] if argv is None else [str(a) for a in argv]
    words = []
    for a in args:
        if a.startswith("-"):
            break
        words.append(a)
    return words


def emit(result: Any, *, as_json: bool, human: Callable[[Any], str] | None = None) -> None:
    """Print a handler's result: JSON for scripts, else the human rendering."""
    from ..jsonutil import dumps

    if result is None:
        return
    if as_json or human is None:
        print(dumps(result.to_dict() if hasattr(result, "to_dict") else result, indent=2))
    else:
        print(human(result))


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"vistabench: warning: {message}", file=sys.stderr)


def _debug() -> bool:
    import os

    return os.environ.get("VISTABENCH_DEBUG", "") not in ("", "0")


def _passive_openmp() -> None:
    """Before torch is loaded, make idle OpenMP threads sleep instead of spinning
    (``OMP_WAIT_POLICY=PASSIVE``) unless the environment chooses a policy. torch's CPU kernels use
    OpenMP; with the default policy a thread that finishes its share spins for its partner, which on
    a busy machine is descheduled: small networks then burn 20-50x the processor time of the work
    (dhn on digits: 100 steps in 56-200 s instead of 2 s at load 8, 2 cores;
    benchmarks/smalldata_dhn_cache.py). The policy changes no number (same threads, same work split)."""
    import os

    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def console_main() -> int:
    """The ``vistabench`` program (its console script and ``python -m vistabench``): :func:`main` on
    ``sys.argv``, and then the process ends. Before it does, the objects alive are moved out of the
    cyclic garbage collector's reach (``gc.freeze``): the interpreter's last collections at exit
    would walk all of them (numpy's and ours, ~25,000) only to free memory that the ending process
    gives back anyway, 20-30 ms of a 0.7 s detection scoring. Nothing is skipped: ``atexit``
    handlers and the modules' teardown run as before. ``main`` itself (tests, notebooks, the grid)
    does not freeze: its caller lives on."""
    status = main()
    import gc

    gc.freeze()
    return status


def main(argv: Sequence[str] | None = None, *, parser: Parser | None = None) -> int:
    """Run one command; return the exit status.

    0 success; 2 (:data:`~vistabench.errors.USER_ERROR`) for every user-caused error, printed as one
    line without a traceback (argparse's own option errors use 2 too); 70 for an internal error (a
    bug), printed with its traceback and a request to report it; 130 when interrupted; 141
    (:data:`~vistabench.errors.OUTPUT_CLOSED`, the shell's status of a program stopped by a closed
    pipe) when the reader of the output left early (``vistabench ... | head``), quietly.
    ``VISTABENCH_DEBUG=1`` prints the traceback of user errors too. ``parser``: the command line to
    run (default: vistabench's, :func:`build_parser`).
    """
    _passive_openmp()
    try:
        try:
            return _run(argv, parser)
        finally:  # --help and usage errors exit through SystemExit: their output is flushed here too
            sys.stdout.flush()
    except BrokenPipeError:  # the reader left (`| head`): stop quietly, as `cat` or `grep` do
        import os

        # the interpreter flushes stdout once more at exit: let that go nowhere instead of a second error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return OUTPUT_CLOSED


def _run(argv: Sequence[str] | None, parser: Parser | None) -> int:
    import warnings

    if parser is None:
        words = _words(argv)
        parser = build_parser(words[0] if words else None, words=words)
    args = parser.parse_args(argv)
    warnings.showwarning = _show_warning  # library warnings as one plain line on stderr
    from ..progress import set_quiet

    set_quiet(bool(getattr(args, "json", False)))  # --json: no progress output (this command's only)
    verb: Verb = args.verb_spec
    try:
        result, human = verb.invoke(args)
        emit(result, as_json=getattr(args, "json", False), human=human)
        status = verb.status
        if status is not None and result is not None:
            return int(status(result))
    except KeyboardInterrupt:
        print("vistabench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # not a user error nor a bug: main() handles it
        raise
    except Exception as exc:
        from ..extras import missing_extra_message

        command = verb.command
        message = user_error_message(exc) or missing_extra_message(exc, what=f"`vistabench {command}`")
        if message is None:  # a bug: keep the traceback, ask for a report
            import traceback

            traceback.print_exc()
            print(f"vistabench: internal error ({type(exc).__name__}): this is a bug in vistabench "
                  f"{__version__}; please report it with the command line and the traceback above",
                  file=sys.stderr)
            return INTERNAL_ERROR
        if _debug():
            import traceback

            traceback.print_exc()
        print(f"vistabench: error: {flag_message(message, exc, verb, args)}", file=sys.stderr)
        return USER_ERROR
    return 0


def store_records(path: str | None, records: Any) -> list[int]:
    """Add one record or a list of records to the store at ``path`` (None: store nothing); then hand
    them to the trackers of a ``score --track`` (:func:`vistabench.tracking.session.scored`)."""
    from ..store import Record, ResultsStore

    recs = [records] if isinstance(records, Record) else list(records)
    ids: list[int] = []
    if path is not None:
        with ResultsStore(path) as store:
            ids = store.add_many(recs)
    # a tracker listens only inside track_scores, which lives in that module: not loaded, none listens
    session = sys.modules.get(f"{__package__.rpartition('.')[0]}.tracking.session")
    if session is not None:
        session.scored(recs)
    return ids


def read_json_file(path: str, what: str) -> Any:
    """Read a user's JSON file with a one-line error on a missing or malformed file."""
    from ..jsonutil import read_json

    return read_json(path, what=what)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
