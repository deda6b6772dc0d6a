"""Every command block of README.md and docs/*.md runs as written (the docs runner).

A command block is a fenced ```bash block. Each page's blocks run in order in one temporary folder
(a reader following the page: what a block writes, a later block reads). A ``vistabench ...`` line
runs through the command line in this process (``vistabench.cli.main``; a trailing ``> FILE`` is
written as the shell would); any other line (``echo ... > acc.json``) runs in bash. Every line must
exit 0, a ``--json`` line must print JSON, and the block's output must contain each ``expect`` text.

Markers: HTML comments on the lines right before the opening fence, one directive each (a reader of
the rendered page does not see them):

    <!-- docs-runner: expect TEXT -->           the block's output (stdout of all its lines) contains
                                                TEXT; every block that runs needs at least one
    <!-- docs-runner: stand-in KIND PATH -->    before the block, make small stand-in data of KIND at
                                                PATH (an absolute PATH is made in the folder and the
                                                block's text points there); KINDs: see STAND_INS
    <!-- docs-runner: replace OLD => NEW -->     run the block with the text OLD replaced by NEW (a
                                                shorter run of a long command: fewer epochs, trials)
    <!-- docs-runner: skip-line TEXT => REASON --> lines containing TEXT are not run (a GPU, a Ray
                                                cluster, a placeholder); the session's summary lists
                                                them with REASON
    <!-- docs-runner: skip REASON -->            the whole block is not run; pytest reports REASON

For example, a block that scores a results file against LVIS ground truth the reader has:

    <!-- docs-runner: stand-in lvis lvis_v1_val.json dets.json -->
    <!-- docs-runner: expect "AP" -->
    ```bash
    vistabench detection eval --gt lvis_v1_val.json --results dets.json --json
    ```

A fenced block without a language whose lines start with ``vistabench`` is refused (mark it
```bash so that it runs, or ```text for a synopsis).
"""

from __future__ import annotations

