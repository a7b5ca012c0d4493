#!/usr/bin/env bash
# Set everything up and open JupyterLab on the quickstart notebook (offline model).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/jupyter lab notebooks/quickstart.ipynb "$@"
