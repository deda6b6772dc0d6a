"""Large-vocabulary detection (AP^Old, AP^Fixed, AP^Pool): the protocol's package.

- :mod:`.runner`
- :mod:`.config`
- :mod:`.analysis`
- :mod:`.calibration`
- :mod:`.tools`
- :mod:`.provenance`
"""
