#!/usr/bin/env bash
# Create ./.venv (if missing) and install vistabench with everything the demo and the tests use:
# torch first and pinned (an unpinned torch pulls several GB of CUDA packages), then `.[all,test]`.
# A second run skips pip when nothing changed: .venv/vistabench-setup.stamp records pyproject.toml's
# sha256, the venv's Python and the torch version; delete it (or .venv) to force a reinstall.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH=${TORCH_VERSION:-2.13.0}
STAMP=.venv/vistabench-setup.stamp
if [ ! -x .venv/bin/python ]; then
  echo "setting up .venv (first run: a few minutes) ..." >&2
  "$PY" -m venv .venv
fi
# what the install depends on; the installed packages are looked up, never imported (fast)
wanted() {
  echo "pyproject.toml $(.venv/bin/python -c 'import hashlib; print(hashlib.sha256(open("pyproject.toml", "rb").read()).hexdigest())')"
  echo "python $(.venv/bin/python -c 'import sys; print(sys.version.split()[0])')"
  echo "torch $TORCH"
}
installed_ok() {  # vistabench installed from this checkout, and the pinned torch
  .venv/bin/python -I - "$TORCH" <<'EOF' 2>/dev/null  # -I: what the venv itself has (no PYTHONPATH)
import importlib.metadata as md, importlib.util, os, sys
spec = importlib.util.find_spec("vistabench")
assert spec is not None and os.path.realpath(spec.origin).startswith(os.path.realpath("src") + os.sep)
assert md.version("torch").split("+")[0] == sys.argv[1]
EOF
}
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(wanted)" ] && installed_ok; then
  exit 0  # nothing changed since the last install
fi
quiet() {  # pip, minus the registry-mirror noise ("Location ... is ignored")
  "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
rm -f "$STAMP"
quiet .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip || true
have_torch=$(.venv/bin/python -c 'import importlib.metadata as md; print(md.version("torch").split("+")[0])' 2>/dev/null || true)
if [ "$have_torch" != "$TORCH" ]; then
  quiet .venv/bin/python -m pip install -q --disable-pip-version-check "torch==$TORCH"
fi
quiet .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[all,test]"
wanted > "$STAMP"
