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
            "from vistabench.methods import get_method, method_registries\n"
            "from vistabench.learners.smalldata.registry import methods\n"
            "from vistabench.learners.stream.registry import stream_learners\n"
            "from vistabench.learners.model_options import check_model_options\n"
            "assert get_method('longtail', 'tde').options.__name__ == 'TDEOptions'\n"
            "assert get_method('incremental', 'fr').options.__name__ == 'FROptions'\n"
            "assert get_method('stream', 'mt').options.__name__ == 'MTOptions'\n"
            "assert method_registries.names() == ['incremental', 'longtail', 'smalldata', 'stream']\n"
            "from vistabench.learners.model_options import check_model_name, models\n"
            "check_model_name('resnet32_bbn')  # its factory lives in a torch module, its entry does not\n"
            "assert len(models.names()) == 8 and models.get('vit_small').options.__name__ == 'ViTOptions'\n"
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


def test_one_lookup_by_protocol_and_name():
    from vistabench.errors import InputError
    from vistabench.learners.incremental import incremental_methods
    from vistabench.learners.longtail.options import lt_methods
    from vistabench.learners.smalldata.registry import methods
    from vistabench.learners.stream.registry import stream_learners
    from vistabench.methods import PROTOCOLS, get_method, method_registries

    regs = {"longtail": lt_methods, "smalldata": methods, "incremental": incremental_methods, "stream": stream_learners}
    assert sorted(PROTOCOLS) == method_registries.names() == sorted(regs)
    for protocol, reg in regs.items():
        assert method_registries.get(protocol) is reg
        assert all(get_method(protocol, n) is reg.get(n) for n in reg.names())
    with pytest.raises(InputError, match=r"^learner: unknown stream learner 'ft_d'; did you mean 'ft-d'"):
        get_method("stream", "ft_d", field="learner")
    with pytest.raises(InputError, match=r"^protocol: unknown protocol 'longtale'; did you mean 'longtail'"):
        get_method("longtale", "ce")


def test_register_learner_is_a_deprecated_spelling_of_register_method():
    from vistabench.learners.stream import registry

    with pytest.warns(DeprecationWarning, match="register_method"):
        with pytest.raises(RuntimeError, match="registered twice"):
            registry.register_learner("indep", builder="x:y")
