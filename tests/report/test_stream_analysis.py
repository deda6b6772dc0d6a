"""Stream definitions (Nevis'22 metadata, embedded stream, user files, data roots) and run analysis."""


import numpy as np
import pytest

from vistabench.errors import InputError
from vistabench.metrics import forward_transfer, normalised_auc
from vistabench.report.stream_analysis import analyse, resolution_bin, size_bin
from vistabench.store import Record, ResultsStore
from vistabench.streams import load_stream, parse_stream, stream_names
from vistabench.streams.sources import resolve_task

BASE = {"name": "u", "meta_test_from_year": 2001, "input": {"image_size": 8, "channels": 1},
        "tasks": [{"name": "a", "year": 2000, "kind": "multiclass", "source": "a"},
                  {"name": "b", "year": 2001, "kind": "multilabel", "source": "b"}]}


@pytest.mark.parametrize("name", stream_names())
def test_builtin_streams_are_valid_and_chronological(name):
    s = load_stream(name)
    years = [t.year for t in s.tasks]
    assert years == sorted(years)
    assert all(t.kind in ("multiclass", "multilabel") and t.domain for t in s.tasks)
    assert len({t.uid for t in s.tasks}) == len(s.tasks)
    assert s.meta_test() and s.meta_train()


def _dm_nevis_full():
    """dm_nevis's NEVIS_STREAM_PER_YEAR[FULL] (dm_nevis/streams/nevis_stream.py), copied by hand."""
    return {1992: ("Magellan Venus Volcanoes", "Aberdeen face database."),
            1998: ("LandSat UCI repo", "Brodatz", "Olivetti Face Dataset"), 2000: ("COIL 20",),
            2001: ("COIL 100", "MPEG-7"), 2004: ("Butterfly dataset", "MNIST"),
            2005: ("Caltech 101", "UMIST", "CMU AMP expression"),
            2006: ("Pascal 2005", "Caltech cars, motorbikes", "UIUC cars", "ALOI"), 2007: ("8 Scene Dataset",),
            2008: ("15 Scenes",), 2009: ("Pascal 2006", "Extended YaleB"),
            2010: ("Pascal 2007", "Graz-02", "Olivetti Face Dataset", "PPMI"),
            2011: ("Caltech 256", "ImageNet", "LFW", "Oxford Flowers", "Flicker Material Dataset",
                   "Oxford Flowers 102", "Belgium Traffic Sign Dataset", "German Traffic Sign Recognition Benchmark",
                   "Brodatz", "VisTex"),
            2012: ("UMD", "KTH-TIPS", "UIUC texture", "KTH-TIPS2-b", "CVC-MUSCIMA"),
            2013: ("IAPRTC-12", "sketch dataset", "KTH-TIPS2-a", "Pascal 2012", "NORB"), 2014: ("Wikipaintings",),
            2015: ("MNIST", "MIT Scenes", "SUN 397", "CIFAR 10"),
            2016: ("CUB 200", "Stanford Cars", "FGVC Aircraft", "DTD", "MS COCO", "Caltech 101", "Oxford IIIT Pets",
                   "Stanford Dogs", "ANIMAL", "Caltech 101 Silhouettes", "Interact", "VOC Actions", "SVHN", "Chars74K"),
            2017: ("CelebA", "LFWA", "SUN Attribute", "CIFAR 100"),
            2018: ("TID2008", "TID2013", "USPS", "Semeion", "MNIST-m", "Office Caltech", "PACS", "Caltech Camera Traps",
                   "EMNIST Balanced", "CASIA-HWDB1.1", "ISBI-ISIC 2017 melanoma classification challenge"),
            2019: ("Trancos", "Mall dataset", "Fashion MNIST", "NotMNIST", "Tiny Imagenet", "STL10", "Food 101",
                   "MNIST-rot", "AWA2", "15 Scenes", "Food 101 N", "COIL 20", "COIL 100"),
            2020: ("ShanghaiTech", "AnimalWeb", "BIWI"),
            2021: ("ImageNet", "Oxford Flowers 102", "DomainNet-Real", "Pneumonia Chest X-ray", "Path MNIST",
                   "NIH Chest X-ray", "Tubercolosis", "covid-19 x-ray", "PatchCamelyon", "DDSM",
                   "Synthetic COVID-19 Chest X-ray Dataset")}


