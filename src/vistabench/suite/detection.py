"""Declaration of the large-vocabulary detection protocol (Dave et al.; docs/detection.md)."""

from . import Protocol, declare

declare(Protocol(
    name="detection",
    title="Large-vocabulary detection: AP^Old, AP^Fixed, AP^Pool",
    question="AP on large vocabularies without the per-image cap that lets re-ranking game it",
    order=20,
    split="vistabench.protocols.detection.runner:build_image_split",
    config="vistabench.protocols.detection.config:DetectionConfig",
    score="vistabench.protocols.detection.runner:score",
    record="vistabench.protocols.detection.runner:to_record",
    run="vistabench.protocols.detection.runner:run",
    table="vistabench.report.detection:detection_table",
    section="vistabench.report.detection:detection_section",
    demo="vistabench.demos.detection:demo",
    cli="vistabench.cli.detection",
    run_needs=(),
))
