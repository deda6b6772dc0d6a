"""Cross-protocol commands: demo, table, report; and the `table` verb every protocol has."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from . import add_json_arg, add_store_arg


class TableResult:
    """A results table as a handler's result: ``{"columns", "rows"}`` (and ``styles`` when asked)
    with ``--json``, else the table rendered in ``format`` (:func:`render_table`)."""

    def __init__(self, table: Any, format: str = "markdown", *, with_styles: bool = False) -> None:
        self.table, self.format, self.with_styles = table, format, with_styles

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"columns": [c.key for c in self.table.columns], "rows": self.table.rows}
        if self.with_styles:
            out["styles"] = [{"row": i, "column": k, "style": v} for (i, k), v in sorted(self.table.styles.items())]
        return out


def render_table(result: TableResult) -> str:
    return result.table.render(result.format)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run every protocol on bundled data and write the HTML report",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Runs each protocol end to end on bundled data (MNIST-5k, sklearn "
                                   "digits, synthetic detections), stores the records in OUT/results.sqlite\n"
                                   "(a new store each time), prints the tables and writes OUT/report/index.html.\n\n"
                                   "A partial or smoke run never replaces the full demo's results: without --out,\n"
                                   "--only and --quick write to their own folder (--only longtail --quick:\n"
                                   "./vistabench-demo-longtail-quick), and a --quick run's tables and report say\n"
                                   "it is a smoke run.")
    p.add_argument("--out", help="output folder (default: ./vistabench-demo; with --only/--quick "
                                 "./vistabench-demo-PROTOCOL...-quick)")
    p.add_argument("--only", nargs="+", metavar="PROTOCOL", help="run only these protocols")
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: smaller settings, minutes less, results not the protocols' (marked as such)")
    add_json_arg(p)
    p.set_defaults(handler=_demo, human=_demo_text)

    p = sub.add_parser("table", help="print a protocol's results table from the store",
                       description="Renders the results store as the protocol's paper-style table: "
                                   "best bold, second underlined, third italic.")
    p.add_argument("--protocol", required=True, help="a protocol name (`vistabench --help` lists them)")
    p.add_argument("--format", default="markdown", choices=["markdown", "latex", "csv"])
    p.add_argument("--dataset", help="only records of this dataset")
    add_store_arg(p, optional=False)
    add_json_arg(p)
    p.set_defaults(handler=_table, human=render_table)

    p = sub.add_parser("report", help="write the static HTML report of the store",
                       description="Writes DIR/index.html: one self-contained page with tables and "
                                   "embedded plots for every protocol that has records in the store.")
    p.add_argument("--out", required=True, metavar="DIR")
    add_store_arg(p, optional=False)
    add_json_arg(p)
    p.set_defaults(handler=_report, human=lambda r: f"wrote {r['report']}")


def _demo(args):
    from ..demos import run_demo
    from ..extras import require
    from ..suite import get_protocol, protocols

    chosen = [get_protocol(n) for n in args.only] if args.only else protocols()
    require(*dict.fromkeys(e for p in chosen for e in p.needs("demo")), what="`vistabench demo`")
    return run_demo(args.out or demo_folder(args.only and [p.name for p in chosen], quick=args.quick),
                    only=args.only, quick=args.quick,
                    log=lambda *a, **k: print(*a, file=sys.stderr, **k))


def demo_folder(only: list[str] | None, *, quick: bool) -> str:
    """The default output folder of a demo: the full demo's, or its own for a partial or smoke run."""
    return "-".join(["vistabench-demo", *(only or []), *(["quick"] if quick else [])])


def _demo_text(summary: dict) -> str:
    parts = [f"=== {name} ===\n{part['text']}\n({name}: {part['seconds']:.1f} s)"
             for name, part in summary["parts"].items()]
    return "\n\n".join(parts + [f"Report: {summary['report']}"])


def open_store(path: str):
    """Open a results store read-only (tables and reports never create or modify it)."""
    from ..store import ResultsStore

    return ResultsStore(path, read_only=True)


def _table(args):
    from ..suite import get_protocol

    proto = get_protocol(args.protocol)
    with open_store(args.store) as store:
        return TableResult(proto.part("table")(store, dataset=args.dataset), args.format)


def register_generated(sub: argparse._SubParsersAction, proto: Any) -> argparse._SubParsersAction:
    """``vistabench <protocol> run`` for a protocol that declares no ``cli`` part: the verb generated
    from its config (every field a flag, ``--config``, ``--print-config``); the run part is imported
    only when the command runs."""
    from .configured import add_config_options, run_verb

    p = sub.add_parser(proto.name, help=proto.title, description=f"{proto.title}: {proto.question}")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    q = verbs.add_parser("run", help="run the protocol from its config and store the records",
                         description=f"Runs {proto.name} from its typed config; --print-config [--json] shows "
                                     "every value the run will use.")
    add_config_options(q, proto.part("config"))
    q.add_argument("--out", help="folder for the run's files")
    add_store_arg(q)
    add_json_arg(q)
    handler, human = run_verb(proto.part("config"), lambda config, **kw: proto.part("run")(config, **kw))
    q.set_defaults(handler=handler, human=human)
    return verbs


def add_table_verb(verbs: argparse._SubParsersAction, protocol: str) -> None:
    """``vistabench <protocol> table``: the protocol's paper-style table of the store."""
    p = verbs.add_parser("table", help="print the protocol's results table from the store",
                         description=f"Renders the store's {protocol} records as the protocol's paper-style "
                                     "table: best bold, second underlined, third italic.")
    p.add_argument("--format", default="markdown", choices=["markdown", "latex", "csv"])
    p.add_argument("--dataset", help="only records of this dataset")
    add_store_arg(p, optional=False)
    add_json_arg(p)
    p.set_defaults(handler=_table, human=render_table, protocol=protocol)


def _report(args):
    from ..report import build_report

    with open_store(args.store) as store:
        return {"report": str(build_report(store, args.out))}
