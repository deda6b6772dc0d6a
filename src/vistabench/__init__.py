"""vistabench: honest evaluation protocols for vision models.

Sub-packages
------------
metrics    pure numpy metric functions (no torch import)
data       readers, predictions files, split files
protocols  split builders, baselines and scoring per protocol
learners   torch models, losses, the trainer
report     tables, plots, the HTML report
"""

__version__ = "0.1.0"
