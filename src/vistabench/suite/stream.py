"""Declaration of the never-ending task-stream protocol (Nevis'22; docs/stream.md)."""

from . import Protocol, declare

declare(Protocol(
    name="stream",
    title="Never-ending task streams: error and compute (Nevis'22)",
    question="never-ending task streams judged by error and all compute spent",
    order=50,
    split="vistabench.protocols.stream.runner:stream_split",
    score="vistabench.protocols.stream.runner:score",
    record="vistabench.protocols.stream.runner:to_records",
    run="vistabench.protocols.stream.runner:run",
    config="vistabench.protocols.stream.config:StreamConfig",
    table="vistabench.report.stream:stream_table",
    section="vistabench.report.stream:stream_section",
    demo="vistabench.demos.stream:demo",
    cli="vistabench.cli.stream",
    demo_needs=("train", "tune"),  # the demo runs every baseline, BHPO (botorch) included
))
