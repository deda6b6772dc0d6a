#!/usr/bin/env bash
# Create ./.venv (if missing) and install vistabench with its test extras.
# torch is installed first and pinned: an unpinned torch pulls several GB of CUDA packages.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
python -c "import torch" 2>/dev/null || python -m pip install -q --disable-pip-version-check "torch==${TORCH_VERSION:-2.13.0}"
python -m pip install -q --disable-pip-version-check -e ".[test]"
