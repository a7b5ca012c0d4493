#!/usr/bin/env bash
# Set everything up and open JupyterLab on the quick-start notebook (offline model).
# The server is rooted at this repository (the examples are in notebooks/). A browser opens
# http://localhost:8888/lab/tree/notebooks/quickstart.ipynb; without one (--no-browser, a remote
# machine) open the http://127.0.0.1:8888/lab?token=... URL it prints (another port when 8888 is
# taken) and then notebooks/quickstart.ipynb. Extra arguments go to `jupyter lab`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/jupyter ]; then
  echo "nbagent: first run: installing nbagent, JupyterLab and the offline model into ./.venv" \
       "(about 2 minutes; later runs start at once)..."
fi
bash scripts/setup.sh
echo "nbagent: starting JupyterLab on notebooks/quickstart.ipynb (Ctrl+C stops it)"
args=(--ServerApp.root_dir="$PWD")
if [ "$(id -u)" = "0" ]; then
  args+=(--allow-root)  # Jupyter refuses to start as root without it (containers, CI machines)
fi
exec .venv/bin/jupyter lab "${args[@]}" notebooks/quickstart.ipynb "$@"
