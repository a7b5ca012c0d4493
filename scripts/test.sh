#!/usr/bin/env bash
# Run the tests in tiers.
#
#   scripts/test.sh --fast [pytest args]   ruff and mypy on nbagent/, the widget bundle check and the JS
#                                          tests (when node is installed), then the fast tier: every test not
#                                          marked browser, notebook, wheel or local_model (unit, provider,
#                                          recorded-fixture, loopback-server tests), in parallel
#                                          (pytest-xdist) with the 15 slowest listed.
#   scripts/test.sh [pytest args]          everything: setup, ruff, mypy, the bundle check and the JS tests,
#                                          every pytest tier (the real local model, the widget in real
#                                          JupyterLab / Notebook 7 / marimo + Chromium, the notebooks, the
#                                          built wheel in a fresh venv), then the docs tier (scripts/docs.sh
#                                          build: the site, warnings as errors). Speed is measured apart, never
#                                          asserted: bench/run_all.py (--browser adds bench_browser.py).
#
# Every test has a time limit (pyproject's `timeout`; longer per tier in tests/support/tiers.py), so a hung
# test fails with its name. Browser tests run under `flock /tmp/nbagent-browser.lock`: one Chromium
# suite at a time on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/.."
FAST_TIER="not (browser or notebook or wheel or local_model)"

if [ "${1:-}" = "--fast" ]; then
  shift
  bash scripts/setup.sh  # about a second when nothing it installs from changed
  status=0
  .venv/bin/ruff check nbagent || status=1
  .venv/bin/mypy || status=1
  if command -v node >/dev/null 2>&1; then  # the JS half too: the widget bundle matches js/, its tests pass
    bash scripts/check_bundle.sh || status=1
    (cd js && node --test test/ >/tmp/nbagent-js-tests.log 2>&1) || { tail -40 /tmp/nbagent-js-tests.log; status=1; }
  fi
  .venv/bin/python -m pytest -q -n auto --durations=15 -m "$FAST_TIER" "$@" || status=$?
  exit $status
fi

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
# ccusage (npm), for the differential test of agent_usage() against its --json reports
# (tests/test_agent_usage.py); its npm package pins a linux-x64 binary that was never published,
# so the binary's own package is named with the version that exists
ccusage_dir="${NBAGENT_CCUSAGE_DIR:-$HOME/.cache/nbagent/ccusage}"
if [ ! -x "$ccusage_dir/node_modules/.bin/ccusage" ] && [ "$(uname -sm)" = "Linux x86_64" ]; then
  npm install --no-audit --no-fund --loglevel=error --prefix "$ccusage_dir" \
    ccusage@20.0.26 @ccusage/ccusage-linux-x64@20.0.24 >/dev/null || echo "ccusage not installed: its test skips"
fi
# Claude Code and Codex (npm), run headless against a scripted model on loopback by tests/test_serve_clients.py:
# they prove the setup lines nbagent.serve() prints (about 4 s and 7 s to install, 235 and 424 MB, once)
claude_dir="${NBAGENT_CLAUDE_CODE_DIR:-$HOME/.cache/nbagent/claude-code}"
if [ ! -x "$claude_dir/node_modules/.bin/claude" ]; then
  npm install --no-audit --no-fund --loglevel=error --prefix "$claude_dir" \
    @anthropic-ai/claude-code@2.1.197 >/dev/null || echo "Claude Code not installed: its test skips"
fi
codex_dir="${NBAGENT_CODEX_DIR:-$HOME/.cache/nbagent/codex}"
if [ ! -x "$codex_dir/node_modules/.bin/codex" ]; then
  npm install --no-audit --no-fund --loglevel=error --prefix "$codex_dir" \
    @openai/codex@0.171.0 >/dev/null || echo "Codex not installed: its test skips"
fi
if [ -f js/package.json ]; then
  bash scripts/check_bundle.sh || status=1
  bash scripts/check_labextension.sh || status=1  # the JupyterLab / Notebook 7 extension (js/labextension)
  (cd js && node --test test/) || status=1
fi
if [ $# -eq 0 ]; then
  # the fast tier in parallel, then the slow tiers one test at a time (they start servers, kernels
  # and browsers of their own)
  .venv/bin/python -m pytest -q -n auto --durations=15 -m "$FAST_TIER" || status=$?
  flock /tmp/nbagent-browser.lock .venv/bin/python -m pytest -q --durations=15 -m "not ($FAST_TIER)" || status=$?
  # the docs tier: the documentation site builds with no warning, every cross-reference resolves and every
  # example notebook runs (scripts/docs.sh; about a minute from a fresh clone)
  bash scripts/docs.sh build || status=1
else
  flock /tmp/nbagent-browser.lock .venv/bin/python -m pytest -q "$@" || status=$?
fi
exit $status
