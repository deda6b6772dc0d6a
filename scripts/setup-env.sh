#!/usr/bin/env bash
# Create ./.venv (if missing) and install vistabench with its test extras.
# torch is installed first and pinned: an unpinned torch pulls several GB of CUDA packages.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setting up .venv (first run: a few minutes) ..." >&2
  "$PY" -m venv .venv
fi
quiet() {  # pip, minus the registry-mirror noise ("Location ... is ignored")
  "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
quiet .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip || true
.venv/bin/python -c "import torch" 2>/dev/null || \
  quiet .venv/bin/python -m pip install -q --disable-pip-version-check "torch==${TORCH_VERSION:-2.13.0}"
quiet .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]"
