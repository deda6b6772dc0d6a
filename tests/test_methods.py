"""MethodSpec and the one register_method signature shared by the four learner families."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import pytest

from vistabench.config import Options, option
from vistabench.methods import MethodSpec, method_registrar
from vistabench.registry import Registry


@dataclass(frozen=True, kw_only=True)
class _Opts(Options):
    k: int = option(1, low=1, help="k")


def _builder(ctx):
    """Doubles."""
    return 2 * ctx


def test_a_spec_loads_a_callable_or_a_module_attribute_reference():
    assert MethodSpec(name="a", protocol="p", options=_Opts, builder=_builder).load() is _builder
    lazy = MethodSpec(name="b", protocol="p", options=_Opts, builder="os.path:join")
    import os.path

    assert lazy.load() is os.path.join
    assert MethodSpec(name="c", protocol="p", options=_Opts).load() is None
    with pytest.raises(TypeError, match="Options subclass"):
        MethodSpec(name="d", protocol="p", options=dict)
    with pytest.raises(TypeError, match="builder"):
        MethodSpec(name="e", protocol="p", options=_Opts, builder=3)


def test_register_method_as_call_and_as_decorator():
    reg: Registry[MethodSpec] = Registry("toy method")
    register = method_registrar(reg, "toy", default_options=_Opts)
    spec = register("lazy", builder="os.path:join", title="joins", backbones=["cnn28"])
    assert spec.options is _Opts and spec.backbones == ("cnn28",) and spec.title == "joins"

    @register("eager", _Opts)
    def eager(ctx):
        """Eager builder."""
        return ctx

    assert eager(3) == 3  # the decorator returns the function unchanged
    got = reg.get("eager")
    assert got.load() is eager and got.title == "Eager builder." and got.protocol == "toy"
    with pytest.raises(RuntimeError, match="registered twice"):
        register("lazy", builder=None)


def test_every_learner_family_registers_method_specs():
    from vistabench.learners.incremental import incremental_methods
    from vistabench.learners.longtail.options import lt_methods
    from vistabench.learners.smalldata.registry import methods
    from vistabench.learners.stream.registry import stream_learners

    for reg, protocol, some in ((lt_methods, "longtail", "ldam_drw"), (methods, "smalldata", "ole"),
                                (incremental_methods, "incremental", "fr"), (stream_learners, "stream", "ft-d")):
        spec = reg.get(some)
        assert isinstance(spec, MethodSpec) and spec.protocol == protocol and issubclass(spec.options, Options)
        assert all(isinstance(reg.get(n), MethodSpec) for n in reg.names())
    assert incremental_methods.get("fr").default_model == "vit_small"


def test_the_registries_list_and_check_methods_without_importing_torch():
    code = ("import sys\n"
            "from vistabench.learners.longtail.options import lt_methods, options_class\n"
            "from vistabench.learners.smalldata.registry import methods\n"
            "from vistabench.learners.incremental import incremental_methods, method_options_class\n"
            "from vistabench.learners.stream.registry import stream_learners, learner_options_class\n"
            "from vistabench.learners.model_options import check_model_options\n"
            "assert options_class('tde').__name__ == 'TDEOptions'\n"
            "assert method_options_class('fr').__name__ == 'FROptions'\n"
            "assert learner_options_class('mt').__name__ == 'MTOptions'\n"
            "assert len(methods.names()) > 5 and len(stream_learners.names()) == 7\n"
            "assert check_model_options('cnn28', {'width': '4'}) == {'width': 4}\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_builtin_builder_reference_resolves_to_the_learner():
    from vistabench.learners.incremental import incremental_methods
    from vistabench.learners.longtail.options import lt_methods
    from vistabench.learners.stream.registry import stream_learners

    assert incremental_methods.get("prototype").load().__name__ == "PrototypeLearner"
    assert stream_learners.get("bhpo").load().__name__ == "BHPO"
    assert all(callable(lt_methods.get(n).load()) for n in lt_methods.names())
