"""The CLI makes idle OpenMP threads sleep (OMP_WAIT_POLICY=PASSIVE) unless told otherwise, and the
policy changes no number."""

import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _python(code: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    base["PYTHONPATH"] = SRC + os.pathsep + base.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


SET = "import os, vistabench.cli as c; c._passive_openmp(); print(os.environ.get('OMP_WAIT_POLICY'))"


def test_passive_unless_the_environment_chooses():
    assert _python(SET) == "PASSIVE"
    assert _python(SET, OMP_WAIT_POLICY="active") == "active"
    # once torch is loaded, its OpenMP runtime has read the environment: nothing is pretended
    assert _python("import torch; " + SET) == "None"


TRAIN = """
import hashlib, numpy as np, torch
from vistabench.learners.models import build_model
from vistabench.learners.trainer import TrainConfig, Trainer
torch.set_num_threads(2)
rng = np.random.default_rng(0)
x = rng.integers(0, 256, (40, 8, 8, 1), dtype=np.uint8); y = np.arange(40) % 4
tr = Trainer(build_model("cnn28", num_classes=4, in_channels=1, seed=0),
             TrainConfig(epochs=1, batch_size=20, lr=0.05, count_flops=False))
tr.fit(x, y)
print(hashlib.sha256(tr.predict_logits(x).tobytes()).hexdigest())
"""


def test_the_wait_policy_changes_no_number():
    """Two threads training cnn28 give the same logits, bit for bit, whether idle threads sleep or spin."""
    assert _python(TRAIN, OMP_WAIT_POLICY="PASSIVE") == _python(TRAIN, OMP_WAIT_POLICY="ACTIVE")
