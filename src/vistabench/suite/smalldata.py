"""Declaration of the small-data protocol (Brigato et al.; docs/smalldata.md)."""

from . import Protocol, declare

declare(Protocol(
    name="smalldata",
    title="Image classification with small datasets",
    question="small-data methods against a tuned baseline: same budget, 30 runs, Welch's test",
    order=40,
    split="vistabench.data.smalldata_splits:write_preset_splits",
    score="vistabench.protocols.smalldata.runner:score",
    record="vistabench.protocols.smalldata.runner:to_record",
    run="vistabench.protocols.smalldata.runner:run",
    config="vistabench.protocols.smalldata.config:SmalldataConfig",
    table="vistabench.report.smalldata:smalldata_table",
    section="vistabench.report.smalldata:smalldata_section",
    demo="vistabench.demos.smalldata:demo",
    cli="vistabench.cli.smalldata",
    run_needs=("train", "tune"),
))
