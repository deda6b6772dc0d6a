"""Cross-protocol commands: demo, table, report; and the `table` verb every protocol has."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Literal

from ..config import Options, option
from .verbs import Verbs, add_run_verb, add_verb, store_field, verb_group


class TableResult:
    """A results table as a handler's result: ``{"columns", "rows"}`` (and ``styles`` when asked)
    with ``--json``, else the table rendered in ``format`` (:func:`render_table`)."""

    def __init__(self, table: Any, format: str = "markdown", *, with_styles: bool = False) -> None:
        self.table, self.format, self.with_styles = table, format, with_styles

    def to_dict(self) -> dict[str, Any]:
        """``columns`` (keys), ``rows`` (each value, with ``<key>_sd`` / ``<key>_n`` / ``n`` where the table
        gives them: docs/store.md), ``caption`` (what N, the spread, the marks and the mode are)."""
        out: dict[str, Any] = {"columns": [c.key for c in self.table.columns], "rows": self.table.rows,
                               "caption": self.table.caption}
        if self.with_styles:
            out["styles"] = [{"row": i, "column": k, "style": v} for (i, k), v in sorted(self.table.styles.items())]
        return out


def render_table(result: TableResult) -> str:
    return result.table.render(result.format)


TableFormat = Literal["markdown", "latex", "csv"]


@dataclass(frozen=True, kw_only=True)
class DemoOptions(Options):
    out: str | None = option(None, help="output folder (default: ./vistabench-demo; with --only/--quick "
                                        "./vistabench-demo-PROTOCOL...-quick)")
    only: tuple[str, ...] | None = option(None, metavar="PROTOCOL", help="run only these protocols")
    quick: bool = option(False, help="a smoke run: smaller settings, minutes less, results not the protocols' "
                                     "(marked as such)")


@dataclass(frozen=True, kw_only=True)
class ProtocolTableOptions(Options):
    """``vistabench <protocol> table``."""

    format: TableFormat = option("markdown", help="table format")
    dataset: str | None = option(None, help="only records of this dataset")
    store: str = store_field(optional=False)


@dataclass(frozen=True, kw_only=True)
class TableOptions(ProtocolTableOptions):
    """``vistabench table --protocol NAME``."""

    protocol: str = option(help="a protocol name (`vistabench --help` lists them)")
    mode: str | None = option(None, help="the scoring mode whose results the table shows, for a protocol with "
                                         "several (longtail: resampled (default) or exact); modes are never mixed")


@dataclass(frozen=True, kw_only=True)
class ReportOptions(Options):
    out: str = option(metavar="DIR", help="folder of the report (DIR/index.html)")
    store: str = store_field(optional=False)


def register(sub: Verbs) -> None:
    add_verb(sub, "demo", DemoOptions, run=_demo, human=_demo_text,
             help="run every protocol on bundled data and write the HTML report",
             description="Runs each protocol end to end on bundled data (MNIST-5k, sklearn "
                         "digits, synthetic detections), stores the records in OUT/results.sqlite\n"
                         "(a new store each time), prints the tables and writes OUT/report/index.html.\n\n"
                         "A partial or smoke run never replaces the full demo's results: without --out,\n"
                         "--only and --quick write to their own folder (--only longtail --quick:\n"
                         "./vistabench-demo-longtail-quick), and a --quick run's tables and report say\n"
                         "it is a smoke run.")
    add_verb(sub, "table", TableOptions, run=lambda opts: _table(opts.protocol, opts), human=render_table,
             help="print a protocol's results table from the store",
             description="Renders the results store as the protocol's paper-style table. " + TABLE_TEXT)
    add_verb(sub, "report", ReportOptions, run=_report, human=lambda r: f"wrote {r['report']}",
             help="write the static HTML report of the store",
             description="Writes DIR/index.html: one self-contained page with tables and "
                         "embedded plots for every protocol that has records in the store.")


def _demo(opts: DemoOptions) -> dict[str, Any]:
    from ..demos import run_demo
    from ..extras import require
    from ..suite import get_protocol, protocols

    only = list(opts.only) if opts.only else None
    chosen = [get_protocol(n) for n in only] if only else protocols()
    require(*dict.fromkeys(e for p in chosen for e in p.needs("demo")), what="`vistabench demo`")
    return run_demo(opts.out or demo_folder(only and [p.name for p in chosen], quick=opts.quick),
                    only=only, quick=opts.quick,
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


#: what every table verb says about its cells and marks (docs/store.md, "What a table counts")
TABLE_TEXT = ("A row's N counts its distinct results (seeds or predictions files: the same predictions scored "
              "twice count once; scoring modes are never mixed) and each cell is the mean ± SD over them; best "
              "bold, second underlined, third italic, only between rows with N >= 2, by the protocol's own test "
              "where it has one (smalldata: Welch's t-test), else by mean (the caption says which).")


def _table(protocol: str, opts: ProtocolTableOptions) -> TableResult:
    from ..errors import InputError
    from ..report.results import MODES
    from ..suite import get_protocol

    proto = get_protocol(protocol)
    mode = getattr(opts, "mode", None)
    if mode is not None and protocol not in MODES:
        raise InputError(f"--mode: the {protocol} protocol has one scoring mode; leave --mode out")
    with open_store(opts.store) as store:
        build = proto.part("table")
        table = build(store, dataset=opts.dataset) if mode is None else build(store, dataset=opts.dataset, mode=mode)
        return TableResult(table, opts.format)


def register_generated(sub: Verbs, proto: Any) -> Verbs:
    """``vistabench <protocol> run`` for a protocol that declares no ``cli`` part: the verb generated
    from its config (every field a flag, ``--config``, ``--print-config``); the run part is imported
    only when the command runs."""
    verbs = verb_group(sub, proto.name, help=proto.title, description=f"{proto.title}: {proto.question}")
    add_run_verb(verbs, "run", proto.part("config"), run=lambda config, **kw: proto.part("run")(config, **kw),
                 help="run the protocol from its config and store the records",
                 description=f"Runs {proto.name} from its typed config; --print-config [--json] shows "
                             "every value the run will use.")
    return verbs


def add_table_verb(verbs: Verbs, protocol: str) -> None:
    """``vistabench <protocol> table``: the protocol's paper-style table of the store."""
    add_verb(verbs, "table", ProtocolTableOptions, run=lambda opts: _table(protocol, opts), human=render_table,
             help="print the protocol's results table from the store",
             description=f"Renders the store's {protocol} records as the protocol's paper-style table. "
                         + TABLE_TEXT)


def _report(opts: ReportOptions) -> dict[str, str]:
    from ..report import build_report

    with open_store(opts.store) as store:
        return {"report": str(build_report(store, opts.out))}
