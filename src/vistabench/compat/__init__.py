"""Drop-in replacements for the official tools' APIs, backed by vistabench's evaluator.

* :mod:`vistabench.compat.lvis` — lvis-api's ``LVIS``, ``LVISResults``, ``LVISEval``;
* :mod:`vistabench.compat.coco` — pycocotools' ``COCO``, ``COCOeval``;
* :mod:`vistabench.compat.detectron2` — detectron2-style ``LVISEvaluator`` / ``COCOEvaluator``;
* :mod:`vistabench.compat.torchmetrics` — torchmetrics' ``MeanAveragePrecision`` (imports torch);
* :mod:`vistabench.compat.evaluation` — the params-general evaluate/accumulate they share.

Importing this package imports none of them (and never torch, torchmetrics or detectron2).
"""
