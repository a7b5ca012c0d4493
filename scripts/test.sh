#!/usr/bin/env bash
# Set everything up and run every test: ruff and mypy on nbagent/, Python (incl. the real local
# model and real-browser widget tests), the JS unit tests, the bundle check, the notebooks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Debian packages the tests need: chromium (real-browser widget tests), node + npm
# (the bundle check and the JS unit tests) when the machine has none.
need=""
command -v chromium >/dev/null 2>&1 || need="$need chromium"
command -v node >/dev/null 2>&1 || need="$need nodejs npm"
if [ -n "$need" ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need >/dev/null
fi
status=0
# the linter (pyflakes, bugbear, pyupgrade, complexity <= 15) and the type checker, on nbagent/
.venv/bin/ruff check nbagent || status=1
.venv/bin/mypy || status=1
if [ -f js/package.json ]; then
  bash scripts/check_bundle.sh || status=1
  (cd js && node --test test/) || status=1
fi
.venv/bin/python -m pytest -q "$@" || status=$?
# the whole run (no arguments) also prints the widget's long-chat measures in headless Chromium
# (bench/bench_browser.py: long tasks while streaming at turn 200, DOM nodes, heap, reopen time;
# it reports its goals and never fails the run: speed is measured, not asserted)
if [ $# -eq 0 ] && [ $status -eq 0 ]; then
  timeout 900 .venv/bin/python bench/bench_browser.py || echo "bench_browser.py did not finish"
fi
exit $status
