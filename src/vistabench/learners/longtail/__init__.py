"""The long-tailed protocol's methods (docs/longtail.md, docs/architecture.md "Adding a method").

Public names (imported on first use, so that :mod:`.options` stays torch-free):

- :func:`fit_predict`, :class:`LTRunResult` (:mod:`.fit`): train a method, predict test logits.
- :data:`lt_methods`, :func:`register_method`, :class:`MethodContext`, :func:`train`,
  :func:`predict` (:mod:`.registry`): the extension API.
- :class:`MethodOptions`, :data:`method_options` (:mod:`.options`): every method's typed options.
"""

from ..._lazy import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {
    "fit_predict": "fit", "LTRunResult": "fit",
    "lt_methods": "fit",  # through .fit, so that the built-in methods are registered
    "register_method": "registry", "MethodContext": "registry", "train": "registry", "predict": "registry",
    "MethodOptions": "options", "method_options": "options",
})
