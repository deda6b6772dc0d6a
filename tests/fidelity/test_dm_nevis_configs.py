"""dm_nevis (JAX, not executed here) read with ``ast`` from the pinned files: the task-kind table
(``benchmarker/datasets/builders/tfds_builder.py``'s SINGLE_LABEL_DATASETS / MULTI_LABEL_DATASETS
through ``streams/nevis_stream.py``'s DATASET_NAME_TO_SOURCE) against the kinds of the built-in
dm_nevis streams, and ``experiments_jax/configs/finetuning_dknn.py``'s learner config against the
``dm-nevis`` recipe that :class:`~vistabench.protocols.stream.config.StreamConfig` resolves."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from vistabench.protocols.stream.config import StreamConfig
from vistabench.streams import load_stream

def _root(load_reference) -> Path:
    root = load_reference.root("dm_nevis")
    if not (root / "dm_nevis/streams/nevis_stream.py").is_file():
        pytest.skip(f"dm_nevis not in the fidelity cache {root.parent} "
                    "(run: python scripts/fetch_fidelity_refs.py --only dm_nevis)")
    return root


def _assigned(tree: ast.Module, name: str) -> ast.expr:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return node.value
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == name:
            return node.value
    raise AssertionError(f"{name} not assigned at module level")


def _tfds_kinds(root: Path) -> dict[str, str]:
    """dm_nevis task name -> kind, for the tasks it loads through TFDS."""
    builder = ast.parse((root / "dm_nevis/benchmarker/datasets/builders/tfds_builder.py").read_text())
    single = set(ast.literal_eval(_assigned(builder, "SINGLE_LABEL_DATASETS")))
    multi = set(ast.literal_eval(_assigned(builder, "MULTI_LABEL_DATASETS")))
    stream = ast.parse((root / "dm_nevis/streams/nevis_stream.py").read_text())
    table = _assigned(stream, "DATASET_NAME_TO_SOURCE")
    out = {}
    for key, value in zip(table.keys, table.values):
        if isinstance(value, ast.Call) and ast.unparse(value.func) == "TFDSSource":
            tfds = value.args[0].value
            if tfds in single | multi:
                out[key.value] = "multilabel" if tfds in multi else "multiclass"
    return out


def test_task_kind_table_of_the_dm_nevis_streams(load_reference):
    kinds = _tfds_kinds(_root(load_reference))
    assert {"Pascal 2012", "CelebA", "SUN 397", "Pascal 2007"} <= set(kinds)
    for name in ("nevis-full", "nevis-short"):
        for task in load_stream(name).tasks:
            if task.name in kinds:
                assert task.kind == kinds[task.name], (name, task.name)


def _config_values(root: Path) -> dict:
    """finetuning_dknn.py's learner config, every literal leaf by its dotted path (other leaves as source)."""
    tree = ast.parse((root / "experiments_jax/configs/finetuning_dknn.py").read_text())
    consts = {n.targets[0].id: ast.literal_eval(n.value) for n in tree.body
              if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Constant)}
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func).endswith("ConfigDict"))
    out: dict = {}

    def walk(node: ast.expr, path: str) -> None:
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                walk(v, f"{path}.{k.value}" if path else k.value)
        elif isinstance(node, ast.Constant):
            out[path] = node.value
        elif isinstance(node, ast.Name) and node.id in consts:
            out[path] = consts[node.id]
        else:
            out[path] = ast.unparse(node)
    walk(call.args[0], "")
    space = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "search_space_creator")
    sweeps = {c.args[0].value: c.args[1] for c in ast.walk(space)
              if isinstance(c, ast.Call) and ast.unparse(c.func) == "hype.sweep"}
    for name, draw in sweeps.items():
        out[f"search.{name}"] = (ast.unparse(draw.func), tuple(ast.literal_eval(a) for a in draw.args[:2]))
    return out


def test_finetuning_config_against_the_dm_nevis_recipe(load_reference):
    ref = _config_values(_root(load_reference))
    learner = "experiment.learner.config."
    ours = StreamConfig.from_dict({"stream": "nevis-full"})
    opt = learner + "optimization.optimizer.kwargs."
    assert ours.trials == ref[learner + "trials_per_task"]
    assert ref[learner + "model.ctor"] == "resnet.CifarResNet34" and ours.model == "cifar_resnet34"
    assert (ours.momentum, ours.nesterov, ours.weight_decay) == (ref[opt + "momentum"], ref[opt + "nesterov"],
                                                                  ref[opt + "weight_decay"])
    assert ref[opt + "mask"] == "optimizers.default_weight_decay_mask" and ours.decay_mask == "weights"
    sched = learner + "optimization.learning_rate_schedule."
    assert ref[sched + "name"] == "warmup_cosine_decay" and ours.schedule == "warmup-cosine"
    assert ours.warmup_epochs == ref[sched + "kwargs.warmup_epochs"]
    assert ours.final_lr == ref[sched + "kwargs.final_learning_rate"]
    assert ref["search.optimization.learning_rate_schedule.init_learning_rate"] == (
        "hype.log_uniform_random_values", tuple(ours.lr_range))
    assert ref["search.label_smoothing"] == ("hype.uniform_random_values", tuple(ours.label_smoothing_range))
    assert ours.max_batch == ref[learner + "batch.kwargs.max_batch_size"]
    assert ref[learner + "validation_metric"] == "error" and ours.multilabel_selection == "error"
    train_aug = ref[learner + "augmentations.train.kwargs.augmentation_ctors_with_kwargs"]
    assert "augmentations.normalize" in train_aug and ours.input_scaling == "minus_one_one"
    assert ref[learner + "finetuning.batch_size_embed_for_knn"] == 128
