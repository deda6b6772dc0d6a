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
# every protocol's LaTeX table is compiled with pdflatex (tests/report/test_table_formats.py, skipped
# without it); on CI, install a minimal TeX when missing (texlive-latex-recommended holds booktabs);
# outside CI, say loudly that the LaTeX test will be skipped
if ! command -v pdflatex >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ] && command -v apt-get >/dev/null 2>&1; then
        tex_sudo=""
        if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then tex_sudo="sudo"; fi
        echo "installing a minimal TeX (pdflatex, booktabs) for the LaTeX table test ..." >&2
        $tex_sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null \
            && $tex_sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                texlive-latex-base texlive-latex-recommended >/dev/null \
            || echo "could not install TeX: the LaTeX table test will be skipped" >&2
    else
        echo "############################################################################" >&2
        echo "# no pdflatex on the PATH: the LaTeX table test (test_table_formats.py)     #" >&2
        echo "# will be SKIPPED. Install it: apt-get install texlive-latex-base            #" >&2
        echo "#   texlive-latex-recommended                                                #" >&2
        echo "############################################################################" >&2
    fi
fi
# the linter first (pyflakes, pycodestyle, bugbear; settings in pyproject.toml): seconds, fails the run
.venv/bin/python -m ruff check --quiet src tests benchmarks examples scripts
set +e
.venv/bin/python -m pytest -q "$@"
rc=$?
if [ "$rc" -eq 5 ]; then echo "no tests were collected: failing" >&2; exit 1; fi
exit "$rc"
