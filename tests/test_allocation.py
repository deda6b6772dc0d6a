"""vistabench.allocation.large_arrays: freed memory kept for reuse and no transparent huge pages
inside the block, both restored after it, no number changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from vistabench import allocation

GLIBC = allocation._glibc() is not None

# Where fresh 64 MB arrays live: glibc serves each with a mapping of its own by default (above the
# mmap threshold), from the heap ("[heap]" in /proc/self/maps) when mappings are off.
_WHERE = textwrap.dedent("""
    import json, numpy as np
    from vistabench.allocation import large_arrays, thp_disabled, _glibc

    def in_heap(a):
        addr = a.__array_interface__["data"][0]
        for line in open("/proc/self/maps"):
            span, *rest = line.split()
            lo, hi = (int(x, 16) for x in span.split("-"))
            if lo <= addr < hi:
                return line.rstrip().endswith("[heap]")
        raise AssertionError("address not mapped")

    def thp_off():
        return thp_disabled(_glibc())

    def two():  # the second cannot come from memory freed before: a new mapping, or the heap grown
        a = np.ones(8 << 20)
        b = np.ones(8 << 20)
        return [in_heap(a), in_heap(b)]

    out = {"before": two(), "thp_off_before": thp_off()}
    with large_arrays():
        out["inside"] = two()
        out["thp_off_inside"] = thp_off()
    out["after"] = in_heap(np.ones(32 << 20))  # larger than all freed inside: served as by default
    out["thp_off_after"] = thp_off()
    print(json.dumps(out))
""")


def _where(env_extra: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES"))}
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", _WHERE], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.skipif(not (GLIBC and os.path.exists("/proc/self/maps")), reason="glibc and /proc needed")
def test_large_arrays_keeps_memory_in_the_heap_and_restores_after():
    got = _where({})
    assert got["before"] == [False, False]  # glibc's default: a mapping of its own each
    assert got["inside"] == [True, True]  # kept for reuse: from the heap
    assert got["after"] is False  # defaults back
    assert got["thp_off_inside"] == 1 and got["thp_off_after"] == got["thp_off_before"]


@pytest.mark.skipif(not (GLIBC and os.path.exists("/proc/self/maps")), reason="glibc and /proc needed")
def test_switch_off_leaves_the_defaults():
    got = _where({"VISTABENCH_LARGE_ARRAYS": "0"})
    assert got["inside"] == [False, False]
    assert got["thp_off_inside"] == got["thp_off_before"]


@pytest.mark.skipif(not GLIBC, reason="glibc needed")
def test_settings_restored_after_an_error():
    libc = allocation._glibc()
    was = allocation.thp_disabled(libc)
    if was < 0:
        pytest.skip("the kernel has no PR_GET_THP_DISABLE (before Linux 3.15)")
    with pytest.raises(KeyError):
        with allocation.large_arrays():
            assert allocation.thp_disabled(libc) == 1
            raise KeyError("x")
    assert allocation.thp_disabled(libc) == was


def test_detection_scores_identical_with_and_without(tmp_path, monkeypatch, capsys):
    """`detection score` wraps reading and scoring in large_arrays: the same numbers either way."""
    from vistabench.cli import main

    assert main(["detection", "synth", "--out", str(tmp_path / "syn"), "--images", "40", "--categories", "30"]) == 0
    capsys.readouterr()
    argv = ["detection", "score", "--gt", str(tmp_path / "syn" / "gt.json"), "--results",
            str(tmp_path / "syn" / "results.json"), "--no-store", "--json"]
    outs = []
    for switch in ("0", "1"):
        monkeypatch.setenv("VISTABENCH_LARGE_ARRAYS", switch)
        assert main(argv) == 0
        outs.append(json.loads(capsys.readouterr().out))
    for v in ("old", "fixed", "pool"):
        assert outs[0][v] == outs[1][v]
    assert 0 < outs[1]["old"]["AP"] < 1