def test_nevis_full_is_dm_nevis_full_in_its_order_and_cuts():
    ref = [(y, n) for y, names in sorted(_dm_nevis_full().items()) for n in names]
    full = load_stream("nevis-full")
    assert [(t.year, t.name) for t in full.tasks] == ref
    # dm_nevis: NevisStream(stop_year) keeps the tasks *before* stop_year for development
    for stop in (2019, 2020, 2021):
        s = load_stream("nevis-full", meta_test_from_year=stop)
        assert [t.name for t in s.meta_train()] == [n for y, n in ref if y < stop]
    assert len(load_stream("nevis-full", meta_test_from_year="dm-nevis").meta_test()) == 14
    assert len(load_stream("nevis-full", meta_test_from_year="paper").meta_test()) == 27
    assert "= dm-nevis (--meta-test-from dm-nevis): 92 meta-train, 14 meta-test" in load_stream(
        "nevis-full", meta_test_from_year="dm-nevis").meta_test_cut()
    with pytest.raises(InputError, match="meta_test_from: "):
        load_stream("nevis-full", meta_test_from_year="later")
    with pytest.raises(InputError, match="meta_test_from: "):
        load_stream("embedded", meta_test_from_year="paper")
    # the paper's table: same size, three tasks differ, the order within years differs
    paper = load_stream("nevis-full-paper")
    a, b = {(t.year, t.name) for t in full.tasks}, {(t.year, t.name) for t in paper.tasks}
    assert a - b == {(2010, "Graz-02"), (2013, "Pascal 2012"), (2021, "DDSM")}
    assert b - a == {(2008, "Graz-02"), (2014, "Pascal 2012"), (2019, "UCSD dataset")}
    assert len(paper.meta_test()) == 27 and len(paper.tasks) == 106


def test_nevis_short_is_dm_nevis_short():
    ref = {2004: ("COIL 100", "MNIST"), 2006: ("Pascal 2005", "Caltech cars, motorbikes", "UIUC cars"),
           2009: ("Pascal 2006",), 2010: ("Caltech 101",), 2011: ("Graz-02", "15 Scenes", "Pascal 2007", "LFW"),
           2013: ("sketch dataset", "Brodatz"), 2014: ("ImageNet", "Pascal 2012", "Caltech 256"),
           2018: ("CIFAR 100", "CIFAR 10", "USPS", "MNIST", "MNIST-m", "Office Caltech", "PACS",
                  "ISBI-ISIC 2017 melanoma classification challenge"),
           2019: ("Fashion MNIST",), 2020: ("Stanford Dogs", "CUB 200", "Stanford Cars", "FGVC Aircraft")}
    short = load_stream("nevis-short")
    assert [(t.year, t.name) for t in short.tasks] == [(y, n) for y, ns in sorted(ref.items()) for n in ns]
    assert len(load_stream("nevis-short", meta_test_from_year="dm-nevis").meta_test()) == 4


def test_nevis_task_lists_match_the_paper():
    full, short = load_stream("nevis-full-paper"), load_stream("nevis-short")
    assert len(full.tasks) == 106 and len(short.tasks) == 29
    assert len(full.meta_train()) == 79  # the paper's Table 5: "Full Stream | 79"
    assert len(full.meta_test()) == 27  # Section 4: "Among the 27 datasets" of the meta-test stream
    ml = {t.name for t in full.tasks if t.kind == "multilabel"}
    assert ml == {"Pascal 2007", "IAPRTC-12", "SUN 397", "VOC Actions", "SUN Attribute", "AWA2", "BIWI",
                  "NIH Chest X-ray"}
    assert {a.name for a, _ in full.repeats()} >= {"MNIST", "ImageNet", "COIL 100", "Oxford Flowers 102"}
    mnist = [t for t in full.tasks if t.name == "MNIST"]
    assert [t.year for t in mnist] == [2004, 2015] and mnist[0].size == 51000 and mnist[0].resolution == (28, 28)
    assert [t.name for t in short.tasks[:3]] == ["COIL 100", "MNIST", "Pascal 2005"]
    assert all(t.size is not None for t in short.tasks)


