"""`<protocol> run --print-config --json` prints every value the run uses (issue 30), and the run keeps it.

For each protocol on bundled data: the printed config has no null and no "auto" except the fields
listed in ``NONE_BY_DESIGN`` (each means "none": an optional file, a runtime setting, a limit not
set); a run records exactly the printed config; the printed file read back with ``--config`` prints
and records the same config. Named real-data forms print without the data present.
"""

from __future__ import annotations

import json

import pytest

from vistabench.cli import main
from vistabench.data.detection_synth import synth_detection_set

#: fields that may print null because null means "none" by design, per protocol (every other field must
#: print a value)
NONE_BY_DESIGN = {
    "longtail": {"threads", "tag"},  # runtime only; no tag
    "smalldata": {"root",  # bundled data: no folder
                  "val_fraction",  # the preset gives train_per_class; val_fraction is its alternative
                  "splits",  # no split folder given: written to the work folder
                  "threads", "ray_address", "max_parallel"},  # runtime only
    "incremental": {"sessions", "preset", "tag",  # no sessions file, no benchmark layout, no tag
                    "fr_epochs", "fr_layers", "fr_weights"},  # fr's older spellings: other methods read none
    "stream": {"data_root", "checkpoint",  # bundled tasks; only pt reads a checkpoint
               "max_tasks", "run_id",  # no limit; the run id is named from the config
               "threads", "ray_address", "max_parallel"},  # runtime only
    "detection": {"split", "calibrate", "seed", "tag",  # scored whole, no calibration, no seed, no tag
                  "calibration_iou_type", "min_samples", "bins"},  # calibration's: read only when calibrating
}
for _fields in NONE_BY_DESIGN.values():
    _fields.add("track_dir")  # runtime only: no tracker folder given
for _protocol in ("longtail", "smalldata", "incremental", "stream"):
    NONE_BY_DESIGN[_protocol].add("pretrained")  # no pre-trained state dict: the backbone starts at random


def _cli(capsys, *argv) -> dict:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


def _nulls(printed: dict) -> set[str]:
    return {k for k, v in printed.items() if v is None or v == "auto"}


def _stored(protocol: str, result: dict) -> list[dict]:
    """The config each record of a run's ``--json`` result stored."""
    records = result["records"] if "records" in result else [result]
    key = "run_config" if protocol == "smalldata" else "config"
    return [r["settings"][key] for r in records]


def _detection_files(tmp_path) -> list[str]:
    s = synth_detection_set(num_images=20, num_categories=5, dets_per_image=10, seed=0)
    (tmp_path / "gt.json").write_text(json.dumps(s.ground_truth))
    (tmp_path / "dt.json").write_text(json.dumps(s.results))
    return ["--gt", tmp_path / "gt.json", "--results", tmp_path / "dt.json"]


RUNS = {
    "longtail": ["--data", "digits", "--method", "ce", "--imbalance", "10", "--epochs", "1", "--points", "3",
                 "--repeats", "2"],
    "smalldata": ["--dataset", "digits", "--method", "ce", "--per-class", "20", "--split", "0", "--epochs", "1",
                  "--trials", "2", "--grace-period", "1", "--repeats", "1", "--threads", "1"],
    "incremental": ["--data", "digits", "--method", "prototype", "--base-classes", "6", "--way", "2", "--shot", "3",
                    "--epochs", "1", "--test-per-class", "10"],
    "stream": ["--stream", "embedded", "--learner", "indep", "--trials", "1", "--steps", "2", "--max-tasks", "2"],
    "detection": [],  # the synthetic set's files
}


def _run(capsys, tmp_path, protocol: str, args: list, tag: str) -> dict:
    work = ["--work-dir", tmp_path / f"work-{tag}"] if protocol == "smalldata" else ["--out", tmp_path / f"out-{tag}"]
    return _cli(capsys, protocol, "run", *args, "--no-store", *work, "--json")


@pytest.mark.parametrize("protocol", sorted(RUNS))
def test_printed_config_is_resolved_and_is_what_the_run_records(protocol, capsys, tmp_path):
    args = RUNS[protocol] or _detection_files(tmp_path)
    printed = _cli(capsys, protocol, "run", *args, "--print-config", "--json")
    assert _nulls(printed) <= NONE_BY_DESIGN[protocol], _nulls(printed) - NONE_BY_DESIGN[protocol]
    (tmp_path / "printed.json").write_text(json.dumps(printed))
    # the printed file prints itself
    assert _cli(capsys, protocol, "run", "--config", tmp_path / "printed.json", "--print-config", "--json") == printed
    # a run records exactly the printed config, and so does a run of the printed file
    from_flags = _stored(protocol, _run(capsys, tmp_path, protocol, args, "flags"))
    from_file = _stored(protocol, _run(capsys, tmp_path, protocol, ["--config", tmp_path / "printed.json"], "file"))
    assert from_flags and all(c == printed for c in from_flags)
    assert from_file and all(c == printed for c in from_file)


