"""The long-tailed protocol's methods (docs/longtail.md, docs/architecture.md "Adding a method").

Public names (imported on first use, so that :mod:`.options` stays torch-free):

- :func:`fit_predict`, :class:`LTRunResult` (:mod:`.fit`): train a method, predict test logits.
- :func:`register_method`, :class:`MethodContext`, :func:`train`, :func:`predict` (:mod:`.registry`):
  the extension API.
- :data:`lt_methods` (the registry of :class:`~vistabench.methods.MethodSpec`), :class:`MethodOptions`
  (:mod:`.options`, torch-free): every method's name, typed options and function.
"""

from ..._lazy import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {
    "fit_predict": "fit", "LTRunResult": "fit",
    "lt_methods": "options",
    "register_method": "registry", "MethodContext": "registry", "train": "registry", "predict": "registry",
    "MethodOptions": "options",
})