def test_user_stream_files_and_errors(tmp_path):
    p = tmp_path / "s.yaml"
    import yaml

    p.write_text(yaml.safe_dump(BASE))
    s = load_stream(str(p))
    assert [t.split for t in s.tasks] == ["meta-train", "meta-test"]
    assert load_stream(str(p), meta_test_from_year=2000).meta_train() == []
    bad = {**BASE, "tasks": [BASE["tasks"][1], BASE["tasks"][0]]}
    with pytest.raises(InputError, match="chronological"):
        parse_stream(bad)
    with pytest.raises(InputError, match="kind must be one of"):
        parse_stream({**BASE, "tasks": [{**BASE["tasks"][0], "kind": "binary"}]})
    with pytest.raises(InputError, match="missing key"):
        parse_stream({"name": "x", "tasks": []})
    with pytest.raises(InputError, match="no such file"):
        load_stream(str(tmp_path / "none.json"))
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(InputError, match="malformed JSON"):
        load_stream(str(tmp_path / "bad.json"))
    with pytest.raises(InputError, match="did you mean 'nevis-full'"):
        load_stream("nevis-ful")


def test_tasks_resolve_from_a_data_root(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "b.npz", train_images=rng.integers(0, 256, (6, 10, 10, 3), dtype=np.uint8),
             train_labels=np.array([[1, 0], [0, 1]] * 3), test_images=rng.integers(0, 256, (4, 10, 10, 3), dtype=np.uint8),
             test_labels=np.array([[1, 1], [0, 1]] * 2))
    for part in ("train", "test"):
        for c in ("cat", "dog"):
            d = tmp_path / "a" / part / c
            d.mkdir(parents=True)
            for i in range(2):
                Image.fromarray(rng.integers(0, 256, (12, 9), dtype=np.uint8)).save(d / f"{i}.png")
    s = parse_stream(BASE)
    a = resolve_task(s.tasks[0], s, data_root=tmp_path)
    assert a.train.images.shape == (4, 8, 8, 1) and a.train.class_names == ["cat", "dog"]
    b = resolve_task(s.tasks[1], s, data_root=tmp_path)
    assert b.train.targets.shape == (6, 2) and b.test.images.shape == (4, 8, 8, 1)  # RGB -> grey, resized
    with pytest.raises(InputError, match="data_root=DIR"):
        resolve_task(s.tasks[0], s)
    with pytest.raises(InputError, match="found neither"):
        resolve_task(s.tasks[0], s, data_root=tmp_path / "elsewhere")


def test_embedded_transforms():
    s = parse_stream({"name": "e", "meta_test_from_year": 2001, "input": {"image_size": 8, "channels": 1}, "tasks": [
        {"name": "a", "year": 2000, "kind": "multiclass", "source": {"embedded": "digits", "classes": [7, 3], "n_train": 20}},
        {"name": "b", "year": 2000, "kind": "multiclass", "source": {"embedded": "digits", "classes": [7, 3], "n_train": 20, "invert": True}},
        {"name": "c", "year": 2000, "kind": "multiclass", "source": {"embedded": "digits", "classes": [7, 3], "n_train": 20, "rotate": 90}},
        {"name": "d", "year": 2001, "kind": "multilabel", "source": {"embedded": "digits", "attributes": ["even", "prime"], "n_train": 30}}]})
    a, b, c, d = (resolve_task(t, s) for t in s.tasks)
    assert set(a.train.targets) == {0, 1} and a.train.class_names == ["7", "3"]
    np.testing.assert_array_equal(b.train.images, 255 - a.train.images)
    np.testing.assert_array_equal(c.train.images, np.rot90(a.train.images, 1, axes=(1, 2)))
    assert d.train.targets.shape == (30, 2) and set(np.unique(d.train.targets)) == {0, 1}
    again = resolve_task(s.tasks[0], s)
    np.testing.assert_array_equal(again.train.images, a.train.images)  # a repeated task gets identical data


def _events(errors, splits, curves, flops):
    names = [f"t{i}" for i in range(len(errors))]
    names[-1] = "t0"  # the last task repeats the first
    return [{"task_index": i, "task": f"{i:03d}", "name": names[i], "domain": "x" if i % 2 else "y", "split": splits[i],
             "error": errors[i], "flops": flops, "train_size": 150 * (i + 1), "resolution": [8 * (i + 1), 8 * (i + 1)],
             "curve": curves[i]} for i in range(len(errors))]


