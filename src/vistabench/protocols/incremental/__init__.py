"""Few-shot class-incremental learning (aAcc, gAcc, PD, KR): the protocol's package.

- :mod:`.runner`
- :mod:`.config`
- :mod:`.sessions`
"""
