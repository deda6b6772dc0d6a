"""The high-resolution fine-tuning option of the final runs (paper §VII-D) and the new methods'
rows in `smalldata list`."""

import json

import numpy as np

from vistabench.cli import main
from vistabench.data.dataset import Dataset
from vistabench.protocols.smalldata.core import upsample
from vistabench.store import ResultsStore

TINY = ["--dataset", "digits", "--per-class", "10", "--split", "0", "--epochs", "1", "--trials", "1",
        "--grace-period", "1", "--batch-sizes", "10", "--sampler", "random", "--threads", "1"]


def test_upsample_is_bilinear_interpolation():
    x = np.array([[0, 100], [200, 40]], dtype=np.uint8)[None, :, :, None]
    ds = Dataset(images=x, labels=np.array([0]), class_names=["a"])
    up = upsample(ds, 2).images[0, :, :, 0]
    # half-pixel-centred bilinear: output (i, j) samples input at ((i + 0.5) / 2 − 0.5), clamped
    src = np.clip((np.arange(4) + 0.5) / 2 - 0.5, 0, 1)
    f = x[0, :, :, 0].astype(float)
    want = np.array([[(1 - a) * ((1 - b) * f[0, 0] + b * f[0, 1]) + a * ((1 - b) * f[1, 0] + b * f[1, 1])
                      for b in src] for a in src])
    np.testing.assert_array_equal(up, np.round(want).astype(np.uint8))
    assert upsample(ds, 2).images.shape == (1, 4, 4, 1)


def test_final_runs_with_highres_finetuning_store_both(tmp_path, capsys):
    store, work = tmp_path / "r.sqlite", tmp_path / "w"
    rc = main(["smalldata", "final", "--method", "ce_untuned", "--repeats", "1", "--highres-scale", "2", "--json",
               *TINY, "--store", str(store), "--work-dir", str(work)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    printed = json.loads(out)["records"]
    assert [r["kind"] for r in printed] == ["final", "highres"]
    with ResultsStore(store) as s:
        final, = s.records(protocol="smalldata", kind="final")
        hi, = s.records(protocol="smalldata", kind="highres")
    assert final.settings.get("highres_scale") is None and hi.settings["highres_scale"] == 2
    assert hi.settings["image_size"] == 16 and 0 <= hi.metrics["balanced_accuracy"] <= 1
    assert hi.metrics["balanced_accuracy"] == printed[1]["metrics"]["balanced_accuracy"]
    assert [r["id"] for r in printed] == [final.id, hi.id]
    rc = main(["smalldata", "final", "--method", "ce_untuned", "--highres-scale", "0", *TINY,
               "--store", str(store), "--work-dir", str(work)])
    _, err = capsys.readouterr()
    assert rc != 0 and err.strip().count("\n") == 0 and "--highres-scale" in err


def test_list_has_the_thirteen_rows_of_table_3(capsys):
    assert main(["smalldata", "list", "--json"]) == 0
    names = set(json.loads(capsys.readouterr().out)["methods"])
    assert names == {"ce", "ce_untuned", "cosine", "cosine_ce", "harmonic", "grad_l2", "dhn", "ole", "fconv",
                     "dskn", "dvp", "auxilearn", "tvmf"}
