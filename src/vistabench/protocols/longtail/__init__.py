"""Long-tailed classification under unknown test distributions: the protocol's package.

- :mod:`.runner`
- :mod:`.config`
- :mod:`.recipes`
- :mod:`.sweep`
"""
