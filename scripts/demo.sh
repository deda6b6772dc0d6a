#!/usr/bin/env bash
# Quickstart 1: set up ./.venv and run the demo on bundled data (a few minutes on 2 CPU cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
# One BLAS thread: scipy's L-BFGS-B (detection calibration) spent ~75% of the detection demo in
# OpenBLAS threads contending on the shared cores; one thread gives the same tables, 3-4x faster.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
exec .venv/bin/vistabench demo "$@"
