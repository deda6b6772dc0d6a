"""A catalogue of realistic user mistakes across every sub-command (issue 11).

Each case must end with exit status 2, no traceback, and exactly one line on stderr that names the
argument or file and the problem. Cases run in-process through ``vistabench.cli.main``.
"""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from vistabench.cli import main
from vistabench.errors import USER_ERROR


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    """Files a tired user might pass: good ones, broken ones, folders, foreign databases."""
    from vistabench.data import save_predictions
    from vistabench.data.detection_synth import synth_detection_set
    from vistabench.protocols.longtail.sweep import build_sweep, write_sweep
    from vistabench.store import Record, ResultsStore

    t = tmp_path_factory.mktemp("mistakes")
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(4), 30)[rng.permutation(120)]
    logits = rng.normal(size=(120, 4))
    save_predictions(t / "pred.npz", labels=labels, logits=logits)
    save_predictions(t / "pred_long.npz", labels=np.r_[labels, labels[:5]], logits=np.r_[logits, logits[:5]])
    save_predictions(t / "pred_short.npz", labels=labels[:60], logits=logits[:60])
    save_predictions(t / "pred5.npz", labels=np.r_[labels, 4], logits=np.c_[np.r_[logits, logits[:1]], np.zeros(121)])
    np.savez(t / "nolabels.npz", images=np.zeros((2, 2)))
    np.save(t / "array.npy", np.zeros(3))
    np.savez(t / "objects.npz", labels=np.array([{"a": 1}], dtype=object))
    (t / "counts.json").write_text(json.dumps([200, 60, 20, 6]))
    (t / "counts_obj.json").write_text(json.dumps({"a": 1}))
    write_sweep(t / "sweep.json", build_sweep(labels, [200, 60, 20, 6], test_imbalance=10, points=3, repeats=2))
    edited = json.loads((t / "sweep.json").read_text())
    edited["seed"] = 99
    (t / "sweep_edited.json").write_text(json.dumps(edited))
    (t / "pickle.npz").write_bytes(b"\x80\x04\x95garbage")
    (t / "text.txt").write_text("hello\n")
    (t / "empty.json").write_text("")
    (t / "broken.json").write_text('{"a": [1, 2,')
    (t / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
    (t / "folder").mkdir()
    (t / "folder" / "x.json").write_text("[]")
    c = sqlite3.connect(t / "foreign.db")
    c.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    c.commit()
    c.close()
    c = sqlite3.connect(t / "foreign_app.db")
    c.execute("PRAGMA application_id = 1234")
    c.execute("CREATE TABLE x (y)")
    c.commit()
    c.close()
    (t / "corrupt.sqlite").write_bytes(b"SQLite format 3\x00" + b"\xff" * 300)
    with ResultsStore(t / "store.sqlite") as s:
        s.add(Record(protocol="longtail", dataset="d", method="m", seed=0, split_hash=None, settings={},
                     metrics={"avg": 0.5}))
    with ResultsStore(t / "newer.sqlite") as s:
        pass
    c = sqlite3.connect(t / "newer.sqlite")
    c.execute("PRAGMA user_version = 99")
    c.commit()
    c.close()
    with ResultsStore(t / "badrecord.sqlite") as s:
        s.add(Record(protocol="longtail", dataset="d", method="m", seed=0, split_hash=None, settings={},
                     metrics={"avg": 0.5}))
    c = sqlite3.connect(t / "badrecord.sqlite")
    c.execute("UPDATE records SET metrics = '{\"avg\": 0.5' WHERE id = 1")
    c.commit()
    c.close()
    syn = synth_detection_set(num_images=10, num_categories=5, dets_per_image=5, seed=0)
    (t / "gt.json").write_text(json.dumps(syn.ground_truth))
    (t / "dt.json").write_text(json.dumps(syn.results))
    (t / "dt_empty.json").write_text("[]")
    gt = dict(syn.ground_truth)
    anns = [dict(a) for a in gt["annotations"]]
    anns[1]["id"] = anns[0]["id"]
    (t / "gt_dup.json").write_text(json.dumps({**gt, "annotations": anns}))
    (t / "dt_obj.json").write_text(json.dumps({"annotations": []}))
    (t / "matrix.json").write_text(json.dumps({"matrix": [[0.9], [0.8, 0.5]]}))
    (t / "matrix_str.json").write_text(json.dumps({"matrix": [["0.9"], [0.8, 0.5]]}))
    (t / "matrix_pct.json").write_text(json.dumps({"matrix": [[90], [80, 50]]}))
    (t / "matrix_ragged.json").write_text(json.dumps({"matrix": [[0.9], [0.8]]}))
    (t / "matrix_list.json").write_text(json.dumps([[0.9]]))
    (t / "a.json").write_text(json.dumps([0.9, 0.8, 0.85]))
    (t / "a_str.json").write_text(json.dumps(["0.9", "0.8"]))
    (t / "bad.yaml").write_text("name: x\ntasks: [a, b\n  c: d: e\n")
    (t / "list.yaml").write_text("- 1\n- 2\n")
    (t / "cal_bad.json").write_text(json.dumps({"method": "platt"}))
    (t / "space_list.json").write_text(json.dumps([1, 2]))
    (t / "grid_typo.yaml").write_text("protocol: longtial\nfixed: {data: digits}\ngrid: {method: [ce]}\n")
    (t / "grid_option.yaml").write_text("protocol: longtail\nfixed: {data: digits, imbalance: 10}\n"
                                        "grid: {methd: [ce]}\n")
    (t / "grid_good.yaml").write_text("protocol: longtail\nfixed: {data: digits, imbalance: 10, method: ce}\n")
    img = t / "imgs" / "cat"
    img.mkdir(parents=True)
    (img / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    (t / "ro").mkdir()
    (t / "ro" / "keep.txt").write_text("")
    for name in ("cifar-10-batches-py", "cifar-100-python"):  # extracted CIFAR folders (names only)
        (t / name).mkdir()
    (t / "cifar-10-batches-py" / "data_batch_1").write_bytes(b"\x80")
    (t / "cifar-100-python" / "train").write_bytes(b"\x80")
    (t / "cifar-100-python" / "meta").write_bytes(b"\x80")
    (t / "results.json.gz").write_bytes(b"\x1f\x8b\x08\x00rest")
    return t


# (case id, argv with {d} for the fixture folder, substring the one-line message must contain)
CASES = [
    # ------------------------------------------------------------------ top level / argparse
    ("no-command", [], "required"),
    ("unknown-command", ["longtial"], "invalid choice"),
    ("unknown-verb", ["longtail", "scroe"], "invalid choice"),
    ("int-as-text", ["longtail", "profile", "--classes", "ten", "--n-max", "5", "--imbalance", "2"], "--classes"),
    # ------------------------------------------------------------------ table / report / demo
    ("table-typo", ["table", "--protocol", "longtial", "--store", "{d}/store.sqlite"], "did you mean 'longtail'"),
    ("table-missing-store", ["table", "--protocol", "longtail", "--store", "{d}/nope.sqlite"], "nope.sqlite"),
    ("table-foreign", ["table", "--protocol", "longtail", "--store", "{d}/foreign.db"], "another program"),
    ("table-foreign-app", ["table", "--protocol", "longtail", "--store", "{d}/foreign_app.db"], "another program"),
    ("table-corrupt", ["table", "--protocol", "longtail", "--store", "{d}/corrupt.sqlite"], "corrupt"),
    ("table-text", ["table", "--protocol", "longtail", "--store", "{d}/text.txt"], "not a SQLite"),
    ("table-folder", ["table", "--protocol", "longtail", "--store", "{d}/folder"], "is a folder"),
    ("table-newer", ["table", "--protocol", "longtail", "--store", "{d}/newer.sqlite"], "newer vistabench"),
    ("table-bad-record", ["table", "--protocol", "longtail", "--store", "{d}/badrecord.sqlite"], "record 1"),
    ("report-foreign", ["report", "--out", "{d}/rep", "--store", "{d}/foreign.db"], "another program"),
    ("report-missing", ["report", "--out", "{d}/rep", "--store", "{d}/nope.sqlite"], "nope.sqlite"),
    ("report-out-is-file", ["report", "--out", "{d}/text.txt", "--store", "{d}/store.sqlite"], "text.txt"),
    ("demo-unknown-protocol", ["demo", "--out", "{d}/demo", "--only", "longtial"], "longtial"),
    # ------------------------------------------------------------------ longtail
    ("profile-zero-classes", ["longtail", "profile", "--classes", "0", "--n-max", "5", "--imbalance", "2"], "--classes"),
    ("profile-neg-nmax", ["longtail", "profile", "--classes", "3", "--n-max", "-5", "--imbalance", "2"], "--n-max"),
    ("profile-zero-rho", ["longtail", "profile", "--classes", "3", "--n-max", "5", "--imbalance", "0"], "imbalance"),
    ("profile-nan-rho", ["longtail", "profile", "--classes", "3", "--n-max", "5", "--imbalance", "nan"], "imbalance"),
    ("split-val-fraction", ["longtail", "split", "--data", "digits", "--imbalance", "10", "--val-fraction", "1.5",
                            "--out", "{d}/s.json"], "--val-fraction"),
    ("split-val-fraction-1", ["longtail", "split", "--data", "digits", "--imbalance", "10", "--val-fraction", "1",
                              "--out", "{d}/s.json"], "--val-fraction"),
    ("split-val-fraction-neg", ["longtail", "split", "--data", "digits", "--imbalance", "10", "--val-fraction", "-0.1",
                                "--out", "{d}/s.json"], "--val-fraction"),
    ("split-unknown-data", ["longtail", "split", "--data", "digitz", "--imbalance", "10", "--out", "{d}/s.json"], "digits"),
    ("split-npz-pickle", ["longtail", "split", "--data", "npz:{d}/pickle.npz", "--imbalance", "10",
                          "--out", "{d}/s.json"], "not a .npz"),
    ("split-npz-missing", ["longtail", "split", "--data", "npz:{d}/nope.npz", "--imbalance", "10",
                           "--out", "{d}/s.json"], "nope.npz"),
    ("split-npz-no-arrays", ["longtail", "split", "--data", "npz:{d}/nolabels.npz", "--imbalance", "10",
                             "--out", "{d}/s.json"], "labels"),
    ("split-npz-folder", ["longtail", "split", "--data", "npz:{d}/folder", "--imbalance", "10",
                          "--out", "{d}/s.json"], "is a folder"),
    ("split-bare-path", ["longtail", "split", "--data", "{d}/folder", "--imbalance", "10", "--out", "{d}/s.json"],
     "--data '{d}/folder': a path needs a kind prefix: folder:{d}/folder, cifar10:{d}/folder or cifar100:{d}/folder"),
    ("split-bare-cifar10-path", ["longtail", "split", "--data", "{d}/cifar-10-batches-py", "--imbalance", "10",
                                 "--out", "{d}/s.json"], "a path needs a kind prefix: use cifar10:{d}/cifar-10-batches-py"),
    ("split-bare-cifar100-path", ["longtail", "split", "--data", "{d}/cifar-100-python", "--imbalance", "10",
                                  "--out", "{d}/s.json"], "use cifar100:{d}/cifar-100-python"),
    ("split-bare-image-folder", ["longtail", "split", "--data", "{d}/imgs", "--imbalance", "10", "--out", "{d}/s.json"],
     "use folder:{d}/imgs"),
    ("split-bare-npz", ["longtail", "split", "--data", "{d}/pred.npz", "--imbalance", "10", "--out", "{d}/s.json"],
     "use npz:{d}/pred.npz"),
    ("split-cifar-prefix-on-a-file", ["longtail", "split", "--data", "cifar10:{d}/pred.npz", "--imbalance", "10",
                                      "--out", "{d}/s.json"], "--data 'cifar10:{d}/pred.npz': '{d}/pred.npz' is a file, expected a folder"),
    ("split-npz-prefix-on-a-folder", ["longtail", "split", "--data", "npz:{d}/folder", "--imbalance", "10",
                                      "--out", "{d}/s.json"], "--data 'npz:{d}/folder': '{d}/folder' is a folder, expected a file"),
    ("split-folder-corrupt-image", ["longtail", "split", "--data", "folder:{d}/imgs", "--imbalance", "10",
                                    "--out", "{d}/s.json"], "broken.png"),
    ("split-folder-missing", ["longtail", "split", "--data", "folder:{d}/nope", "--imbalance", "10",
                              "--out", "{d}/s.json"], "--data 'folder:{d}/nope': no such folder '{d}/nope'"),
    ("run-folder-missing", ["longtail", "run", "--data", "folder:{d}/nope", "--imbalance", "10", "--method", "ce",
                            "--no-store"], "--data 'folder:{d}/nope': no such folder"),
    ("split-typo-option", ["longtail", "split", "--data", "digits", "--imbalanse", "10", "--out", "{d}/s.json"],
     "unrecognized option --imbalanse (did you mean --imbalance?)"),
    ("run-typo-option", ["longtail", "run", "--data", "digits", "--imbalanse", "10", "--method", "ce", "--print-config"],
     "unrecognized option --imbalanse (did you mean --imbalance or --test-imbalance?)"),
    ("split-typo-option-with-value", ["longtail", "split", "--data", "digits", "--imbalance", "10", "--out", "{d}/s.json",
                                      "--sed=3"], "unrecognized option --sed (did you mean --seed?)"),
    ("profile-unknown-option", ["longtail", "profile", "--classes", "3", "--n-max", "5", "--imbalance", "2", "--zzz"],
     "unrecognized option --zzz (options: "),
    ("split-cifar-missing", ["longtail", "split", "--data", "cifar10:{d}/folder", "--imbalance", "10",
                             "--out", "{d}/s.json"], "missing files"),
    ("split-cifar-no-path", ["longtail", "split", "--data", "cifar10", "--imbalance", "10", "--out", "{d}/s.json"],
     "cifar10:DIR"),
    ("split-out-folder", ["longtail", "split", "--data", "digits", "--imbalance", "10", "--out", "{d}/folder"],
     "is a folder"),
    ("split-out-under-file", ["longtail", "split", "--data", "digits", "--imbalance", "10",
                              "--out", "{d}/text.txt/s.json"], "text.txt"),
    ("split-nmax-too-big", ["longtail", "split", "--data", "digits", "--imbalance", "10", "--n-max", "100000",
                            "--out", "{d}/s.json"], "--n-max"),
    ("sweep-labels-missing", ["longtail", "sweep", "--labels", "{d}/nope.npz", "--train-counts", "{d}/counts.json",
                              "--test-imbalance", "10", "--out", "{d}/w.json"], "--labels"),
    ("sweep-labels-folder", ["longtail", "sweep", "--labels", "{d}/folder", "--train-counts", "{d}/counts.json",
                             "--test-imbalance", "10", "--out", "{d}/w.json"], "is a folder"),
    ("sweep-labels-pickle", ["longtail", "sweep", "--labels", "{d}/pickle.npz", "--train-counts", "{d}/counts.json",
                             "--test-imbalance", "10", "--out", "{d}/w.json"], "not a .npz"),
    ("sweep-labels-npy", ["longtail", "sweep", "--labels", "{d}/array.npy", "--train-counts", "{d}/counts.json",
                          "--test-imbalance", "10", "--out", "{d}/w.json"], ".npy"),
    ("sweep-labels-objects", ["longtail", "sweep", "--labels", "{d}/objects.npz", "--train-counts", "{d}/counts.json",
                              "--test-imbalance", "10", "--out", "{d}/w.json"], "object"),
    ("sweep-no-labels-array", ["longtail", "sweep", "--labels", "{d}/nolabels.npz", "--train-counts", "{d}/counts.json",
                               "--test-imbalance", "10", "--out", "{d}/w.json"], "labels"),
    ("sweep-counts-broken", ["longtail", "sweep", "--labels", "{d}/pred.npz", "--train-counts", "{d}/broken.json",
                             "--test-imbalance", "10", "--out", "{d}/w.json"], "malformed JSON"),
    ("sweep-counts-empty", ["longtail", "sweep", "--labels", "{d}/pred.npz", "--train-counts", "{d}/empty.json",
                            "--test-imbalance", "10", "--out", "{d}/w.json"], "malformed JSON"),
    ("sweep-counts-binary", ["longtail", "sweep", "--labels", "{d}/pred.npz", "--train-counts", "{d}/binary.json",
                             "--test-imbalance", "10", "--out", "{d}/w.json"], "binary.json"),
    ("sweep-counts-object", ["longtail", "sweep", "--labels", "{d}/pred.npz", "--train-counts", "{d}/counts_obj.json",
                             "--test-imbalance", "10", "--out", "{d}/w.json"], "JSON list"),
    ("sweep-counts-folder", ["longtail", "sweep", "--labels", "{d}/pred.npz", "--train-counts", "{d}/folder",
                             "--test-imbalance", "10", "--out", "{d}/w.json"], "is a folder"),
    ("sweep-repeats-0", ["longtail", "sweep", "--labels", "{d}/pred.npz", "--train-counts", "{d}/counts.json",
                         "--test-imbalance", "10", "--repeats", "0", "--out", "{d}/w.json"], "--repeats"),
    ("sweep-points-0", ["longtail", "sweep", "--labels", "{d}/pred.npz", "--train-counts", "{d}/counts.json",
                        "--test-imbalance", "10", "--points", "0", "--out", "{d}/w.json"], "--points"),
    ("sweep-seed-neg", ["longtail", "sweep", "--labels", "{d}/pred.npz", "--train-counts", "{d}/counts.json",
                        "--test-imbalance", "10", "--seed", "-1", "--out", "{d}/w.json"], "--seed"),
    ("sweep-out-folder", ["longtail", "sweep", "--labels", "{d}/pred.npz", "--train-counts", "{d}/counts.json",
                          "--test-imbalance", "10", "--out", "{d}/folder"], "is a folder"),
    ("score-pred-longer", ["longtail", "score", "--predictions", "{d}/pred_long.npz", "--sweep", "{d}/sweep.json"],
     "longer"),
    ("score-pred-shorter", ["longtail", "score", "--predictions", "{d}/pred_short.npz", "--sweep", "{d}/sweep.json"],
     "shorter"),
    ("score-pred-more-classes", ["longtail", "score", "--predictions", "{d}/pred5.npz", "--sweep", "{d}/sweep.json"],
     "predictions"),
    ("score-pred-pickle", ["longtail", "score", "--predictions", "{d}/pickle.npz", "--sweep", "{d}/sweep.json"],
     "pickle.npz"),
    ("score-pred-folder", ["longtail", "score", "--predictions", "{d}/folder", "--sweep", "{d}/sweep.json"],
     "is a folder"),
    ("score-pred-missing", ["longtail", "score", "--predictions", "{d}/nope.npz", "--sweep", "{d}/sweep.json"],
     "no such file"),
    ("score-pred-no-kind", ["longtail", "score", "--predictions", "{d}/nolabels.npz", "--sweep", "{d}/sweep.json"],
     "labels"),
    ("score-sweep-folder", ["longtail", "score", "--predictions", "{d}/pred.npz", "--sweep", "{d}/folder"],
     "is a folder"),
    ("score-sweep-edited", ["longtail", "score", "--predictions", "{d}/pred.npz", "--sweep", "{d}/sweep_edited.json"],
     "sha256"),
    ("score-sweep-is-npz", ["longtail", "score", "--predictions", "{d}/pred.npz", "--sweep", "{d}/pred.npz"],
     "pred.npz"),
    ("score-sweep-broken", ["longtail", "score", "--predictions", "{d}/pred.npz", "--sweep", "{d}/broken.json"],
     "JSON"),
    ("score-bootstrap-neg", ["longtail", "score", "--predictions", "{d}/pred.npz", "--sweep", "{d}/sweep.json",
                             "--bootstrap", "-5"], "--bootstrap"),
    ("run-unknown-method", ["longtail", "run", "--data", "digits", "--method", "focall", "--imbalance", "10",
                            "--store", "{d}/lt.sqlite"], "focal"),
    ("run-epochs-0", ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10", "--epochs", "0",
                      "--store", "{d}/lt.sqlite"], "--epochs"),
    ("run-diverges", ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10", "--epochs", "1",
                      "--lr", "1e6", "--no-store"], "--lr: training loss became nan at epoch 1"),
    ("run-foreign-store", ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10",
                           "--store", "{d}/foreign.db"], "another program"),
    ("run-store-folder", ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10",
                          "--store", "{d}/folder"], "is a folder"),
    ("run-batch-0", ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10",
                     "--batch-size", "0", "--store", "{d}/lt.sqlite"], "--batch-size"),
    ("run-lr-neg", ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10",
                    "--lr", "-1", "--store", "{d}/lt.sqlite"], "--lr"),
    ("run-device-typo", ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10",
                         "--device", "gpu", "--store", "{d}/lt.sqlite"], "--device"),
    ("run-unknown-model", ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10",
                           "--model", "resnet33", "--store", "{d}/lt.sqlite"], "resnet33"),
    ("run-ride-experts-0", ["longtail", "run", "--data", "digits", "--imbalance", "10", "--store", "{d}/lt.sqlite", "--method", "ride", "--method-opt", "num_experts=0"],
     "method_options.num_experts"),
    ("run-tde-heads-0", ["longtail", "run", "--data", "digits", "--imbalance", "10", "--store", "{d}/lt.sqlite", "--method", "tde", "--method-opt", "num_heads=0"],
     "method_options.num_heads"),
    ("run-tde-tau-text", ["longtail", "run", "--data", "digits", "--imbalance", "10", "--store", "{d}/lt.sqlite", "--method", "tde", "--method-opt", "tau=x"],
     "method_options.tau"),
    ("run-tde-alpha-inf", ["longtail", "run", "--data", "digits", "--imbalance", "10", "--store", "{d}/lt.sqlite", "--method", "tde", "--method-opt", "alpha=inf"],
     "method_options.alpha"),
    ("run-tade-tt-batch-0", ["longtail", "run", "--data", "digits", "--imbalance", "10", "--store", "{d}/lt.sqlite", "--method", "tade", "--method-opt", "tt_batch=0"],
     "method_options.tt_batch"),
    ("run-tade-tt-lr-neg", ["longtail", "run", "--data", "digits", "--imbalance", "10", "--store", "{d}/lt.sqlite", "--method", "tade", "--method-opt", "tt_lr=-1"],
     "method_options.tt_lr"),
    ("run-gcl-cls-epochs-neg", ["longtail", "run", "--data", "digits", "--imbalance", "10", "--store", "{d}/lt.sqlite", "--method", "gcl", "--method-opt", "cls_epochs=-1"],
     "method_options.cls_epochs"),
    ("run-method-opt-unknown", ["longtail", "run", "--data", "digits", "--imbalance", "10", "--store", "{d}/lt.sqlite", "--method", "focal", "--method-opt", "gama=1"],
     "method_options.gama"),
    ("run-method-opt-no-value", ["longtail", "run", "--data", "digits", "--imbalance", "10", "--store", "{d}/lt.sqlite", "--method", "focal", "--method-opt", "gamma"],
     "KEY=VALUE"),
    ("run-bbn-batch-1", ["longtail", "run", "--data", "digits", "--imbalance", "10", "--store", "{d}/lt.sqlite", "--method", "bbn", "--batch-size", "1"], "--batch-size"),
    ("run-lr-beyond-float32", ["longtail", "run", "--data", "digits", "--imbalance", "10", "--store", "{d}/lt.sqlite", "--method", "ce", "--lr", "1e308"],
     "--lr: expected a number within float32's range"),
    ("run-drw-epoch-late", ["longtail", "run", "--data", "digits", "--imbalance", "10", "--store", "{d}/lt.sqlite", "--method", "ldam_drw", "--epochs", "2", "--method-opt", "drw_epoch=5"],
     "method_options.drw_epoch: expected a 0-based epoch before epochs=2"),
    ("run-ib-epoch-late", ["longtail", "run", "--data", "digits", "--imbalance", "10", "--store", "{d}/lt.sqlite", "--method", "ib", "--epochs", "2", "--method-opt", "ib_epoch=2"],
     "method_options.ib_epoch"),
    ("run-milestone-late", ["longtail", "run", "--data", "digits", "--imbalance", "10", "--store", "{d}/lt.sqlite", "--method", "ce", "--epochs", "2", "--schedule", "step", "--lr-milestones", "5", "--lr-factors", "0.1"],
     "--lr-milestones: expected 0-based epochs before epochs=2"),
    ("run-reference-recipe-fewer-epochs", ["longtail", "run", "--data", "cifar10:{d}/folder", "--imbalance", "100", "--method", "ldam_drw", "--epochs", "10", "--print-config"],
     "recipe 'reference' sets lr_milestones for its 200 epochs"),
    ("run-config-missing", ["longtail", "run", "--data", "digits", "--imbalance", "10", "--store", "{d}/lt.sqlite", "--method", "ce", "--config", "{d}/nope.yaml"], "nope.yaml"),
    ("run-milestones-no-factors", ["longtail", "run", "--data", "digits", "--imbalance", "10", "--store", "{d}/lt.sqlite", "--method", "ce", "--schedule", "step", "--lr-milestones", "3"],
     "--lr-factors"),
    # ------------------------------------------------------------------ detection
    ("eval-gt-missing", ["detection", "eval", "--gt", "{d}/nope.json", "--results", "{d}/dt.json"], "--gt"),
    ("eval-gt-folder", ["detection", "eval", "--gt", "{d}/folder", "--results", "{d}/dt.json"], "is a folder"),
    ("eval-gt-broken", ["detection", "eval", "--gt", "{d}/broken.json", "--results", "{d}/dt.json"], "malformed JSON"),
    ("eval-gt-is-results", ["detection", "eval", "--gt", "{d}/dt.json", "--results", "{d}/dt.json"], "--gt"),
    ("eval-gt-dup-ids", ["detection", "eval", "--gt", "{d}/gt_dup.json", "--results", "{d}/dt.json"],
     "duplicate annotation ids"),
    ("eval-results-empty", ["detection", "eval", "--gt", "{d}/gt.json", "--results", "{d}/dt_empty.json"],
     "--allow-empty"),
    ("eval-results-object", ["detection", "eval", "--gt", "{d}/gt.json", "--results", "{d}/dt_obj.json"], "--results"),
    ("eval-results-npz", ["detection", "eval", "--gt", "{d}/gt.json", "--results", "{d}/pred.npz"],
     "--results '{d}/pred.npz': an .npz (NumPy) file, expected a COCO/LVIS results JSON file"),
    ("eval-results-npy", ["detection", "eval", "--gt", "{d}/gt.json", "--results", "{d}/array.npy"],
     "a NumPy .npy file, expected a COCO/LVIS results JSON file"),
    ("eval-results-store", ["detection", "eval", "--gt", "{d}/gt.json", "--results", "{d}/store.sqlite"],
     "a SQLite database, expected a COCO/LVIS results JSON file"),
    ("eval-results-gzip", ["detection", "eval", "--gt", "{d}/gt.json", "--results", "{d}/results.json.gz"],
     "gzip-compressed file (decompress it first)"),
    ("eval-gt-npz", ["detection", "eval", "--gt", "{d}/pred.npz", "--results", "{d}/dt.json"],
     "--gt '{d}/pred.npz': an .npz (NumPy) file, expected a COCO/LVIS ground-truth JSON file"),
    ("eval-typo-option", ["detection", "eval", "--gt", "{d}/gt.json", "--results", "{d}/dt.json", "--jsn"],
     "did you mean --json?"),
    ("eval-results-is-gt", ["detection", "eval", "--gt", "{d}/gt.json", "--results", "{d}/gt.json"], "--results"),
    ("eval-results-folder", ["detection", "eval", "--gt", "{d}/gt.json", "--results", "{d}/folder"], "is a folder"),
    ("eval-ap-typo", ["detection", "eval", "--gt", "{d}/gt.json", "--results", "{d}/dt.json", "--ap", "old,fixd"], "--ap"),
    ("eval-dets-per-class-0", ["detection", "eval", "--gt", "{d}/gt.json", "--results", "{d}/dt.json",
                               "--dets-per-class", "0"], "--dets-per-class"),
    ("eval-max-dets-neg", ["detection", "eval", "--gt", "{d}/gt.json", "--results", "{d}/dt.json",
                           "--max-dets-per-image", "-1"], "--max-dets-per-image"),
    ("eval-foreign-store", ["detection", "eval", "--gt", "{d}/gt.json", "--results", "{d}/dt.json",
                            "--store", "{d}/foreign.db"], "another program"),
    ("eval-segm-without-masks", ["detection", "eval", "--gt", "{d}/gt.json", "--results", "{d}/dt.json",
                                 "--iou-type", "segm"], "segm"),
    ("rerank-k-0", ["detection", "rerank", "--results", "{d}/dt.json", "--per-class-topk", "0", "--out", "{d}/r.json"],
     "--per-class-topk"),
    ("rerank-missing", ["detection", "rerank", "--results", "{d}/nope.json", "--per-class-topk", "3",
                        "--out", "{d}/r.json"], "nope.json"),
    ("rerank-out-folder", ["detection", "rerank", "--results", "{d}/dt.json", "--per-class-topk", "3",
                           "--out", "{d}/folder"], "folder"),
    ("calfit-min-samples-neg", ["detection", "calibrate", "fit", "--gt", "{d}/gt.json", "--results", "{d}/dt.json",
                                "--min-samples", "-3", "--out", "{d}/cal.json"], "--min-samples"),
    ("calfit-iou-2", ["detection", "calibrate", "fit", "--gt", "{d}/gt.json", "--results", "{d}/dt.json",
                      "--iou", "2", "--out", "{d}/cal.json"], "--iou"),
    ("calfit-unknown-method", ["detection", "calibrate", "fit", "--gt", "{d}/gt.json", "--results", "{d}/dt.json",
                               "--method", "plat", "--out", "{d}/cal.json"], "did you mean 'platt'"),
    ("calapply-missing", ["detection", "calibrate", "apply", "--calibration", "{d}/nope.json",
                          "--results", "{d}/dt.json", "--out", "{d}/o.json"], "--calibration"),
    ("calapply-bad", ["detection", "calibrate", "apply", "--calibration", "{d}/cal_bad.json",
                      "--results", "{d}/dt.json", "--out", "{d}/o.json"], "--calibration"),
    ("calapply-broken", ["detection", "calibrate", "apply", "--calibration", "{d}/broken.json",
                         "--results", "{d}/dt.json", "--out", "{d}/o.json"], "malformed JSON"),
    ("errors-gt-missing", ["detection", "errors", "--gt", "{d}/nope.json", "--results", "{d}/dt.json"], "--gt"),
    ("errors-results-is-gt", ["detection", "errors", "--gt", "{d}/gt.json", "--results", "{d}/gt.json"], "--results"),
    ("errors-ap-typo", ["detection", "errors", "--gt", "{d}/gt.json", "--results", "{d}/dt.json", "--ap", "tide,fixd"], "--ap"),
    ("errors-bg-above-pos", ["detection", "errors", "--gt", "{d}/gt.json", "--results", "{d}/dt.json", "--bg-iou", "0.8"],
     "--bg-iou: expected at most --pos-iou"),
    ("errors-segm-without-masks", ["detection", "errors", "--gt", "{d}/gt.json", "--results", "{d}/dt.json",
                                   "--iou-type", "segm"], "segmentation"),
    ("operating-iou-off-grid", ["detection", "operating", "--gt", "{d}/gt.json", "--results", "{d}/dt.json",
                                "--iou", "0.33"], "--iou: expected one of the evaluator's thresholds"),
    ("operating-results-empty", ["detection", "operating", "--gt", "{d}/gt.json", "--results", "{d}/dt_empty.json"],
     "empty"),
    ("confusion-iou-0", ["detection", "confusion", "--gt", "{d}/gt.json", "--results", "{d}/dt.json", "--iou", "0"],
     "--iou: expected a number in (0, 1]"),
    ("confusion-gt-broken", ["detection", "confusion", "--gt", "{d}/broken.json", "--results", "{d}/dt.json"],
     "malformed JSON"),
    ("eval-per-class-pool-only", ["detection", "eval", "--gt", "{d}/gt.json", "--results", "{d}/dt.json", "--ap", "pool",
                                  "--per-class"], "--per-class: per-category results need AP^Old or AP^Fixed"),
    ("synth-images-0", ["detection", "synth", "--out", "{d}/syn", "--images", "0"], "--images"),
    ("synth-categories-neg", ["detection", "synth", "--out", "{d}/syn", "--categories", "-2"], "--categories"),
    ("synth-dets-0", ["detection", "synth", "--out", "{d}/syn", "--dets-per-image", "0"], "--dets-per-image"),
    ("synth-out-is-file", ["detection", "synth", "--out", "{d}/text.txt"], "text.txt"),
    # ------------------------------------------------------------------ incremental
    ("score-matrix-strings", ["incremental", "score", "--matrix", "{d}/matrix_str.json", "--base-classes", "6",
                              "--way", "2"], "'0.9'"),
    ("score-matrix-percent", ["incremental", "score", "--matrix", "{d}/matrix_pct.json", "--base-classes", "6",
                              "--way", "2"], "percentages"),
    ("score-matrix-ragged", ["incremental", "score", "--matrix", "{d}/matrix_ragged.json", "--base-classes", "6",
                             "--way", "2"], "row 2"),
    ("score-matrix-list", ["incremental", "score", "--matrix", "{d}/matrix_list.json", "--base-classes", "6",
                           "--way", "2"], "'matrix'"),
    ("score-matrix-missing", ["incremental", "score", "--matrix", "{d}/nope.json", "--base-classes", "6",
                              "--way", "2"], "--matrix"),
    ("score-matrix-folder", ["incremental", "score", "--matrix", "{d}/folder", "--base-classes", "6",
                             "--way", "2"], "is a folder"),
    ("score-matrix-no-way", ["incremental", "score", "--matrix", "{d}/matrix.json"], "--base-classes"),
    ("score-matrix-way-0", ["incremental", "score", "--matrix", "{d}/matrix.json", "--base-classes", "6",
                            "--way", "0"], "way"),
    ("score-alphas-0", ["incremental", "score", "--matrix", "{d}/matrix.json", "--base-classes", "6",
                        "--way", "2", "--alphas", "0"], "alphas"),
    ("score-matrix-and-preds", ["incremental", "score", "--matrix", "{d}/matrix.json", "--predictions",
                                "{d}/pred.npz"], "not allowed"),
    ("score-preds-no-sessions", ["incremental", "score", "--predictions", "{d}/pred.npz"], "--sessions"),
    ("score-sessions-folder", ["incremental", "score", "--predictions", "{d}/pred.npz", "--sessions", "{d}/folder"],
     "is a folder"),
    ("score-record-foreign", ["incremental", "score", "--matrix", "{d}/matrix.json", "--base-classes", "6",
                              "--way", "2", "--method", "m", "--store", "{d}/foreign.db"], "another program"),
    ("sessions-no-layout", ["incremental", "sessions", "--data", "digits", "--out", "{d}/s.json"], "--preset"),
    ("sessions-preset-typo", ["incremental", "sessions", "--data", "digits", "--preset", "cifar10",
                              "--out", "{d}/s.json"], "cifar100"),
    ("sessions-way-0", ["incremental", "sessions", "--data", "digits", "--base-classes", "4", "--way", "0",
                        "--shot", "5", "--out", "{d}/s.json"], "way"),
    ("sessions-shot-neg", ["incremental", "sessions", "--data", "digits", "--base-classes", "4", "--way", "2",
                           "--shot", "-5", "--out", "{d}/s.json"], "shot"),
    ("sessions-too-many-classes", ["incremental", "sessions", "--data", "digits", "--base-classes", "40", "--way", "2",
                                   "--shot", "5", "--out", "{d}/s.json"], "base"),
    ("sessions-index-lists-missing", ["incremental", "sessions", "--data", "digits", "--index-lists", "{d}/nope",
                                      "--out", "{d}/s.json"], "nope"),
    ("inc-run-unknown-method", ["incremental", "run", "--data", "digits", "--base-classes", "4", "--way", "2",
                                "--shot", "5", "--method", "protoype", "--out", "{d}/ir",
                                "--store", "{d}/inc.sqlite"], "prototype"),
    ("inc-run-sessions-missing", ["incremental", "run", "--data", "digits", "--sessions", "{d}/nope.json",
                                  "--method", "prototype", "--out", "{d}/ir", "--store", "{d}/inc.sqlite"], "nope.json"),
    ("inc-run-epochs-0", ["incremental", "run", "--data", "digits", "--base-classes", "4", "--way", "2", "--shot", "5",
                          "--method", "prototype", "--epochs", "0", "--out", "{d}/ir", "--store", "{d}/inc.sqlite"],
     "--epochs"),
    ("inc-run-novel-epochs-0", ["incremental", "run", "--data", "digits", "--base-classes", "4", "--way", "2",
                                "--shot", "5", "--method", "finetune", "--novel-epochs", "0", "--out", "{d}/ir",
                                "--store", "{d}/inc.sqlite"], "--novel-epochs"),
    ("inc-run-novel-lr-neg", ["incremental", "run", "--data", "digits", "--base-classes", "4", "--way", "2",
                              "--shot", "5", "--method", "finetune", "--novel-lr", "-1", "--out", "{d}/ir",
                              "--store", "{d}/inc.sqlite"], "--novel-lr"),
    ("inc-run-sessions-and-layout", ["incremental", "run", "--data", "digits", "--sessions", "{d}/x.json",
                                     "--base-classes", "4", "--method", "prototype", "--out", "{d}/ir",
                                     "--store", "{d}/inc.sqlite"], "--sessions"),
    ("sessions-num-sessions-0", ["incremental", "sessions", "--data", "digits", "--base-classes", "4", "--way", "2",
                                 "--shot", "5", "--num-sessions", "0", "--out", "{d}/s.json"], "--num-sessions"),
    ("reference-base-0", ["incremental", "reference", "--base-classes", "0", "--way", "2", "--num-sessions", "3"],
     "--base-classes"),
    ("reference-incomplete", ["incremental", "reference", "--base-classes", "60"], "--way"),
    ("reference-acc-2", ["incremental", "reference", "--preset", "cifar100", "--base-accuracy", "2"], "base"),
    ("reference-preset-typo", ["incremental", "reference", "--preset", "cifar"], "cifar"),
    # incremental run: config fields and method/model options (issues 20, 24)
    ("inc-run-model-opt-not-int", ["incremental", "run", "--data", "digits", "--base-classes", "4", "--way", "2",
                                   "--shot", "5", "--method", "fr", "--model-opt", "dim=abc", "--no-store"],
     "--model-opt: dim: expected an integer"),
    ("inc-run-patch-too-large", ["incremental", "run", "--data", "digits", "--base-classes", "4", "--way", "2",
                                 "--shot", "5", "--method", "fr", "--model-opt", "patch_size=16", "--no-store",
                                 "--out", "{d}/ir"], "--model-opt: patch_size: 16 is larger than the 8-pixel images"),
    ("inc-run-model-opt-unknown", ["incremental", "run", "--data", "digits", "--base-classes", "4", "--way", "2",
                                   "--shot", "5", "--method", "prototype", "--model-opt", "widht=8", "--no-store"],
     "did you mean width"),
    ("inc-run-method-opt-unknown", ["incremental", "run", "--data", "digits", "--base-classes", "4", "--way", "2",
                                    "--shot", "5", "--method", "fr", "--method-opt", "kl=1", "--no-store"],
     "method_options.kl: unknown option"),
    ("inc-run-method-opt-prototype", ["incremental", "run", "--data", "digits", "--base-classes", "4", "--way", "2",
                                      "--shot", "5", "--method", "prototype", "--method-opt", "cr=1", "--no-store"],
     "method_options.cr: unknown option"),
    ("inc-run-preset-typo", ["incremental", "run", "--data", "digits", "--preset", "cub", "--method", "fr",
                             "--print-config"], "--preset: expected one of"),
    ("inc-run-schedule-typo", ["incremental", "run", "--data", "digits", "--preset", "cifar100", "--method", "fr",
                               "--schedule", "cosin", "--print-config"], "did you mean 'cosine'"),
    ("inc-run-config-missing", ["incremental", "run", "--config", "{d}/nope.yaml"], "nope.yaml"),
    ("inc-run-no-method", ["incremental", "run", "--data", "digits", "--preset", "cifar100", "--print-config"],
     "--method: required"),
    # ------------------------------------------------------------------ smalldata
    ("sd-unknown-dataset", ["smalldata", "splits", "--dataset", "digit", "--out", "{d}/sd"], "digits"),
    ("sd-per-class-0", ["smalldata", "splits", "--dataset", "digits", "--per-class", "0", "--out", "{d}/sd"],
     "--per-class"),
    ("sd-root-missing", ["smalldata", "splits", "--dataset", "eurosat", "--out", "{d}/sd"], "--root"),
    ("sd-dataset-folder-missing", ["smalldata", "run", "--dataset", "folder:{d}/nope", "--method", "ce", "--no-store"],
     "--dataset 'folder:{d}/nope': no such folder '{d}/nope'"),
    ("sd-dataset-folder-is-file", ["smalldata", "splits", "--dataset", "folder:{d}/text.txt", "--out", "{d}/sd"],
     "--dataset 'folder:{d}/text.txt': '{d}/text.txt' is a file, expected a folder"),
    ("sd-dataset-bare-path", ["smalldata", "run", "--dataset", "{d}/cifar-10-batches-py", "--method", "ce", "--no-store"],
     "a path needs its preset as a prefix: folder:{d}/cifar-10-batches-py"),
    ("sd-out-is-file", ["smalldata", "splits", "--dataset", "digits", "--out", "{d}/text.txt"], "text.txt"),
    ("sd-split-val-fraction", ["smalldata", "split", "--dataset", "digits", "--val-fraction", "1.5",
                               "--out", "{d}/sd"], "--val-fraction"),
    ("sd-split-train-per-class-0", ["smalldata", "split", "--dataset", "digits", "--train-per-class", "0",
                                    "--out", "{d}/sd"], "--train-per-class"),
    ("sd-tune-score-window-0", ["smalldata", "tune", "--dataset", "digits", "--method", "ce", "--score-window", "0",
                                "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "--score-window"),
    ("sd-tune-trials-0", ["smalldata", "tune", "--dataset", "digits", "--method", "ce", "--trials", "0",
                          "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "--trials"),
    ("sd-tune-epochs-0", ["smalldata", "tune", "--dataset", "digits", "--method", "ce", "--epochs", "0",
                          "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "--epochs"),
    ("sd-tune-grace", ["smalldata", "tune", "--dataset", "digits", "--method", "ce", "--epochs", "2",
                       "--grace-period", "5", "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "--epochs"),
    ("sd-tune-eta-1", ["smalldata", "tune", "--dataset", "digits", "--method", "ce", "--reduction-factor", "1",
                       "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "--reduction-factor"),
    ("sd-tune-space-unknown", ["smalldata", "tune", "--dataset", "digits", "--method", "ce", "--space",
                               '{"lrr": {"loguniform": [0.001, 0.1]}}', "--work-dir", "{d}/w",
                               "--store", "{d}/sd.sqlite"], "did you mean 'lr'"),
    ("sd-tune-space-json", ["smalldata", "tune", "--dataset", "digits", "--method", "ce", "--space", '{"lr": ',
                            "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "--space"),
    ("sd-tune-space-list", ["smalldata", "tune", "--dataset", "digits", "--method", "ce", "--space",
                            "{d}/space_list.json", "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "--space"),
    ("sd-tune-space-missing", ["smalldata", "tune", "--dataset", "digits", "--method", "ce", "--space",
                               "{d}/nope.json", "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "--space"),
    ("sd-tune-batch-0", ["smalldata", "tune", "--dataset", "digits", "--method", "ce", "--batch-sizes", "0",
                         "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "--batch-sizes"),
    ("sd-tune-unknown-method", ["smalldata", "tune", "--dataset", "digits", "--method", "cee",
                                "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "cee"),
    ("sd-final-repeats-0", ["smalldata", "final", "--dataset", "digits", "--method", "ce", "--repeats", "0",
                            "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "--repeats"),
    ("sd-final-no-tune", ["smalldata", "final", "--dataset", "digits", "--method", "ce",
                          "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "tune"),
    ("sd-run-split-neg", ["smalldata", "run", "--dataset", "digits", "--method", "ce", "--split", "-1",
                          "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "--split"),
    ("sd-run-final-epochs-0", ["smalldata", "run", "--dataset", "digits", "--method", "ce", "--final-epochs", "0",
                               "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "--final-epochs"),
    ("sd-run-splits-missing", ["smalldata", "run", "--dataset", "digits", "--method", "ce", "--splits", "{d}/nope",
                               "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "nope"),
    ("sd-table-foreign", ["smalldata", "table", "--store", "{d}/foreign.db"], "another program"),
    ("sd-table-missing", ["smalldata", "table", "--store", "{d}/nope.sqlite"], "nope.sqlite"),
    ("sd-list-extra", ["smalldata", "list", "--format", "x"], "unrecognized"),
    ("sd-tvmf-kappa-neg", ["smalldata", "run", "--dataset", "digits", "--method", "tvmf", "--method-opt",
                           "kappa=-1", "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "method_options.kappa"),
    ("sd-tvmf-kappa-range-neg", ["smalldata", "run", "--dataset", "digits", "--method", "tvmf", "--space",
                                 '{"kappa": {"uniform": [-4, 8]}}', "--work-dir", "{d}/w",
                                 "--store", "{d}/sd.sqlite"], "space.kappa: expected values >= 0"),
    ("sd-ole-weight-neg", ["smalldata", "run", "--dataset", "digits", "--method", "ole", "--method-opt",
                           "ole_weight=-0.5", "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"],
     "method_options.ole_weight"),
    ("sd-auxgrad-every-0", ["smalldata", "run", "--dataset", "digits", "--method", "auxilearn", "--method-opt",
                            "auxgrad_every=0", "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"],
     "method_options.auxgrad_every"),
    ("sd-scattering-j-0", ["smalldata", "run", "--dataset", "digits", "--method", "dhn", "--method-opt",
                           "scattering_J=0", "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"],
     "method_options.scattering_J"),
    ("sd-dskn-vit", ["smalldata", "run", "--dataset", "digits", "--method", "dskn", "--model", "vit_small",
                     "--trials", "1", "--epochs", "1", "--repeats", "1", "--work-dir", "{d}/w",
                     "--store", "{d}/sd.sqlite"], "--model: method 'dskn' changes a convolutional backbone"),
    ("sd-dhn-vit", ["smalldata", "run", "--dataset", "digits", "--method", "dhn", "--model", "vit_small", "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "'vit_small' is not one"),
    ("sd-harmonic-vit", ["smalldata", "run", "--dataset", "digits", "--method", "harmonic", "--model", "vit_small", "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "'vit_small' is not one"),
    ("sd-space-range-text", ["smalldata", "run", "--dataset", "digits", "--method", "ce", "--space", '{"lr": {"uniform": ["a", 1]}}', "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "space.lr: uniform expects two numbers"),
    ("sd-space-int-inf", ["smalldata", "run", "--dataset", "digits", "--method", "dhn", "--space", '{"scattering_J": {"choice": [Infinity]}}', "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "space.scattering_J: expected finite numbers"),
    ("sd-space-nan", ["smalldata", "run", "--dataset", "digits", "--method", "tvmf", "--space", '{"kappa": {"choice": [NaN]}}', "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "space.kappa: expected finite numbers"),
    ("sd-space-wd-neg", ["smalldata", "run", "--dataset", "digits", "--method", "ce", "--space", '{"weight_decay": {"uniform": [-1, 1]}}', "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "space.weight_decay: expected values >= 0"),
    ("sd-space-batch-0", ["smalldata", "run", "--dataset", "digits", "--method", "ce", "--space", '{"batch_size": {"choice": [0, 8]}}', "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"], "space.batch_size: expected values >= 1"),
    ("sd-ray-address-dead", ["smalldata", "run", "--dataset", "digits", "--method", "ce", "--engine", "ray",
                             "--ray-address", "127.0.0.1:1", "--work-dir", "{d}/w", "--store", "{d}/sd.sqlite"],
     "--ray-address: nothing answers at '127.0.0.1:1'"),
    # ------------------------------------------------------------------ stream
    ("stream-show-typo", ["stream", "show", "nevis-shrot"], "nevis-short"),
    ("stream-show-folder", ["stream", "show", "{d}/folder"], "is a folder"),
    ("stream-show-bad-yaml", ["stream", "show", "{d}/bad.yaml"], "malformed YAML"),
    ("stream-show-yaml-list", ["stream", "show", "{d}/list.yaml"], "mapping"),
    ("stream-show-missing", ["stream", "show", "{d}/nope.json"], "nope.json"),
    ("stream-show-broken-json", ["stream", "show", "{d}/broken.json"], "malformed JSON"),
    ("stream-run-max-tasks-0", ["stream", "run", "--stream", "embedded", "--learner", "indep", "--max-tasks", "0",
                                "--work-dir", "{d}/sw", "--store", "{d}/st.sqlite"], "--max-tasks"),
    ("stream-run-width-0", ["stream", "run", "--stream", "embedded", "--learner", "indep", "--width", "0",
                            "--work-dir", "{d}/sw", "--store", "{d}/st.sqlite"], "--width"),
    ("stream-run-trials-0", ["stream", "run", "--stream", "embedded", "--learner", "indep", "--trials", "0",
                             "--work-dir", "{d}/sw", "--store", "{d}/st.sqlite"], "--trials"),
    ("stream-run-steps-neg", ["stream", "run", "--stream", "embedded", "--learner", "indep", "--steps", "-1",
                              "--work-dir", "{d}/sw", "--store", "{d}/st.sqlite"], "--steps"),
    ("stream-run-threads-0", ["stream", "run", "--stream", "embedded", "--learner", "indep", "--threads", "0",
                              "--work-dir", "{d}/sw", "--store", "{d}/st.sqlite"], "--threads"),
    ("stream-run-learner-typo", ["stream", "run", "--stream", "embedded", "--learner", "indp",
                                 "--work-dir", "{d}/sw", "--store", "{d}/st.sqlite"], "indep"),
    ("stream-run-meta-test-late", ["stream", "run", "--stream", "embedded", "--learner", "indep",
                                   "--meta-test-from", "2100", "--work-dir", "{d}/sw", "--store", "{d}/st.sqlite"],
     "--meta-test-from"),
    ("stream-run-pt-no-ckpt", ["stream", "run", "--stream", "embedded", "--learner", "pt",
                               "--work-dir", "{d}/sw", "--store", "{d}/st.sqlite"], "--checkpoint"),
    ("stream-run-pt-text-ckpt", ["stream", "run", "--stream", "embedded", "--learner", "pt", "--checkpoint",
                                 "{d}/text.txt", "--work-dir", "{d}/sw", "--store", "{d}/st.sqlite"],
     "not a weights-only state dict"),
    ("stream-run-pt-ckpt-folder", ["stream", "run", "--stream", "embedded", "--learner", "pt", "--checkpoint",
                                   "{d}/folder", "--work-dir", "{d}/sw", "--store", "{d}/st.sqlite"], "is a folder"),
    ("stream-run-data-root-file", ["stream", "run", "--stream", "embedded", "--learner", "indep", "--data-root",
                                   "{d}/text.txt", "--work-dir", "{d}/sw", "--store", "{d}/st.sqlite"], "--data-root"),
    ("stream-run-foreign-store", ["stream", "run", "--stream", "embedded", "--learner", "indep",
                                  "--work-dir", "{d}/sw", "--store", "{d}/foreign.db"], "another program"),
    ("stream-run-arch-typo", ["stream", "run", "--stream", "embedded", "--learner", "indep", "--arch", "resnet99",
                              "--work-dir", "{d}/sw", "--store", "{d}/st.sqlite"], "resnet99"),
    ("stream-run-stream-folder", ["stream", "run", "--stream", "{d}/folder", "--learner", "indep",
                                  "--work-dir", "{d}/sw", "--store", "{d}/st.sqlite"], "is a folder"),
    ("stream-run-id-path", ["stream", "run", "--stream", "embedded", "--learner", "indep", "--run-id", "../x", "--no-store"], "--run-id: expected a name"),
    ("stream-run-id-empty", ["stream", "run", "--stream", "embedded", "--learner", "indep", "--run-id", "", "--no-store"], "--run-id: expected a name"),
    ("stream-report-unknown-run", ["stream", "report", "nosuchrun", "--store", "{d}/store.sqlite"], "nosuchrun"),
    ("pretrain-steps-0", ["stream", "pretrain", "--stream", "embedded", "--out", "{d}/pt.pt", "--steps", "0"],
     "--steps"),
    ("pretrain-width-0", ["stream", "pretrain", "--stream", "embedded", "--out", "{d}/pt.pt", "--width", "0"],
     "--width"),
    ("pretrain-out-folder", ["stream", "pretrain", "--stream", "embedded", "--out", "{d}/folder", "--steps", "1"],
     "is a folder"),
    ("pretrain-out-no-parent", ["stream", "pretrain", "--stream", "embedded", "--out", "{d}/nope/pt.pt"],
     "does not exist"),
    ("pretrain-preset-typo", ["stream", "pretrain", "--stream", "nevis-short", "--out", "{d}/pt.pt",
                              "--meta-test-from", "papr"], "papr"),
    ("stream-report-missing", ["stream", "report", "--store", "{d}/nope.sqlite"], "nope.sqlite"),
    ("stream-report-foreign", ["stream", "report", "--store", "{d}/foreign.db"], "another program"),
    ("stream-report-empty", ["stream", "report", "--store", "{d}/store.sqlite"], "no stream runs"),
    ("stream-list-extra", ["stream", "list", "--store", "x"], "unrecognized"),
    # ------------------------------------------------------------------ the unified verbs
    ("lt-table-foreign", ["longtail", "table", "--store", "{d}/foreign.db"], "another program"),
    ("lt-table-newer", ["longtail", "table", "--store", "{d}/newer.sqlite"], "newer vistabench"),
    ("det-split-gt-folder", ["detection", "split", "--gt", "{d}/folder", "--out", "{d}/ds.json"], "is a folder"),
    ("det-split-gt-is-results", ["detection", "split", "--gt", "{d}/dt.json", "--out", "{d}/ds.json"],
     "a results file?"),
    ("det-score-split-is-sweep", ["detection", "score", "--gt", "{d}/gt.json", "--results", "{d}/dt.json",
                                  "--split", "{d}/sweep.json", "--no-store"], "expected kind"),
    ("det-split-fraction", ["detection", "split", "--gt", "{d}/gt.json", "--calibration-fraction", "1.5",
                            "--out", "{d}/ds.json"], "--calibration-fraction"),
    ("det-score-empty", ["detection", "score", "--gt", "{d}/gt.json", "--results", "{d}/dt_empty.json",
                         "--no-store"], "--allow-empty"),
    ("det-score-foreign-store", ["detection", "score", "--gt", "{d}/gt.json", "--results", "{d}/dt.json",
                                "--store", "{d}/foreign.db"], "another program"),
    ("det-score-split-missing", ["detection", "score", "--gt", "{d}/gt.json", "--results", "{d}/dt.json",
                                 "--split", "{d}/nope.json", "--no-store"], "nope.json"),
    ("det-run-calibrate-no-split", ["detection", "run", "--gt", "{d}/gt.json", "--results", "{d}/dt.json",
                                    "--calibrate", "platt", "--no-store"], "--split"),
    ("det-run-gt-dup", ["detection", "run", "--gt", "{d}/gt_dup.json", "--results", "{d}/dt.json", "--no-store"],
     "duplicate annotation ids"),
    ("det-table-corrupt", ["detection", "table", "--store", "{d}/corrupt.sqlite"], "corrupt"),
    ("inc-split-way-0", ["incremental", "split", "--data", "digits", "--base-classes", "4", "--way", "0",
                         "--shot", "5", "--out", "{d}/s.json"], "way"),
    ("inc-table-text", ["incremental", "table", "--store", "{d}/text.txt"], "not a SQLite"),
    ("sd-split-per-class-0", ["smalldata", "split", "--dataset", "digits", "--per-class", "0", "--out", "{d}/sd"],
     "--per-class"),
    ("sd-score-pickle", ["smalldata", "score", "--predictions", "{d}/pickle.npz", "--dataset", "digits",
                         "--splits", "{d}/folder", "--split", "0", "--no-store"], "--splits"),
    ("sd-score-split-neg", ["smalldata", "score", "--predictions", "{d}/pred.npz", "--dataset", "digits",
                            "--splits", "{d}/folder", "--split", "-1", "--no-store"], "--split"),
    ("stream-split-meta-test", ["stream", "split", "--stream", "embedded", "--meta-test-from", "2100",
                                "--out", "{d}/ss.json"], "--meta-test-from"),
    ("stream-split-bad-yaml", ["stream", "split", "--stream", "{d}/bad.yaml", "--out", "{d}/ss.json"],
     "malformed YAML"),
    ("stream-score-events-broken", ["stream", "score", "--events", "{d}/broken.json", "--stream", "embedded",
                                    "--no-store"], "malformed JSON"),
    ("stream-score-events-folder", ["stream", "score", "--events", "{d}/folder", "--stream", "embedded",
                                    "--no-store"], "is a folder"),
    ("stream-table-foreign", ["stream", "table", "--store", "{d}/foreign_app.db"], "another program"),
    # ------------------------------------------------------------------ grid
    ("export-missing-store", ["export", "tensorboard", "--store", "{d}/nope.sqlite"], "no such results store"),
    ("export-protocol-typo", ["export", "mlflow", "--store", "{d}/nope.sqlite", "--protocol", "longtial"],
     "did you mean 'longtail'"),
    ("run-track-typo", ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10", "--track", "mlfow",
                        "--no-store"], "--track: expected one of mlflow, tensorboard, wandb, got 'mlfow'; did you mean 'mlflow'"),
    ("run-track-dir-alone", ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10",
                             "--track-dir", "{d}/tb", "--no-store"], "--track-dir: TensorBoard's log folder"),
    ("grid-run-bad-yaml", ["grid", "run", "{d}/bad.yaml", "--no-store"], "YAML"),
    ("grid-run-folder", ["grid", "run", "{d}/folder", "--no-store"], "is a folder"),
    ("grid-run-missing", ["grid", "run", "{d}/nope.yaml", "--no-store"], "nope.yaml"),
    ("grid-run-protocol-typo", ["grid", "run", "{d}/grid_typo.yaml", "--no-store"], "did you mean 'longtail'"),
    ("grid-run-option-typo", ["grid", "run", "{d}/grid_option.yaml", "--no-store"], "methd"),
    ("grid-gpus-per-cell-nan", ["grid", "run", "{d}/grid_good.yaml", "--store", "{d}/g.sqlite", "--engine", "ray", "--gpus-per-cell", "nan"], "--gpus-per-cell: expected a finite number >= 0"),
    ("grid-status-list", ["grid", "status", "{d}/list.yaml"], "list.yaml"),
    ("grid-status-text", ["grid", "status", "{d}/text.txt"], "text.txt"),
    ("grid-table-protocol-typo", ["grid", "table", "{d}/grid_typo.yaml", "--store", "{d}/store.sqlite"],
     "unknown protocol 'longtial'"),
    # ------------------------------------------------------------------ stats
    ("welch-strings", ["stats", "welch", "--a", "{d}/a_str.json", "--b", "{d}/a.json"], "--a"),
    ("welch-missing", ["stats", "welch", "--a", "{d}/a.json", "--b", "{d}/nope.json"], "--b"),
    ("welch-folder", ["stats", "welch", "--a", "{d}/folder", "--b", "{d}/a.json"], "is a folder"),
    ("welch-broken", ["stats", "welch", "--a", "{d}/broken.json", "--b", "{d}/a.json"], "malformed JSON"),
    ("welch-npz", ["stats", "welch", "--a", "{d}/pred.npz", "--b", "{d}/a.json"], "--a '{d}/pred.npz': an .npz (NumPy) file"),
    ("welch-object", ["stats", "welch", "--a", "{d}/counts_obj.json", "--b", "{d}/a.json"], "list of numbers"),
    ("welch-alternative", ["stats", "welch", "--a", "{d}/a.json", "--b", "{d}/a.json", "--alternative", "les"],
     "--alternative"),
]


def _run(capsys, argv):
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own errors
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("argv,expect", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_user_mistake_is_one_line(capsys, d, argv, expect):
    argv = [a.replace("{d}", str(d)) for a in argv]
    rc, out, err = _run(capsys, argv)
    assert rc == USER_ERROR, (rc, err[-2000:])
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "error:" in lines[0], lines[0]
    assert expect.replace("{d}", str(d)) in lines[0], lines[0]


def test_catalogue_covers_every_sub_command():
    from vistabench.cli import build_parser
    from vistabench.cli.verbs import walk

    covered = {tuple(a for a in c[1] if not a.startswith("-") and "{d}" not in a) for c in CASES}
    missing = [" ".join(leaf) for leaf, _ in walk(build_parser(), aliases=True)
               if not any(c[:len(leaf)] == leaf for c in covered)]
    assert not missing, missing
    assert len(CASES) >= 100


# ---------------------------------------------------------------------- detection masks (issue 24)
@pytest.fixture(scope="module")
def dm(tmp_path_factory):
    """A small segm set and copies with one malformed mask each (results or ground truth)."""
    import copy

    from vistabench.data.detection_synth import synth_detection_set

    t = tmp_path_factory.mktemp("masks")
    syn = synth_detection_set(num_images=4, num_categories=3, dets_per_image=3, seed=0, masks=True)
    (t / "gt.json").write_text(json.dumps(syn.ground_truth))
    (t / "dt.json").write_text(json.dumps(syn.results))
    for name, segm in MASK_RESULTS.items():
        res = copy.deepcopy(syn.results)
        if segm is None:
            del res[2]["segmentation"]
        else:
            res[2]["segmentation"] = segm
        (t / f"dt_{name}.json").write_text(json.dumps(res))
    for name, (segm, image) in MASK_GT.items():
        gt = copy.deepcopy(syn.ground_truth)
        if segm is None:
            del gt["annotations"][3]["segmentation"]
        else:
            gt["annotations"][3]["segmentation"] = segm
        img = next(im for im in gt["images"] if im["id"] == gt["annotations"][3]["image_id"])
        img.update(image)
        (t / f"gt_{name}.json").write_text(json.dumps(gt))
    return t


MASK_RESULTS = {
    "nosize": {"counts": "PPYo1"}, "negative": {"size": [480, 640], "counts": [-5, 480 * 640 + 5]},
    "poly3": [[1.0, 2.0, 3.0]], "string": "PPYo1", "missing": None,
    "othersize": {"size": [240, 320], "counts": [240 * 320]}, "garbage": {"size": [480, 640], "counts": "~~\x01 "},
    "badsum": {"size": [480, 640], "counts": "PPYo1"},
}
MASK_GT = {"poly3": ([[1, 2, 3]], {}), "string": ("abc", {}), "missing": (None, {}),
           "othersize": ({"size": [480, 640], "counts": [480 * 640]}, {"height": 100})}
_SEGM = ["detection", "eval", "--iou-type", "segm", "--gt"]
MASK_CASES = [
    ("mask-rle-without-size", _SEGM + ["{m}/gt.json", "--results", "{m}/dt_nosize.json"], "detection 2, segmentation: an RLE object needs 'size'"),
    ("mask-negative-counts", _SEGM + ["{m}/gt.json", "--results", "{m}/dt_negative.json"], "segmentation.counts: negative count"),
    ("mask-3-number-polygon", _SEGM + ["{m}/gt.json", "--results", "{m}/dt_poly3.json"], "detection 2, segmentation[0]"),
    ("mask-string", _SEGM + ["{m}/gt.json", "--results", "{m}/dt_string.json"], "got a str"),
    ("mask-undecodable", _SEGM + ["{m}/gt.json", "--results", "{m}/dt_garbage.json"], "undecodable compressed RLE"),
    ("mask-counts-sum", _SEGM + ["{m}/gt.json", "--results", "{m}/dt_badsum.json"], "not h*w"),
    ("mask-gt-3-number-polygon", _SEGM + ["{m}/gt_poly3.json", "--results", "{m}/dt.json"], "annotation 3, segmentation[0]"),
    ("mask-gt-string", _SEGM + ["{m}/gt_string.json", "--results", "{m}/dt.json"], "annotation 3, segmentation: "),
    ("mask-gt-missing", _SEGM + ["{m}/gt_missing.json", "--results", "{m}/dt.json"], "annotation 3 (id 4) lacks"),
    ("mask-rerank-undecodable", ["detection", "rerank", "--results", "{m}/dt_garbage.json", "--per-class-topk", "2",
                                 "--out", "{m}/r.json"], "undecodable compressed RLE"),
]


MASK_ACCEPTED = [  # pycocotools scores these (issue 40): scored the same, with one warning line
    ("mask-missing", _SEGM + ["{m}/gt.json", "--results", "{m}/dt_missing.json"],
     "1 result(s) without 'segmentation' are scored as the rectangles of their boxes"),
    ("mask-other-size", _SEGM + ["{m}/gt.json", "--results", "{m}/dt_othersize.json"],
     "1 mask(s) of another size than their image (first: detection 2's mask is [240, 320]"),
    ("mask-gt-other-size", _SEGM + ["{m}/gt_othersize.json", "--results", "{m}/dt.json"],
     "mask(s) of another size than their image (first: annotation 3's mask is [480, 640]"),
    ("mask-calfit-other-size", ["detection", "calibrate", "fit", "--iou-type", "segm", "--gt", "{m}/gt.json",
                                "--results", "{m}/dt_othersize.json", "--out", "{m}/c.json"],
     "mask(s) of another size than their image"),
]


@pytest.mark.parametrize("argv,expect", [c[1:] for c in MASK_ACCEPTED], ids=[c[0] for c in MASK_ACCEPTED])
def test_mask_input_pycocotools_scores_is_scored_with_a_warning(capsys, dm, argv, expect):
    rc, out, err = _run(capsys, [a.replace("{m}", str(dm)) for a in argv])
    # calibrate fit reads the masks, then finds this tiny set has no false positive to fit on
    assert rc == 0 or (argv[1] == "calibrate" and rc == USER_ERROR and "fitting set needs" in err), (rc, err[-2000:])
    assert "Traceback" not in err and expect in err, err


@pytest.mark.parametrize("argv,expect", [c[1:] for c in MASK_CASES], ids=[c[0] for c in MASK_CASES])
def test_mask_mistake_is_one_line(capsys, dm, argv, expect):
    rc, out, err = _run(capsys, [a.replace("{m}", str(dm)) for a in argv])
    assert rc == USER_ERROR, (rc, err[-2000:])
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "error:" in lines[0] and expect in lines[0], lines[0]


# ---------------------------------------------------------------------- stream: config and learner options
@pytest.fixture(scope="module")
def stream_files(tmp_path_factory):
    """pt checkpoints a user might hand over: another width, NaN weights."""
    import torch

    from vistabench.learners.models import build_model

    t = tmp_path_factory.mktemp("stream_mistakes")
    torch.save(build_model("cnn28", num_classes=10, in_channels=1, seed=0, width=4).state_dict(), t / "w4.pt")
    sd = build_model("cnn28", num_classes=10, in_channels=1, seed=0, width=8).state_dict()
    first = next(k for k, v in sd.items() if v.is_floating_point())
    sd[first] = torch.full_like(sd[first], float("nan"))
    torch.save(sd, t / "nan.pt")
    return t


_RUN = ["stream", "run", "--stream", "embedded", "--trials", "1", "--steps", "4", "--max-tasks", "1", "--no-store",
        "--out", "{t}/out"]
STREAM_CASES = [
    ("pt-other-width", [*_RUN, "--learner", "pt", "--checkpoint", "{t}/w4.pt"], "expects [8,"),
    ("pt-nan-weights", [*_RUN, "--learner", "pt", "--checkpoint", "{t}/nan.pt"], "NaN or infinite"),
    ("search-space-not-bhpo", [*_RUN, "--learner", "indep", "--search-space", "default"],
     "--search-space: only the bhpo learner reads it"),
    ("checkpoint-not-pt", [*_RUN, "--learner", "ft-d", "--checkpoint", "{t}/w4.pt"],
     "--checkpoint: only the pt learner reads it"),
    ("learner-opt-unknown", [*_RUN, "--learner", "ft-d", "--learner-opt", "knn_kk=3"], "learner_options.knn_kk"),
    ("learner-opt-other-learner", [*_RUN, "--learner", "indep", "--learner-opt", "temperature=0.1"],
     "learner_options.temperature: unknown option"),
    ("learner-opt-bad-value", [*_RUN, "--learner", "ensemble", "--learner-opt", "temperature=0"],
     "learner_options.temperature: expected a number > 0"),
    ("warmup-without-warmup-schedule", [*_RUN, "--learner", "indep", "--schedule", "cosine", "--warmup-epochs", "2"],
     "--warmup-epochs: read only by schedule 'warmup-cosine'"),
    ("ray-address-local-engine", [*_RUN, "--learner", "indep", "--ray-address", "127.0.0.1:1"],
     "--ray-address: only read with engine 'ray'"),
    ("lr-range-reversed", [*_RUN, "--learner", "indep", "--lr-range", "0.1", "0.001"], "--lr-range: expected two"),
    ("lr-range-negative", [*_RUN, "--learner", "indep", "--lr-range", "-1", "0.1"], "--lr-range: expected a number > 0"),
    ("recipe-typo", [*_RUN, "--learner", "indep", "--recipe", "dm_nevis"], "did you mean 'dm-nevis'"),
    ("min-batch-over-max", [*_RUN, "--learner", "indep", "--min-batch", "64", "--max-batch", "32"], "--min-batch"),
    ("config-file-unknown-key", ["stream", "run", "--config", "{t}/cfg.yaml", "--print-config"], "lrr"),
]


@pytest.mark.parametrize("argv,expect", [c[1:] for c in STREAM_CASES], ids=[c[0] for c in STREAM_CASES])
def test_stream_mistake_is_one_line(capsys, stream_files, argv, expect):
    (stream_files / "cfg.yaml").write_text("learner: indep\nlrr: 0.1\n")
    code = main([a.replace("{t}", str(stream_files)) for a in argv])
    err = capsys.readouterr().err
    assert code == USER_ERROR, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert expect in err, err


# ---------------------------------------------------------------------- config files: every integer field (issue 32)
#: the fewest fields with which each protocol's ``run --print-config`` succeeds
_MINIMAL = {
    "longtail": {"data": "digits", "method": "ce", "imbalance": 10},
    "detection": {"gt": "gt.json", "results": "dt.json"},
    "incremental": {"data": "digits", "method": "finetune", "base_classes": 4, "way": 2, "shot": 5},
    "smalldata": {"dataset": "digits", "method": "ce"},
    "stream": {"stream": "embedded", "learner": "indep"},
}
#: YAML texts of integers that cannot mean what a user wrote (huge float, fraction, octal, hex, base 60, bool)
_BAD_INTS = ["1.0e+30", "1.5", "010", "0x10", "1:30", "true", "-1", "2147483648"]


def _int_fields():
    from vistabench.config import base_type
    from vistabench.suite import protocols

    for p in protocols():
        if p.name not in _MINIMAL:
            continue
        for info in p.part("config").fields_info():
            if base_type(info.type) is int:
                yield p.name, info


@pytest.mark.parametrize("protocol,info", list(_int_fields()), ids=lambda x: getattr(x, "name", x))
def test_config_file_bad_integer_is_one_line(capsys, tmp_path, protocol, info):
    """Every integer field of every protocol, written in a config file as a huge float, a fraction, an
    octal, hex or base-60 number, a bool, a negative number or one past int32: one line naming it."""
    import yaml

    base = yaml.safe_dump({k: v for k, v in _MINIMAL[protocol].items() if k != info.name})
    for bad in _BAD_INTS:
        if bad == "-1" and info.low is not None and info.low < -1:
            continue
        (tmp_path / "c.yaml").write_text(base + f"{info.name}: {bad}\n")
        rc, out, err = _run(capsys, [protocol, "run", "--config", str(tmp_path / "c.yaml"), "--print-config"])
        assert rc == USER_ERROR and not out, (bad, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, err
        assert info.flag() in lines[0] or info.name in lines[0], (bad, lines[0])


NAME_CASES = [
    ("lt-data-typo", ["longtail", "run", "--data", "digitz", "--method", "ce", "--imbalance", "10"],
     "--data: unknown dataset 'digitz'; did you mean 'digits'"),
    ("lt-data-no-path", ["longtail", "run", "--data", "cifar100", "--method", "ce", "--imbalance", "10"],
     "--data: dataset 'cifar100' needs a path"),
    ("inc-data-typo", ["incremental", "run", "--data", "mnist5", "--method", "finetune", "--preset", "cifar100"],
     "did you mean 'mnist5k'"),
    ("sd-dataset-typo", ["smalldata", "run", "--dataset", "eurosta", "--method", "ce"], "did you mean 'eurosat'"),
    ("sd-model-typo", ["smalldata", "run", "--dataset", "digits", "--method", "ce", "--model", "resnt18"],
     "--model: unknown model 'resnt18'; did you mean 'resnet18'"),
    ("inc-model-typo", ["incremental", "run", "--data", "digits", "--method", "finetune", "--preset", "cifar100",
                        "--model", "vit_smal"], "did you mean 'vit_small'"),
    ("stream-name-typo", ["stream", "run", "--stream", "embeded"], "--stream: unknown stream 'embeded'"),
    ("stream-arch-typo", ["stream", "run", "--stream", "embedded", "--arch", "cnn29"], "--model: unknown model"),
    ("stream-learner-typo", ["stream", "run", "--stream", "embedded", "--learner", "ft"], "did you mean 'ft-d'"),
    ("lt-method-typo", ["longtail", "run", "--data", "digits", "--method", "focl", "--imbalance", "10"],
     "did you mean 'focal'"),
    ("sd-method-typo", ["smalldata", "run", "--dataset", "digits", "--method", "dsk"], "--method"),
    ("seed-leading-zero-flag", ["longtail", "run", "--data", "digits", "--method", "ce", "--imbalance", "10",
                                "--seed", "010"], "--seed: '010' has a leading zero"),
    ("seed-negative-stream", ["stream", "run", "--stream", "embedded", "--seed", "-1"], "--seed: expected a number >= 0"),
]


@pytest.mark.parametrize("argv,expect", [c[1:] for c in NAME_CASES], ids=[c[0] for c in NAME_CASES])
def test_print_config_checks_names(capsys, argv, expect):
    """--print-config refuses a data set, stream, model or method that does not exist (close matches)."""
    rc, out, err = _run(capsys, [*argv, "--print-config"])
    assert rc == USER_ERROR and not out, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and expect in lines[0], err


INT_FLAG_CASES = [
    ("det-split-seed-neg", ["detection", "split", "--gt", "{d}/gt.json", "--seed", "-1", "--out", "{d}/ds.json"],
     "--seed: expected a number >= 0"),  # the config vocabulary's words (as `stream run --seed -1`)
    ("lt-split-seed-octal", ["longtail", "split", "--data", "digits", "--imbalance", "10", "--seed", "010",
                             "--out", "{d}/sp.json"], "--seed: '010' has a leading zero"),
    ("lt-sweep-points-huge", ["longtail", "sweep", "--labels", "{d}/pred.npz", "--train-counts", "{d}/counts.json",
                              "--points", "99999999999", "--out", "{d}/sw.json"], "--points: expected an integer between"),
    ("inc-split-seed-fraction", ["incremental", "split", "--data", "digits", "--base-classes", "4", "--way", "2",
                                 "--shot", "5", "--seed", "1.5", "--out", "{d}/is.json"], "--seed: expected an integer"),
    ("det-synth-images-hex", ["detection", "synth", "--images", "0x10", "--out", "{d}/syn"], "--images"),
]


@pytest.mark.parametrize("argv,expect", [c[1:] for c in INT_FLAG_CASES], ids=[c[0] for c in INT_FLAG_CASES])
def test_integer_flags_follow_the_config_rules(capsys, d, argv, expect):
    """The commands' own integer flags (outside the configs) refuse the same values in one line."""
    rc, out, err = _run(capsys, [a.replace("{d}", str(d)) for a in argv])
    assert rc == USER_ERROR, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and expect in lines[0], err