def _add(store, run, learner, events, trials=1, steps=4):
    for e in events:
        store.add(Record("stream", "s", learner, 0, "h", {"trials": trials, "steps": steps, "num_tasks": len(events)},
                         e, kind="event", run_id=run))


def test_analysis_pareto_regret_transfer_and_a_computed_verdict(tmp_path):
    splits = ["meta-train", "meta-train", "meta-test", "meta-test"]
    c1 = [[0.2, 0.4, 0.6, 0.8]] * 4
    c2 = [[0.2, 0.4, 0.6, 0.8], [0.5] * 4, [0.5] * 4, [0.7, 0.8, 0.9, 1.0]]
    with ResultsStore(tmp_path / "r.sqlite") as st:
        _add(st, "ind", "indep", _events([0.5, 0.4, 0.3, 0.2], splits, c1, 10))
        _add(st, "ft", "ft-d", _events([0.5, 0.3, 0.2, 0.1], splits, c2, 12))
        _add(st, "ft-big", "ft-d", _events([0.5, 0.3, 0.25, 0.25], splits, c2, 30), trials=2)  # dominated
        a = analyse(st)
        runs = {r["run"]: r for r in a["runs"]}
        assert runs["ind"]["avg_error"] == pytest.approx(0.25) and runs["ft"]["avg_error"] == pytest.approx(0.15)
        assert runs["ind"]["cflop"] == 40 and runs["ft-big"]["cflop"] == 120
        assert [runs[r]["pareto"] for r in ("ind", "ft", "ft-big")] == [True, True, False]
        np.testing.assert_allclose(a["regret"]["ft"]["curve"], [0, -0.1, -0.2, -0.3], atol=1e-12)
        assert a["regret"]["ft"]["reference"] == "ind"
        auc = normalised_auc(c2[0], [0.25, 0.5, 0.75, 1.0]), normalised_auc(c2[3], [0.25, 0.5, 0.75, 1.0])
        assert a["forward_transfer"]["ft"]["tasks"]["t0"]["forward_transfer"] == pytest.approx(forward_transfer(*auc))
        v = a["verdicts"]["s"]["ft-d"]
        assert v["verdict"] == "beats Indep" and v["wins"] == 1 and v["matched"] == 1
        assert "ft-d beats Indep on s" in v["text"]
        assert a["slices"]["ft"]["domain"]["y"]["mean"] == pytest.approx(0.35)
    with ResultsStore(tmp_path / "r2.sqlite") as st:  # the same learner, now worse: the verdict flips
        _add(st, "ind", "indep", _events([0.5, 0.4, 0.3, 0.2], splits, c1, 10))
        _add(st, "ft", "ft-d", _events([0.5, 0.3, 0.4, 0.3], splits, c2, 12))
        assert analyse(st)["verdicts"]["s"]["ft-d"]["verdict"] == "does not beat Indep"
        with pytest.raises(InputError, match="not in the store"):
            analyse(st, ["nope"])


def test_bins():
    assert [size_bin(n) for n in (5, 500, 5000, 50000, 10**6)] == ["<100", "100-1k", "1k-10k", "10k-100k", ">=100k"]
    assert [resolution_bin(r) for r in ([28, 28], [3, 300], [64, 90], [100, 200], [300, 400])] == \
        ["<=32", "<=32", "33-64", "65-256", ">256"]


def test_events_without_size_or_resolution_are_sliced_as_unknown(tmp_path):
    """A scored events file may leave out train_size and resolution (the report crashed on them)."""
    from vistabench.report.stream import stream_section

    splits = ["meta-train", "meta-train", "meta-test", "meta-test"]
    events = _events([0.5, 0.4, 0.3, 0.2], splits, [[0.2, 0.4, 0.6, 0.8]] * 4, 10)
    for e in events:
        del e["train_size"], e["resolution"]
    assert size_bin(None) == "unknown" and resolution_bin(None) == "unknown"
    with ResultsStore(tmp_path / "r.sqlite") as st:
        _add(st, "ind", "indep", events)
        a = analyse(st)
        assert a["slices"]["ind"]["size"]["unknown"]["count"] == 4
        assert a["slices"]["ind"]["resolution"]["unknown"]["count"] == 4
        assert stream_section(st.records()) is not None
