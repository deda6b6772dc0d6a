#!/usr/bin/env bash
# Quickstart 1: set up ./.venv and run the demo on bundled data (a few minutes on 2 CPU cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
exec .venv/bin/vistabench demo "$@"
