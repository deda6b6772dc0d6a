"""The backbones' typed options (learners/model_options.py): the same checks as a config field."""

import pytest

from vistabench.errors import InputError
from vistabench.learners.model_options import (CNN28Options, ModelSpec, ViTOptions, check_model_name,
                                               check_model_options, model_options_class, models, register_model)


def test_every_builtin_model_has_an_options_class_matching_its_factory():
    import inspect

    from vistabench.learners.models import models

    for name in models.names():
        cls = model_options_class(name)
        assert cls is not None, name
        declared = {i.name for i in cls.fields_info()}
        factory = models.get(name).load()
        params = set(inspect.signature(factory).parameters) - {"num_classes", "in_channels", "image_size"}
        if "kw" in params:  # vit_small passes its keywords on to VisionTransformer
            from vistabench.learners.vit import VisionTransformer

            params = set(inspect.signature(VisionTransformer).parameters) - {"num_classes", "in_channels",
                                                                              "image_size"}
        assert declared == params, name


def test_values_are_coerced_and_only_given_keys_returned():
    assert check_model_options("vit_small", {"dim": "48", "heads": "4"}) == {"dim": 48, "heads": 4}
    assert check_model_options("resnet18", {"small_input": "false"}) == {"small_input": False}
    assert check_model_options("my_own_model", {"anything": 1}) == {"anything": 1}  # no class: unchecked


@pytest.mark.parametrize("model,opts,message", [
    ("vit_small", {"dims": 8}, r"^model_opt: dims: not an option of model 'vit_small'; did you mean dim\?"),
    ("vit_small", {"dim": "abc"}, r"^model_opt: dim: expected an integer, got 'abc'$"),
    ("vit_small", {"dim": 40}, r"^model_opt: dim: expected a multiple of heads=6, got 40$"),
    ("cnn28", {"width": 0}, r"^model_opt: width: expected a number >= 1, got 0$"),
    ("wrn16_8", {"dropout": -1}, r"^model_opt: dropout: expected a number >= 0"),
    ("resnet32", {"width": 2}, r"its options: none"),
])
def test_bad_options_are_one_line_naming_the_option(model, opts, message):
    with pytest.raises(InputError, match=message):
        check_model_options(model, opts)


def test_one_entry_per_model_holds_its_factory_and_its_options():
    assert models.get("cnn28").options is CNN28Options and models.get("vit_small").options is ViTOptions
    assert all(isinstance(models.get(n), ModelSpec) for n in models.names())
    with pytest.raises(InputError, match="did you mean 'cnn28'"):
        models.get("cnn82")
    from vistabench.learners import models as torch_models  # the factories are the built-in entries'

    assert models.get("cnn28").load() is torch_models._cnn28
    assert torch_models.models is models


def test_a_registered_model_is_known_with_its_options(monkeypatch):
    monkeypatch.setattr(models, "_items", dict(models._items))  # leave the registry as it was

    @register_model("tiny_test_net", CNN28Options)
    def tiny(num_classes, in_channels, image_size=None, *, width=16):
        return (num_classes, in_channels, width)

    check_model_name("tiny_test_net")
    assert model_options_class("tiny_test_net") is CNN28Options
    assert check_model_options("tiny_test_net", {"width": "4"}) == {"width": 4}
    assert models.get("tiny_test_net").load()(3, 1, width=4) == (3, 1, 4)
    with pytest.raises(InputError, match=r"^model: unknown model 'tiny_tset_net'; did you mean 'tiny_test_net'"):
        check_model_name("tiny_tset_net")
