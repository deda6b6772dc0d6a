"""What was done to a results file: the provenance that ``rerank`` and ``calibrate apply`` write
beside the file they make, so that a later ``eval``/``score`` or ``run`` of that file records its
scores as re-ranked or calibrated, not as detected.

A COCO/LVIS results file is a bare JSON list (the official tools read nothing else), so the
provenance is a second file, ``NAME.provenance.json`` beside ``NAME.json``::

    {"kind": "vistabench-detection-provenance", "version": 1,
     "results_sha256": "<sha256 of NAME.json as written>",
     "source": {"path": "dets.json", "sha256": "<sha256 of the detector's own file>"},
     "steps": [{"op": "rerank", "per_class_topk": 100},
               {"op": "calibrate", "method": "platt", "recipe": "vistabench", "calibration": "cal.json"}]}

``steps`` run from the detector's own file (``source``) to this one: a file made from a file that
has a provenance of its own extends its steps. A provenance counts only for the exact bytes it was
written for (``results_sha256``): a results file changed or replaced afterwards is scored as given,
with a warning that names the provenance file.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

__all__ = ["calibrated_words", "describe_steps", "made_by", "origin_of", "provenance_path", "read_provenance", "record_settings",
           "write_provenance"]

KIND, VERSION = "vistabench-detection-provenance", 1


def provenance_path(results: str | os.PathLike[str]) -> Path:
    """``NAME.provenance.json`` beside ``NAME.json`` (any other name: ``NAME.provenance.json`` after it)."""
    p = Path(results)
    return p.with_name((p.name[: -len(".json")] if p.name.endswith(".json") else p.name) + ".provenance.json")


def read_provenance(results: str | os.PathLike[str], sha256: str) -> dict[str, Any] | None:
    """The provenance beside ``results`` when it was written for these bytes (``sha256``); None when
    there is none. One that does not fit (another version of the file, or not a provenance file) is
    a warning naming it, and None."""
    path = provenance_path(results)
    if not path.is_file():
        return None
    try:
        obj = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        warnings.warn(f"provenance {str(path)!r}: not readable as JSON ({exc}); {str(results)!r} is recorded as given",
                      UserWarning, stacklevel=3)
        return None
    if not (isinstance(obj, dict) and obj.get("kind") == KIND and obj.get("version") == VERSION
            and isinstance(obj.get("steps"), list) and all(isinstance(s, dict) and "op" in s for s in obj["steps"])):
        warnings.warn(f"provenance {str(path)!r}: not a vistabench detection provenance file (version {VERSION}); "
                      f"{str(results)!r} is recorded as given", UserWarning, stacklevel=3)
        return None
    if obj.get("results_sha256") != sha256:
        warnings.warn(f"provenance {str(path)!r} was written for another version of {str(results)!r} (its sha256 "
                      "differs: the file changed after it was made); its scores are recorded as given",
                      UserWarning, stacklevel=3)
        return None
    return obj


def origin_of(source: str | os.PathLike[str]) -> dict[str, Any]:
    """What a file made from ``source`` descends from: ``{"source": {"path", "sha256"}, "steps": [...]}``,
    ``source``'s own provenance where it fits ``source`` (the detector's file further back, the
    steps so far), else ``source`` itself with no steps. Read it before the new file is written:
    the new file may replace ``source`` (``--out`` naming the same file)."""
    from ...data.predictions import file_sha256

    sha = file_sha256(source)
    with warnings.catch_warnings():  # a source's unfitting provenance was already reported when it was read
        warnings.simplefilter("ignore")
        before = read_provenance(source, sha)
    if before is None:
        return {"source": {"path": str(source), "sha256": sha}, "steps": []}
    return {"source": dict(before["source"]), "steps": list(before["steps"])}


def write_provenance(out: str | os.PathLike[str], origin: dict[str, Any], step: dict[str, Any]) -> Path:
    """Write the provenance of ``out`` (already written), made by ``step`` (``{"op": ..., options}``)
    from a file whose :func:`origin_of` is ``origin``. Returns its path."""
    from ...atomic import write_text
    from ...data.predictions import file_sha256

    obj = {"kind": KIND, "version": VERSION, "results_sha256": file_sha256(out), "source": origin["source"],
           "steps": origin["steps"] + [step]}
    path = provenance_path(out)
    write_text(path, json.dumps(obj, indent=1) + "\n", what="provenance file")
    return path


def record_settings(provenance: dict[str, Any] | None) -> dict[str, Any]:
    """The record settings that say how the scored detections were made (the table's Scores
    column): ``policy`` ("top-100/class"), ``calibration`` and ``recipe``, ``derived_from`` (the
    detector's own file and its sha256) and ``steps``; {} without a provenance."""
    if provenance is None:
        return {}
    out: dict[str, Any] = {"derived_from": dict(provenance["source"]), "steps": [dict(s) for s in provenance["steps"]]}
    reranks = [f"top-{s['per_class_topk']}/class" for s in provenance["steps"] if s["op"] == "rerank"]
    if reranks:
        out["policy"] = " then ".join(reranks)
    cals = [s for s in provenance["steps"] if s["op"] == "calibrate"]
    if cals:
        out["calibration"], out["recipe"] = cals[-1].get("method"), cals[-1].get("recipe")
    return out


def made_by(results: str | os.PathLike[str], sha256: str) -> dict[str, Any]:
    """The record settings of a scored results file whose bytes hash to ``sha256``: what its
    provenance says was done to it (:func:`record_settings`), {} when it has none that fits."""
    return record_settings(read_provenance(results, sha256))


def calibrated_words(method: Any, recipe: Any) -> str:
    """``"calibrated (platt)"``, ``"calibrated (platt, authors' recipe)"`` for the paper authors' recipe:
    how the CLI and the detection table name calibrated scores."""
    return f"calibrated ({method}" + (", authors' recipe)" if recipe == "devil" else ")")


def describe_steps(steps: list[dict[str, Any]]) -> str:
    """``"re-ranked (top-100/class), then calibrated (platt)"``: a provenance's steps in words."""
    words = []
    for s in steps:
        if s["op"] == "rerank":
            words.append(f"re-ranked (top-{s['per_class_topk']}/class)")
        elif s["op"] == "calibrate":
            words.append(calibrated_words(s.get("method"), s.get("recipe")))
        else:
            words.append(str(s["op"]))
    return ", then ".join(words)
