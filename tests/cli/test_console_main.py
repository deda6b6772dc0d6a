"""The `vistabench` program's entry: `main`, then the objects alive are frozen out of the cyclic
collector before the process ends (its last collections at exit only cost time); `main` alone, as
tests, notebooks and the grid call it, leaves the collector as it was."""

import json
import subprocess
import sys

_PROBE = """
import gc, json, sys
from vistabench.cli import console_main, main
sys.argv = ["vistabench", "detection", "synth", "--out", sys.argv[1] + "/a", "--images", "3", "--categories", "2",
            "--dets-per-image", "2", "--json"]
status_main = main(sys.argv[1:])
frozen_main = gc.get_freeze_count()
sys.argv[4] = sys.argv[4][:-1] + "b"
status_console = console_main()
print(json.dumps({"main": [status_main, frozen_main], "console": [status_console, gc.get_freeze_count()]}),
      file=sys.stderr)
"""


def test_console_main_freezes_the_objects_main_does_not(tmp_path):
    done = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stderr.strip().splitlines()[-1])
    assert got["main"] == [0, 0]
    assert got["console"][0] == 0 and got["console"][1] > 1000  # numpy's and vistabench's objects
    assert (tmp_path / "a" / "results.json").is_file() and (tmp_path / "b" / "results.json").is_file()


def test_python_dash_m_runs_the_program(tmp_path):
    done = subprocess.run([sys.executable, "-m", "vistabench", "detection", "synth", "--out", str(tmp_path / "s"),
                           "--images", "3", "--categories", "2", "--dets-per-image", "2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "wrote" in done.stdout, done.stderr