import json
import pickle
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^[ \t]*```([\w-]*)[^\n]*\n(.*?)^[ \t]*```", re.S | re.M)  # indented: in a list
MARKER = re.compile(r"^<!--\s*docs-runner:\s*([\w-]+)\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    page: Path
    line: int
    text: str
    expect: list[str] = field(default_factory=list)
    stand_ins: list[tuple[str, list[str]]] = field(default_factory=list)
    replace: list[tuple[str, str]] = field(default_factory=list)
    skip_lines: list[tuple[str, str]] = field(default_factory=list)
    skip: str | None = None

    @property
    def id(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page.name
        return f"{page}:{self.line}"


def _markers(lines_before: list[str]) -> list[tuple[str, str]]:
    out = []
    for raw in reversed(lines_before):
        m = MARKER.match(raw.strip())
        if not m:
            break
        out.append((m.group(1), m.group(2)))
    return out[::-1]


def _unquote(s: str) -> str:
    return s[1:-1] if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'" else s


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        lang, body = m.group(1), m.group(2)
        line = text[: m.start()].count("\n") + 1
        if lang not in ("bash", "sh"):
            continue
        b = Block(page, line, body)
        for kind, arg in _markers(text[: m.start()].splitlines()):
            if kind == "expect":
                b.expect.append(arg)
            elif kind == "stand-in":
                what, *paths = arg.split()
                b.stand_ins.append((what, paths))
            elif kind in ("replace", "skip-line"):
                old, sep, new = arg.partition("=>")
                assert sep, f"{b.id}: docs-runner {kind} needs 'OLD => NEW', got {arg!r}"
                (b.replace if kind == "replace" else b.skip_lines).append((_unquote(old.strip()), _unquote(new.strip())))
            elif kind == "skip":
                b.skip = arg
            else:
                raise AssertionError(f"{b.id}: unknown docs-runner directive {kind!r}")
        out.append(b)
    return out


ALL = [b for page in PAGES for b in blocks(page)]


# ---------------------------------------------------------------- stand-ins: small data, made here

def _cifar(root: Path, variant: int) -> None:
    """A CIFAR python-pickle folder with the real layout: 10 (CIFAR-10) or 5 (CIFAR-100) training
    images per class, 3 test images per class; the image's mean brightness follows its class."""
    rng = np.random.default_rng(variant)
    root.mkdir(parents=True, exist_ok=True)

    def batch(per_class: int, key: str) -> dict:
        labels = np.repeat(np.arange(variant), per_class)
        data = rng.integers(0, 60, (len(labels), 3072)) + (labels[:, None] * 190 // variant)
        return {b"data": data.astype(np.uint8), key.encode(): labels.tolist()}

    def dump(name: str, obj: dict) -> None:
        with open(root / name, "wb") as f:
            pickle.dump(obj, f)

    if variant == 10:
        for i in range(1, 6):
            dump(f"data_batch_{i}", batch(2, "labels"))
        dump("test_batch", batch(3, "labels"))
        dump("batches.meta", {b"label_names": [f"class{i}".encode() for i in range(10)]})
    else:
        dump("train", batch(5, "fine_labels"))
        dump("test", batch(3, "fine_labels"))
        dump("meta", {b"fine_label_names": [f"class{i}".encode() for i in range(100)]})


def _longtail_predictions(path: Path) -> None:
    """Predictions of a 10-class model on a balanced pool of 600 (a better head than tail)."""
    from vistabench.data import save_predictions

    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), 60)
    logits = rng.normal(size=(600, 10))
    logits[np.arange(600), labels] += np.linspace(3, 0.5, 10)[labels]
    save_predictions(path, labels=labels, logits=logits)


def _longtail_sweep(path: Path, predictions: Path) -> None:
    from vistabench.metrics.longtail import training_profile
    from vistabench.protocols.longtail.sweep import build_sweep, write_sweep

    labels = np.load(predictions)["labels"]
    write_sweep(path, build_sweep(labels, training_profile(10, n_max=5000, imbalance=100), test_imbalance=100))


def _lvis(gt: Path, dets: Path | None = None, *, seed: int = 1, masks: bool = False) -> None:
    """An LVIS-like ground truth (30 images, 20 categories) and a detector's results on it."""
    from vistabench.data.detection_synth import synth_detection_set

    s = synth_detection_set(num_images=30, num_categories=20, dets_per_image=40, seed=seed, detector_seed=0,
                            masks=masks)
    gt.parent.mkdir(parents=True, exist_ok=True)
    gt.write_text(json.dumps(s.ground_truth), encoding="utf-8")
    if dets is not None:
        dets.write_text(json.dumps(s.results), encoding="utf-8")


def _backbone_weights(path: Path) -> None:
    """A state dict of examples/tiny_backbone.py's network for 1-channel images and 10 classes, as an
    earlier training of the reader's would have saved it (safetensors)."""
    import importlib.util

    import torch
    from safetensors.torch import save_file

    spec = importlib.util.spec_from_file_location("_docs_tiny_backbone", ROOT / "examples" / "tiny_backbone.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    torch.manual_seed(0)
    save_file({k: v.contiguous() for k, v in mod.tiny_backbone(num_classes=10, in_chans=1).state_dict().items()},
              str(path))


#: KIND -> (what it makes, maker(folder, paths)): a stand-in's paths are relative to the folder
def _imagelist(root: Path) -> None:
    """A train.txt/test.txt list-file folder of 16 x 16 PNG files: 4 classes, 12 training and 6 test
    images each, brightness following the class."""
    from PIL import Image

    rng = np.random.default_rng(4)
    for part, per_class in (("train", 12), ("test", 6)):
        (root / part).mkdir(parents=True, exist_ok=True)
        lines = []
        for i in range(4 * per_class):
            c = i % 4
            a = (rng.integers(0, 60, (16, 16, 3)) + 60 * c).astype(np.uint8)
            Image.fromarray(a).save(root / part / f"{i}.png")
            lines.append(f"{part}/{i}.png {c}")
        (root / f"{part}.txt").write_text("\n".join(lines) + "\n")


STAND_INS = {
    "cifar10": ("a CIFAR-10 python folder (10 train + 3 test images per class)", lambda d, p: _cifar(d / p[0], 10)),
    "cifar100": ("a CIFAR-100 python folder (5 train + 3 test images per class)", lambda d, p: _cifar(d / p[0], 100)),
    "longtail-predictions": ("an .npz of labels + logits, 10 classes x 60", lambda d, p: _longtail_predictions(d / p[0])),
    "longtail-sweep": ("PATH PREDICTIONS: a sweep (10-class CIFAR-LT counts, rho 100) over PREDICTIONS' labels",
                       lambda d, p: _longtail_sweep(d / p[0], d / p[1])),
    "backbone-weights": ("a .safetensors state dict of examples/tiny_backbone.py (1 channel, 10 classes)",
                         lambda d, p: _backbone_weights(d / p[0])),
    "imagelist": ("a train.txt/test.txt folder of 16 px PNGs, 4 classes x (12 train + 6 test)",
                  lambda d, p: _imagelist(d / p[0])),
    "lvis": ("GT [DETS]: LVIS-like ground truth (30 images, 20 categories) [and results on it]",
             lambda d, p: _lvis(d / p[0], d / p[1] if len(p) > 1 else None)),
    "lvis-masks": ("GT [DETS]: the same with masks (segm)",
                   lambda d, p: _lvis(d / p[0], d / p[1] if len(p) > 1 else None, seed=3, masks=True)),
    "lvis-train": ("GT DETS: a second LVIS-like set of the same detector (for calibration fits)",
                   lambda d, p: _lvis(d / p[0], d / p[1], seed=2)),
}


# ---------------------------------------------------------------- running a block

def _commands(text: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", text)
    return [ln.strip() for ln in joined.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def _local(path: str) -> str:
    return path.lstrip("/")


def run_block(b: Block, folder: Path, capsys) -> tuple[str, list[str]]:
    """Run ``b`` in ``folder``: (its stdout, the lines skipped with their reasons)."""
    from vistabench.cli import main

    text = b.text
    for kind, paths in b.stand_ins:
        assert kind in STAND_INS, f"{b.id}: unknown stand-in {kind!r} (known: {sorted(STAND_INS)})"
        STAND_INS[kind][1](folder, [_local(p) for p in paths])
        for p in paths:
            if p.startswith("/"):
                text = text.replace(p, _local(p))
    for old, new in b.replace:
        assert old in text, f"{b.id}: docs-runner replace: {old!r} is not in the block"
        text = text.replace(old, new)
    printed, skipped = [], []
    for cmd in _commands(text):
        reason = next((r for t, r in b.skip_lines if t in cmd), None)
        if reason is not None:
            skipped.append(f"{cmd[:100]}: {reason}")
            continue
        if not cmd.startswith("vistabench "):
            done = subprocess.run(["bash", "-c", cmd], cwd=folder, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, f"{b.id}: `{cmd}` exited {done.returncode}: {done.stderr[-800:]}"
            printed.append(done.stdout)
            continue
        argv = shlex.split(cmd, comments=True)[1:]
        target = None
        if ">" in argv:
            i = argv.index(">")
            argv, target = argv[:i], argv[i + 1]
        capsys.readouterr()
        rc = main(argv)
        out, err = capsys.readouterr()
        assert rc == 0, f"{b.id}: `{cmd}` exited {rc}: {err[-1500:]}"
        if "--json" in argv:
            try:
                json.loads(out)
            except ValueError as exc:
                raise AssertionError(f"{b.id}: `{cmd}` printed no JSON ({exc}): {out[:300]!r}") from exc
        if target is not None:
            (folder / target).write_text(out, encoding="utf-8")
        printed.append(out)
    return "\n".join(printed), skipped


@pytest.fixture(scope="module")
def page_folders(tmp_path_factory):
    """One folder per page, holding a copy of the checkout's examples/ (the pages name them as
    ``examples/...``, from the checkout's root): its blocks run in order there."""
    import shutil

    out = {}
    for page in PAGES:
        out[page] = tmp_path_factory.mktemp(page.stem)
        shutil.copytree(ROOT / "examples", out[page] / "examples")
    return out


@pytest.mark.parametrize("block", ALL, ids=[b.id for b in ALL])
def test_documented_commands_run(block, page_folders, capsys, monkeypatch, request):
    if block.skip:
        pytest.skip(f"{block.id}: {block.skip}")
    assert block.expect, f"{block.id}: say what the block prints: <!-- docs-runner: expect TEXT -->"
    folder = page_folders[block.page]
    monkeypatch.chdir(folder)
    out, skipped = run_block(block, folder, capsys)
    for text in block.expect:
        assert text in out, f"{block.id}: the output lacks {text!r}; it was: {out[-1500:]!r}"
    for line in skipped:  # listed at the end of the test session (tests/conftest.py)
        request.node.user_properties.append(("docs-runner: not run", f"{block.id}: {line}"))


def test_every_command_block_is_seen_by_the_runner():
    """A block of commands fenced without ```bash would escape the runner."""
    hidden = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m.group(1) == "" and any(ln.strip().startswith("vistabench ") for ln in m.group(2).splitlines()):
                hidden.append(f"{page.relative_to(ROOT)}:{text[: m.start()].count(chr(10)) + 1}")
    assert not hidden, f"command blocks without a language (use ```bash, or ```text for a synopsis): {hidden}"
    assert len(ALL) >= 15


def test_the_markers_are_read(tmp_path):
    """The parser on a page of its own: each directive lands where it should, a comment that is not
    right before the fence does not count, continuation lines join and comments drop."""
    page = tmp_path / "page.md"
    page.write_text("<!-- docs-runner: skip not this one -->\n\ntext\n"
                    "<!-- docs-runner: stand-in lvis gt.json dets.json -->\n<!-- docs-runner: expect \"AP\" -->\n"
                    "<!-- docs-runner: replace --epochs 8 => --epochs 1 -->\n"
                    "<!-- docs-runner: skip-line --device cuda => needs a GPU -->\n"
                    "```bash\nvistabench a \\\n    --b 1  # c\n# comment\n\necho x > y\n```\n"
                    "```text\nvistabench synopsis\n```\n", encoding="utf-8")
    (b,) = blocks(page)
    assert (b.line, b.skip, b.expect, b.stand_ins) == (8, None, ['"AP"'], [("lvis", ["gt.json", "dets.json"])])
    assert b.replace == [("--epochs 8", "--epochs 1")] and b.skip_lines == [("--device cuda", "needs a GPU")]
    assert [" ".join(c.split()) for c in _commands(b.text)] == ["vistabench a --b 1 # c", "echo x > y"]


def _documented_command_lines() -> list[tuple[str, str]]:
    """(block id, command line) of every ``vistabench`` line of every block, also those the runner
    does not run (a skipped block, a skip-line: a GPU, a cluster, a placeholder), with the block's
    replacements made."""
    out = []
    for b in ALL:
        text = b.text
        for old, new in b.replace:  # what makes an elided line concrete (`eval ... --max` => `eval --gt ...`)
            text = text.replace(old, new)
        out += [(b.id, cmd) for cmd in _commands(text) if cmd.startswith("vistabench ")]
    return out


def test_lines_not_run_still_parse():
    """A line the runner skips still has to be a command line vistabench accepts: its command, verb
    and every flag are parsed (nothing runs; file names may be placeholders). A misspelt flag in a
    skipped line (`--record` for `--method`) escaped the runner before."""
    from vistabench.cli import _words, build_parser

    bad = []
    for where, cmd in _documented_command_lines():
        argv = shlex.split(cmd, comments=True)[1:]
        if ">" in argv:
            argv = argv[: argv.index(">")]
        words = _words(argv)
        parser = build_parser(words[0] if words else None, words=words)
        try:
            parser.parse_args(argv)
        except SystemExit as exc:
            if exc.code not in (0, None):  # --help / --version exit 0
                bad.append(f"{where}: `{cmd}`")
    assert not bad, "documented command lines that do not parse:\n" + "\n".join(bad)
    assert len(_documented_command_lines()) > 100
