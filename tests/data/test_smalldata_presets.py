"""The small-data presets are the data sets' one entry: name, folder reader and protocol settings."""

import inspect

from vistabench.data.readers import readers
from vistabench.data.smalldata import load_smalldata, presets
from vistabench.registry import resolve_ref


def test_each_preset_holds_its_folder_reader_and_is_a_reader():
    for name, p in presets.items():
        if not p.needs_root:  # bundled: read by the readers registry itself
            assert p.folder_reader is None and name in readers
            continue
        read = resolve_ref(p.folder_reader)
        takes_size = "image_size" in inspect.signature(read).parameters
        assert takes_size == (p.native_size is None), name  # a native-size data set is never resized
        assert name in readers  # --data NAME:DIR in every protocol (folder: the general folder reader)
    assert readers.get("folder") is not None


def test_the_stored_preset_settings_leave_the_folder_reader_out():
    d = presets.get("cifair10").to_dict()
    assert "folder_reader" not in d and "loader" not in d and "native_size" not in d and d["batch_sizes"] == [10, 25, 50]


def test_bundled_sets_load_at_their_native_size():
    for name in ("digits", "mnist5k"):
        p = presets.get(name)
        assert load_smalldata(name).train.images.shape[1] == p.native_size


def test_a_presets_recipe_changes_are_checked_recipe_values_and_stored_flat_as_before():
    import pytest

    from vistabench.data.smalldata_presets import RECIPES, STORED_ORDER, get_preset
    from vistabench.errors import InputError
    from vistabench.learners.recipe import RECIPE, Recipe, default_recipe, recipe_with

    for name in presets.names():
        for rules in RECIPES:
            p = get_preset(name, recipe=rules)
            assert set(p.recipe_changes) == {"model", "epochs"}, name
            assert set(p.recipe_changes) <= set(RECIPE)
            made = recipe_with(default_recipe().to_dict(), p.recipe_changes)  # each value checked by its declaration
            assert isinstance(made, Recipe) and made.model == p.recipe_changes["model"]
            d = p.to_dict()  # the layout searches were stored in: model and epochs flat, in their old places
            assert tuple(d) == STORED_ORDER and (d["model"], d["epochs"]) == (made.model, made.epochs)
    with pytest.raises(InputError, match="epochs"):  # a preset's value is held to the recipe's rule where applied
        recipe_with(default_recipe().to_dict(), {"epochs": 0})
