#!/usr/bin/env bash
# Rebuild nbagent's JupyterLab 4 / Notebook 7 front-end extension (nbagent/labextension/, shipped in the
# wheel as share/jupyter/labextensions/jupyter-nbagent) from js/labextension/ with the pinned toolchain
# (package-lock.json): tsc, then @jupyterlab/builder's webpack build against the JupyterLab in .venv
# (its staging package.json says which packages the page shares).
# Usage: scripts/build_labextension.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/js/labextension"
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
python="${PYTHON:-$root/.venv/bin/python}"
core="$("$python" -c 'import jupyterlab, os; print(os.path.join(os.path.dirname(jupyterlab.__file__), "staging"))')"
rm -rf lib tsconfig.tsbuildinfo
node_modules/.bin/tsc
node node_modules/@jupyterlab/builder/lib/build-labextension.js --core-path "$core" . >/dev/null
echo "built nbagent/labextension/ ($(ls "$root/nbagent/labextension/static" | wc -l) files in static/)"
