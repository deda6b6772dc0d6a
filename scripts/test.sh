#!/usr/bin/env bash
# Quickstart 2: set up ./.venv and run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
# the HTML report is checked in headless Chromium (tests/report/test_report_in_browser.py, skipped
# without it); on CI, install Debian's chromium when it is missing (quietly; nothing to do when present)
if [ "${CI:-}" = "true" ] && ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    sudo_cmd=""
    if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then sudo_cmd="sudo"; fi
    echo "installing chromium for the HTML report test ..." >&2
    $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null \
        && $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null \
        || echo "could not install chromium: the browser test will be skipped" >&2
fi
# the linter first (pyflakes, pycodestyle, bugbear; settings in pyproject.toml): seconds, fails the run
.venv/bin/python -m ruff check --quiet src tests benchmarks examples scripts
set +e
.venv/bin/python -m pytest -q "$@"
rc=$?
if [ "$rc" -eq 5 ]; then echo "no tests were collected: failing" >&2; exit 1; fi
exit "$rc"
