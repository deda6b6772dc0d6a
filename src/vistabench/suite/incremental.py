"""Declaration of the few-shot class-incremental protocol (gAcc; docs/incremental.md)."""

from . import Protocol, declare

declare(Protocol(
    name="incremental",
    title="Few-shot class-incremental learning (gAcc)",
    question="few-shot class-incremental learning judged by generalised accuracy, not base-dominated aAcc",
    order=30,
    split="vistabench.protocols.incremental.runner:build_sessions",
    score="vistabench.protocols.incremental.runner:score",
    record="vistabench.protocols.incremental.runner:to_record",
    run="vistabench.protocols.incremental.runner:run",
    config="vistabench.protocols.incremental.config:IncrementalConfig",
    table="vistabench.report.incremental:incremental_table",
    section="vistabench.report.incremental:incremental_section",
    demo="vistabench.demos.incremental:demo",
    cli="vistabench.cli.incremental",
))
