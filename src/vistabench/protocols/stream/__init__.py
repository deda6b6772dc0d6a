"""Never-ending task streams with compute accounting: the protocol's package.

- :mod:`.runner`
- :mod:`.config`
"""
