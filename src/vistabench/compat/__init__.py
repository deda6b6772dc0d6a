"""Drop-in replacements for the official tools' APIs, backed by vistabench's evaluators.

:mod:`vistabench.compat.lvis` — ``LVIS``, ``LVISResults``, ``LVISEval`` as lvis-api, and
``LVISEvaluator``, a detectron2-style evaluator (reset / process / evaluate) with AP^Old, AP^Fixed
and AP^Pool. Nothing here imports torch or detectron2.
"""
