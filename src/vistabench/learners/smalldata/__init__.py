"""Small-data methods (Brigato et al., §IV): losses and architecture changes on a shared backbone.

- :mod:`.registry` (no torch): :func:`register_method`, ``methods``, :class:`MethodContext`;
- :mod:`.options` (no torch): each method's typed options (:class:`MethodOptions`);
- :mod:`.build`: :func:`build_method` (backbone + method, seeded);
- one module per method or family: :mod:`.basic` (cosine, cosine + CE, grad-l2), :mod:`.harmonic`,
  :mod:`.dhn`, :mod:`.ole`, :mod:`.fconv`, :mod:`.dskn`, :mod:`.dvp` (with :mod:`.moco`, MoCo v2's
  pre-training pieces, and :mod:`.dvp_stages`, the pre-ReLU stage maps), :mod:`.auxilearn`, :mod:`.tvmf`.

Importing this package does not import torch; the names below are loaded on first use.
"""

from ..._lazy import lazy_exports

__all__ = ["register_method", "methods", "MethodContext", "SmallDataMethod", "MethodOptions",
           "build_method"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "register_method": "registry", "methods": "registry", "MethodContext": "registry",
    "SmallDataMethod": "registry", "MethodOptions": "options", "build_method": "build"})
