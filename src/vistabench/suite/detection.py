"""Declaration of the large-vocabulary detection protocol (Dave et al.; docs/detection.md)."""

from . import Protocol, declare

declare(Protocol(
    name="detection",
    title="Large-vocabulary detection: AP^Old, AP^Fixed, AP^Pool",
    question="AP on large vocabularies without the per-image cap that lets re-ranking game it",
    order=20,
    split="vistabench.protocols.detection:build_image_split",
    config="vistabench.protocols.detection_config:DetectionConfig",
    score="vistabench.protocols.detection:score",
    record="vistabench.protocols.detection:to_record",
    run="vistabench.protocols.detection:run",
    table="vistabench.report.detection:detection_table",
    section="vistabench.report.detection:detection_section",
    demo="vistabench.demos.detection:demo",
    cli="vistabench.cli.detection",
    run_needs=(),
))
