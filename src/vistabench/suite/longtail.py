"""Declaration of the long-tailed protocol (Fang et al.; docs/longtail.md)."""

from . import Protocol, declare

declare(Protocol(
    name="longtail",
    title="Long-tailed classification under unknown test distributions",
    question="how does a long-tail-trained classifier do when the test distribution is unknown?",
    order=10,
    split="vistabench.protocols.longtail.runner:build_training_split",
    score="vistabench.protocols.longtail.runner:score",
    record="vistabench.protocols.longtail.runner:to_record",
    run="vistabench.protocols.longtail.runner:run",
    config="vistabench.protocols.longtail.config:LongtailConfig",
    table="vistabench.report.longtail:longtail_table",
    section="vistabench.report.longtail:longtail_section",
    demo="vistabench.demos.longtail:demo",
    cli="vistabench.cli.longtail",
))
