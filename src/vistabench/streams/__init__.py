"""Task streams as data: the Nevis'22 FULL and SHORT task lists and a small embedded stream.

A stream file (JSON or YAML) holds::

    name, description, reference,
    meta_test_from_year: tasks of this year and later are meta-test, earlier ones meta-train,
    meta_test_presets?: {name: year} named cuts that --meta-test-from accepts (e.g. paper, dm-nevis),
    input: {image_size, channels}   (every task's images are resized to this before training),
    tasks: [{name, year, domain, kind: multiclass | multilabel, source, size?, resolution?, note?}]

``source`` says where a task's data come from: a dataset id looked up under the user's data root
(``<root>/<id>.npz`` or ``<root>/<id>/train|test/<class>/`` image folders), a
:func:`vistabench.data.load_dataset` spec (``npz:FILE``, ``cifar10:DIR``), or, for the embedded
stream, a dict ``{"embedded": "digits" | "mnist5k", classes, rotate, invert, attributes, ...}``
(see :mod:`vistabench.streams.sources`). Tasks must be in chronological (non-decreasing year) order.

Built-in streams (registry ``streams``): ``nevis-full`` (dm_nevis's FULL list and order),
``nevis-full-paper`` (the paper's Appendix L table), ``nevis-short``, ``embedded``.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from ..data.splits import content_hash
from ..errors import InputError
from ..registry import Registry

__all__ = ["Task", "Stream", "check_stream_spec", "load_stream", "streams", "stream_names", "KINDS"]

KINDS: tuple[str, ...] = ("multiclass", "multilabel")

streams: Registry[str] = Registry("stream")
for _name, _file in (("nevis-full", "nevis_full.json"), ("nevis-full-paper", "nevis_full_paper.json"),
                     ("nevis-short", "nevis_short.json"), ("embedded", "embedded.json")):
    streams.register(_name)(_file)


@dataclass(frozen=True)
class Task:
    """One task of a stream (metadata only; the data are resolved on demand).

    Attributes
    ----------
    index : int
        Position in the stream (0-based).
    uid : str
        Unique id ``"<index>-<slug of name>"`` (a repeated dataset gets a new uid, as in Nevis'22).
    name, year, domain, kind, source
        As in the stream file.
    size : int or None
        Number of training examples (metadata, e.g. from the paper's table).
    resolution : (int, int) or None
        Average (H, W) of the original images (metadata).
    split : {"meta-train", "meta-test"}
    """

    index: int
    uid: str
    name: str
    year: int
    domain: str
    kind: Literal["multiclass", "multilabel"]
    source: Any
    split: Literal["meta-train", "meta-test"]
    size: int | None = None
    resolution: tuple[int, int] | None = None
    note: str | None = None

    def info(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "note"}


@dataclass
class Stream:
    """An ordered list of tasks with its meta-train / meta-test cut and input format."""

    name: str
    tasks: list[Task]
    meta_test_from_year: int
    image_size: int
    channels: int
    description: str = ""
    reference: str = ""
    origin: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    meta_test_presets: dict[str, int] = field(default_factory=dict)
    meta_test_choice: str = "stream file"

    def meta_test_cut(self) -> str:
        """One line saying which meta-train / meta-test cut is used and where it came from."""
        named = [k for k, v in self.meta_test_presets.items() if v == self.meta_test_from_year]
        alias = f" = {'/'.join(named)}" if named else ""
        return (f"meta-test from {self.meta_test_from_year}{alias} ({self.meta_test_choice}): "
                f"{len(self.meta_train())} meta-train, {len(self.meta_test())} meta-test tasks")

    @property
    def hash(self) -> str:
        """sha256 of the canonical JSON of the stream definition."""
        return content_hash(self.raw)

    def meta_test(self) -> list[Task]:
        return [t for t in self.tasks if t.split == "meta-test"]

    def meta_train(self) -> list[Task]:
        return [t for t in self.tasks if t.split == "meta-train"]

    def repeats(self) -> list[tuple[Task, Task]]:
        """(first, second) appearances of every task name that occurs more than once (consecutive pairs)."""
        seen: dict[str, Task] = {}
        out = []
        for t in self.tasks:
            if t.name in seen:
                out.append((seen[t.name], t))
            seen[t.name] = t
        return out

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "tasks": len(self.tasks), "meta_train": len(self.meta_train()),
                "meta_test": len(self.meta_test()), "meta_test_from_year": self.meta_test_from_year,
                "meta_test_presets": dict(self.meta_test_presets), "meta_test_choice": self.meta_test_choice,
                "image_size": self.image_size, "channels": self.channels, "hash": self.hash,
                "repeated": sorted({a.name for a, _ in self.repeats()})}


def stream_names() -> list[str]:
    return streams.names()


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-") or "task"


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark accepted, as every user file's
    except UnicodeDecodeError as exc:
        raise InputError(f"stream {str(path)!r}: not a UTF-8 text file") from exc
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            raise InputError(f"stream {str(path)!r}: malformed YAML "
                             f"({getattr(exc, 'problem', None) or type(exc).__name__}{at})") from exc
    else:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"stream {str(path)!r}: malformed JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(doc, dict):
        raise InputError(f"stream {str(path)!r}: expected a mapping at the top level, got {type(doc).__name__}")
    return doc


def _int(v: Any, where: str, *, positive: bool = False) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(f"{where}: expected an integer, got {v!r}")
    if positive and v <= 0:
        raise InputError(f"{where}: expected a positive integer, got {v!r}")
    return v


def parse_stream(doc: dict[str, Any], *, origin: str = "<dict>") -> Stream:
    """Validate a stream definition (a dict as read from JSON/YAML) and build a :class:`Stream`."""
    where = f"stream {origin}"
    for key in ("name", "meta_test_from_year", "tasks"):
        if key not in doc:
            raise InputError(f"{where}: missing key {key!r}")
    name = doc["name"]
    if not isinstance(name, str) or not name:
        raise InputError(f"{where}: 'name' must be a non-empty string, got {name!r}")
    cut = _int(doc["meta_test_from_year"], f"{where}: meta_test_from_year")
    presets = doc.get("meta_test_presets", {})
    if not isinstance(presets, dict) or not all(isinstance(k, str) for k in presets):
        raise InputError(f"{where}: 'meta_test_presets' must map names to years, got {presets!r}")
    presets = {k: _int(v, f"{where}: meta_test_presets.{k}") for k, v in presets.items()}
    inp = doc.get("input", {})
    if not isinstance(inp, dict):
        raise InputError(f"{where}: 'input' must be a mapping like {{image_size: 32, channels: 3}}, got {inp!r}")
    size = _int(inp.get("image_size", 32), f"{where}: input.image_size", positive=True)
    channels = _int(inp.get("channels", 3), f"{where}: input.channels", positive=True)
    raw_tasks = doc["tasks"]
    if not isinstance(raw_tasks, list) or not raw_tasks:
        raise InputError(f"{where}: 'tasks' must be a non-empty list")
    tasks: list[Task] = []
    prev_year = None
    for i, t in enumerate(raw_tasks):
        tw = f"{where}: task {i}"
        if not isinstance(t, dict):
            raise InputError(f"{tw}: expected a mapping, got {type(t).__name__}")
        missing = [k for k in ("name", "year", "kind", "source") if k not in t]
        if missing:
            raise InputError(f"{tw}: missing key(s) {missing}")
        year = _int(t["year"], f"{tw}: year")
        if prev_year is not None and year < prev_year:
            raise InputError(f"{tw} ({t['name']!r}): year {year} comes after {prev_year}; tasks must be chronological")
        prev_year = year
        if t["kind"] not in KINDS:
            raise InputError(f"{tw}: kind must be one of {list(KINDS)}, got {t['kind']!r}")
        src = t["source"]
        if not (isinstance(src, str) and src) and not (isinstance(src, dict) and "embedded" in src):
            raise InputError(f"{tw}: source must be a dataset id / load_dataset spec or a mapping with 'embedded', got {src!r}")
        res = t.get("resolution")
        if res is not None and not (isinstance(res, list) and len(res) == 2 and all(isinstance(r, int) for r in res)):
            raise InputError(f"{tw}: resolution must be [H, W] integers or null, got {res!r}")
        tsize = t.get("size")
        if tsize is not None:
            _int(tsize, f"{tw}: size", positive=True)
        tasks.append(Task(
            index=i, uid=f"{i:03d}-{_slug(str(t['name']))}", name=str(t["name"]), year=year,
            domain=str(t.get("domain") or "unknown"), kind=t["kind"], source=src,
            split="meta-test" if year >= cut else "meta-train", size=tsize,
            resolution=tuple(res) if res is not None else None, note=t.get("note"),
        ))
    return Stream(name=name, tasks=tasks, meta_test_from_year=cut, image_size=size, channels=channels,
                  description=str(doc.get("description", "")), reference=str(doc.get("reference", "")),
                  origin=origin, raw=doc, meta_test_presets=presets)


def check_stream_spec(spec: str, name: str = "stream") -> None:
    """A one-line InputError naming ``name`` unless ``spec`` is a built-in stream's name (close matches
    suggested) or looks like a stream file (``.json``/``.yaml``, or an existing file); reads nothing."""
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(f"{name}: expected a stream name or a file path, got {spec!r}")
    p = Path(spec)
    if p.suffix.lower() in (".json", ".yaml", ".yml") or p.exists():
        return
    try:
        streams.get(spec)
    except InputError as exc:
        raise InputError(f"{name}: {exc} (or a .json/.yaml stream file)") from None


def load_stream(spec: str, *, meta_test_from_year: int | str | None = None) -> Stream:
    """A built-in stream by name (``nevis-full``, ``nevis-full-paper``, ``nevis-short``, ``embedded``) or a JSON/YAML file.

    ``meta_test_from_year`` overrides the file's cut between meta-train and meta-test: a year, or
    the name of one of the stream's ``meta_test_presets`` (the Nevis streams: ``paper`` = 2019, the
    paper's last three years; ``dm-nevis`` = 2020, dm_nevis's ``DEFAULT_NEVIS_STOP_YEAR``).
    The result's :meth:`Stream.meta_test_cut` says which is used.
    """
    if not isinstance(spec, str) or not spec:
        raise InputError(f"stream: expected a stream name or a file path, got {spec!r}")
    p = Path(spec)
    if p.is_dir():
        raise InputError(f"stream {spec!r}: is a folder, expected a JSON/YAML stream file or a stream name")
    if p.suffix.lower() in (".json", ".yaml", ".yml") or p.is_file():
        if not p.is_file():
            raise InputError(f"stream {spec!r}: no such file")
        doc, origin = _read_file(p), str(p)
    else:
        try:
            fname = streams.get(spec)
        except InputError as exc:
            raise InputError(f"stream: {exc} (or a .json/.yaml stream file)") from None
        doc = json.loads(resources.files(__name__).joinpath(fname).read_text(encoding="utf-8"))
        origin = f"built-in:{spec}"
    choice = "stream file default"
    if meta_test_from_year is not None:
        presets = doc.get("meta_test_presets") or {}
        v = meta_test_from_year
        if isinstance(v, str) and not v.strip().lstrip("-").isdigit():
            if v not in presets:
                raise InputError(f"meta_test_from: expected a year or one of {sorted(presets)} for stream "
                                 f"{doc.get('name', spec)!r}, got {v!r}")
            year, choice = int(presets[v]), f"--meta-test-from {v}"
        elif isinstance(v, bool) or not isinstance(v, (int, str)):
            raise InputError(f"meta_test_from: expected a year or a preset name, got {v!r}")
        else:
            year, choice = int(v), f"--meta-test-from {int(v)}"
        doc = {**doc, "meta_test_from_year": year}
    stream = parse_stream(doc, origin=origin)
    stream.meta_test_choice = choice
    if meta_test_from_year is not None and stream.tasks and not stream.meta_test():
        years = sorted({t.year for t in stream.tasks})
        raise InputError(f"meta_test_from: {meta_test_from_year} leaves no meta-test task in stream "
                         f"{stream.name!r} (its tasks are from {years[0]}..{years[-1]}); pick a year up to {years[-1]}")
    return stream
