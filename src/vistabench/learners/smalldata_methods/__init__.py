"""The small-data methods beyond the first five (one module per method or family).

Each module holds the method's layers/losses and a ``build(base, config)`` function that
:mod:`vistabench.learners.smalldata` registers with one line.
"""