REAL = {
    "longtail": [["--data", "cifar100:/nowhere", "--method", "ib", "--imbalance", "100"],
                 ["--data", "cifar10:/nowhere", "--method", "tde", "--imbalance", "10"]],
    "smalldata": [["--dataset", f"{name}:/nowhere", "--method", "ce"] for name in
                  ("cifair10", "cub200", "isic2018", "eurosat", "clamm")],
    "incremental": [["--data", "cifar100:/nowhere", "--method", "fr", "--preset", "cifar100"],
                    ["--data", "digits", "--method", "fr", "--base-classes", "4", "--way", "2", "--shot", "5"],
                    ["--data", "folder:/nowhere", "--method", "finetune", "--preset", "cub200"]],
    "stream": [["--stream", "nevis-full", "--learner", "indep"]],
    "detection": [["--gt", "/nowhere/lvis_v1_val.json", "--results", "/nowhere/detector.json"]],
}
#: also none by design on real data: CUB and ISIC use every training image per class (per_class), the
#: vistabench-style val_fraction presets leave train_per_class, dm-nevis's ResNet-34 has no width
REAL_NONE = {"smalldata": {"per_class", "train_per_class"}, "stream": {"width"}}


@pytest.mark.parametrize("protocol, args", [(p, a) for p, forms in sorted(REAL.items()) for a in forms])
def test_named_real_data_prints_without_the_data(protocol, args, capsys):
    printed = _cli(capsys, protocol, "run", *args, "--print-config", "--json")
    allowed = NONE_BY_DESIGN[protocol] | REAL_NONE.get(protocol, set())
    if "fr" in args:  # fr's older spellings show the values fr reads
        allowed -= {"fr_epochs", "fr_layers", "fr_weights"}
        assert printed["model"] == "vit_small" and printed["model_opt"]["depth"] == printed["method_options"]["depth"]
    assert _nulls(printed) <= allowed, _nulls(printed) - allowed


def test_content_dependent_values_are_named():
    from vistabench.protocols.longtail.config import LongtailConfig

    cfg = LongtailConfig.from_dict({"data": "folder:/nowhere", "method": "ce", "imbalance": 10})
    assert (cfg.model, cfg.augment, cfg.n_max) == ("from_image_size", "from_image_size", "smallest_class")
    assert cfg.test_imbalance == 10.0
    # the paper's reciprocal notation resolves to the same rho as the split's
    assert LongtailConfig.from_dict({"data": "digits", "method": "ce", "imbalance": 0.01}).test_imbalance == 100.0


@pytest.mark.parametrize("protocol, given", [
    ("stream", {"stream": "nevis-full", "learner": "indep"}),
    ("stream", {"stream": "embedded", "learner": "indep", "width": 16}),
    ("incremental", {"data": "digits", "method": "fr", "base_classes": 4, "way": 2, "shot": 5,
                     "model_opt": {"dim": 48}}),
    ("incremental", {"data": "cifar100:/x", "method": "fr", "preset": "cifar100"}),
    ("smalldata", {"dataset": "cub200:/x", "method": "ce", "epochs": 3}),
    ("smalldata", {"dataset": "digits", "method": "ce", "per_class": 20, "split": [0]}),
    ("longtail", {"data": "cifar10:/x", "method": "tde", "imbalance": 0.1}),
    ("longtail", {"data": "digits", "method": "ce", "imbalance": 10, "model": "resnet32"}),
    ("detection", {"gt": "a/g.json", "results": "r.json"}),
])
def test_printed_config_read_back_keeps_the_grid_key(protocol, given):
    from vistabench.grid.protocols import config_class

    cls = config_class(protocol)
    config = cls.from_dict(given)
    again = cls.from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config and again.key_dict() == config.key_dict()
    # a resolved field left out is keyed by its unset value, so cells stored before keep their keys (the
    # model a long-tail reference recipe names was keyed by its name before)
    assert set(cls.resolved_fields) - set(given) - {"model"} <= config.unset_fields()
    key = config.key_dict()
    assert all(key[name] == cls.resolved_fields[name] for name in config.unset_fields() if name in key)
