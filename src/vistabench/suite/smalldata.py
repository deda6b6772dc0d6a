"""Declaration of the small-data protocol (Brigato et al.; docs/smalldata.md)."""

from . import Protocol, declare

declare(Protocol(
    name="smalldata",
    title="Image classification with small datasets",
    question="small-data methods against a tuned baseline: same budget, 30 runs, Welch's test",
    order=40,
    split="vistabench.data.smalldata_splits:write_preset_splits",
    score="vistabench.protocols.smalldata:score",
    record="vistabench.protocols.smalldata:to_record",
    run="vistabench.protocols.smalldata:run",
    config="vistabench.protocols.smalldata_config:SmalldataConfig",
    table="vistabench.report.smalldata:smalldata_table",
    section="vistabench.report.smalldata:smalldata_section",
    demo="vistabench.demos.smalldata:demo",
    cli="vistabench.cli.smalldata",
    run_needs=("train", "tune"),
))
