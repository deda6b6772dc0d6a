#!/usr/bin/env bash
# Quickstart 2: set up ./.venv and run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
# the HTML report is checked in headless Chromium (tests/report/test_report_in_browser.py): found on the
# PATH, else installed from Debian's apt (as root, or with sudo that asks no password), the same way
# locally and on CI; when neither works, say loudly which tests will be skipped and why
find_browser() {
    for b in chromium chromium-browser google-chrome google-chrome-stable; do
        if command -v "$b" >/dev/null 2>&1; then echo "$b"; return 0; fi
    done
    return 1
}
if ! find_browser >/dev/null; then
    sudo_cmd=""
    if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo_cmd="sudo -n"; fi
    if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ -n "$sudo_cmd" ]; }; then
        echo "installing chromium (Debian package) for the HTML report's browser test ..." >&2
        $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null \
            && $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null \
            || echo "could not install chromium with apt-get" >&2
    fi
fi
if browser=$(find_browser); then
    echo "HTML report browser test: using $(command -v "$browser")" >&2
else
    {
        echo "================================================================================"
        echo "NO CHROMIUM: the HTML report's browser tests WILL BE SKIPPED"
        echo "  (tests/report/test_report_in_browser.py: layout at 800 and 1280 px, text size, sorting)."
        echo "  Neither chromium nor google-chrome is on the PATH, and apt-get could not install it"
        echo "  (needs root or sudo without a password). Install it: apt-get install chromium"
        echo "================================================================================"
    } >&2
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
if [ -z "${browser:-}" ]; then
    echo "NOTE: the HTML report's browser tests were SKIPPED (no chromium; see the message above)" >&2
fi
exit "$rc"
