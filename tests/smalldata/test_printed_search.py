"""Printed = run: ``smalldata run --print-config`` shows the search space, the augmentation and the
stem the run uses, resolved once when the config is built; the run searches exactly that space."""

import json

import pytest

from vistabench.cli import main
from vistabench.learners.smalldata.registry import methods
from vistabench.protocols.smalldata import runner as smalldata
from vistabench.protocols.smalldata.config import SmalldataConfig
from vistabench.tuning import parse_space, space_to_json
from vistabench.tuning.space import Choice, Fixed, LogUniform, Uniform


def _printed(capsys, *args: str) -> dict:
    assert main(["smalldata", "run", "--dataset", "digits", *args, "--print-config", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("method", methods.names())
def test_print_config_shows_the_searched_ranges_of_every_method(method, capsys):
    printed = _printed(capsys, "--method", method)
    space = parse_space(printed["space"])
    spec = methods.get(method)
    if spec.tuned:  # lr and weight decay searched on a log scale, the preset's batch sizes
        assert space["lr"] == LogUniform(1e-4, 0.1) and space["weight_decay"] == LogUniform(1e-5, 0.1)
        assert space["batch_size"] == Choice((10, 25, 50))
    else:  # ce_untuned: its fixed values, the median batch size
        assert space["lr"] == Fixed(0.1) and space["weight_decay"] == Fixed(1e-4) and space["batch_size"] == Fixed(25)
    own = spec.options.for_recipe("gem")
    assert set(space) == {"lr", "weight_decay", "batch_size"} | {i.name for i in own.fields_info()}
    for name, value in own.to_dict().items():  # each option: its range, or its value
        assert space[name] == (parse_space({name: value})[name] if isinstance(value, dict) else Fixed(value))
    # digits: no augmentation (the preset's), shown as such; 8 px images: the small stem
    assert printed["augment"] == {"crop": "none", "shift": 0, "pad_mode": "reflect", "min_scale": 1.0,
                                  "hflip": False, "vflip": False}
    assert printed["stem"] == "small"
    again = SmalldataConfig.from_dict(printed)  # read back: the same config, the same key
    assert again.to_dict() == printed
    assert again.key_dict() == SmalldataConfig.from_dict({"dataset": "digits", "method": method}).key_dict()
    # the run's space is the printed one
    plan = smalldata.plan_from_config(again)
    assert space_to_json(smalldata.method_space(method, again.preset(), method_options=plan.method_options,
                                                overrides=plan.space)) == printed["space"]


def test_overrides_and_batch_sizes_are_printed_in_place(capsys):
    printed = _printed(capsys, "--method", "tvmf", "--space", '{"lr": {"loguniform": [0.001, 0.05]}}',
                       "--batch-sizes", "5", "10", "--augment", "pad-crop-flip")
    assert printed["space"]["lr"] == {"loguniform": [0.001, 0.05]}
    assert printed["space"]["batch_size"] == {"choice": [5, 10]}
    assert printed["space"]["kappa"] == 16.0 and printed["augment"] == "pad-crop-flip"
    given = SmalldataConfig.from_dict({"dataset": "digits", "method": "tvmf", "batch_sizes": [5, 10],
                                       "space": {"lr": {"loguniform": [0.001, 0.05]}}, "augment": "pad-crop-flip"})
    # the key keeps what was given (as before the space was resolved), also when read back printed
    assert given.key_dict()["space"] == {"lr": {"loguniform": [0.001, 0.05]}}
    assert SmalldataConfig.from_dict(printed).key_dict() == given.key_dict()


def test_the_stem_follows_the_size_the_model_is_built_for():
    def stem(**given):
        return SmalldataConfig.from_dict({"method": "ce", **given}).stem

    assert stem(dataset="cub200:/d") == "imagenet"  # resized to 224 px
    assert stem(dataset="cub200:/d", image_size=64) == "small"
    assert stem(dataset="eurosat:/d") == "imagenet"  # gem keeps the ImageNet stem on 64 px EuroSAT
    assert stem(dataset="eurosat:/d", recipe="vistabench") == "small"
    assert stem(dataset="cifair10:/d", image_size=224) == "small"  # 32 px images keep their size
    assert stem(dataset="cub200:/d", stem="small") == "small"  # given: wins


def test_bad_augmentation_fields_name_the_option():
    from vistabench.errors import InputError

    with pytest.raises(InputError, match=r"^augment: .*crop"):
        SmalldataConfig.from_dict({"dataset": "digits", "method": "ce", "augment": {"crop": "sideways"}})
    with pytest.raises(InputError, match=r"^augment: expected preset"):
        SmalldataConfig.from_dict({"dataset": "digits", "method": "ce", "augment": {"rotate": 5}})


def test_the_search_draws_from_the_printed_ranges(tmp_path, capsys):
    printed = _printed(capsys, "--method", "cosine_ce", "--split", "0", "--trials", "3", "--epochs", "1",
                       "--grace-period", "1", "--stages", "tune")
    records = smalldata.run(SmalldataConfig.from_dict(printed), work_dir=tmp_path)
    (tune,) = [r for r in records if r.kind == "tune"]
    search = tune.settings["search"]
    assert search["space"] == printed["space"]
    space = parse_space(printed["space"])
    assert len(search["trials"]) == 3
    for trial in search["trials"]:
        assert set(trial["config"]) == set(space)
        for name, p in space.items():
            v = trial["config"][name]
            if isinstance(p, (LogUniform, Uniform)):
                assert p.low <= v <= p.high, (name, v)
            elif isinstance(p, Choice):
                assert v in p.values
            else:
                assert v == p.value
    assert tune.settings["run_config"] == printed


@pytest.mark.parametrize("model,size", [("resnet18", 32), ("resnet18", 224), ("resnet32", 64), ("cnn28", 8)])
def test_a_resolved_stem_builds_the_network_the_size_rule_builds(model, size):
    import torch

    from vistabench.learners.model_options import small_stem
    from vistabench.learners.models import build_model
    from vistabench.protocols.smalldata.core import stem_model_options

    resolved = "small" if small_stem(size) else "imagenet"
    a = build_model(model, num_classes=3, in_channels=3, image_size=size, seed=0,
                    **stem_model_options(model, "from_image_size"))
    b = build_model(model, num_classes=3, in_channels=3, image_size=size, seed=0, **stem_model_options(model, resolved))
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    if model == "resnet18":
        assert stem_model_options(model, resolved) == {"small_input": size <= 64}
    else:  # no stem option: nothing passed (resnet32 takes none)
        assert stem_model_options(model, resolved) == {}


def test_a_config_stored_before_the_search_was_printed_reads_back_with_its_key():
    fresh = SmalldataConfig.from_dict({"dataset": "eurosat:/d", "method": "cosine_ce", "recipe": "vistabench"})
    old = {**fresh.to_dict(), "space": {}, "augment": "preset", "stem": "from_image_size"}  # as runs stored it
    again = SmalldataConfig.from_dict(old)
    assert again.key_dict() == fresh.key_dict()
    assert again.to_dict() == fresh.to_dict()  # resolved the same way
