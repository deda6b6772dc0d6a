"""The small-data benchmark with fair tuning: the protocol's package.

- :mod:`.runner`
- :mod:`.config`
- :mod:`.core`
- :mod:`.final`
"""
