#!/usr/bin/env bash
# Rebuild nbagent's JupyterLab 4 / Notebook 7 front-end extension (nbagent/labextension/, shipped in the
# wheel as share/jupyter/labextensions/jupyter-nbagent) from js/labextension/ with the pinned toolchain
# (package-lock.json): tsc, then @jupyterlab/builder's webpack build against the JupyterLab in .venv
# (its staging package.json says which packages the page shares).
#
# The build runs in one fixed folder, not in the checkout: webpack's module ids hash the build folder's
# absolute path, so a checkout elsewhere (a worktree, CI's clone) built different bytes from the same
# sources. The sources are copied there, node_modules stays there between builds, the output comes back.
# Usage: scripts/build_labextension.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${NBAGENT_LABEXTENSION_BUILD:-/tmp/nbagent-labextension-build}"
mkdir -p "$build/js/labextension"
exec 9>"$build/.lock"
flock 9  # one build at a time in the shared folder
src="$root/js/labextension"
cd "$build/js/labextension"
find . -mindepth 1 -maxdepth 1 ! -name node_modules -exec rm -rf {} +
cp -a "$src/package.json" "$src/package-lock.json" "$src/tsconfig.json" "$src/install.json" "$src/src" "$src/style" .
if [ ! -d node_modules ] || ! cmp -s package-lock.json node_modules/.nbagent-lock; then
  npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json node_modules/.nbagent-lock
fi
python="${PYTHON:-$root/.venv/bin/python}"
core="$("$python" -c 'import jupyterlab, os; print(os.path.join(os.path.dirname(jupyterlab.__file__), "staging"))')"
node_modules/.bin/tsc
rm -rf "$build/nbagent/labextension"
node node_modules/@jupyterlab/builder/lib/build-labextension.js --core-path "$core" . >/dev/null
rm -rf "$root/nbagent/labextension"
cp -a "$build/nbagent/labextension" "$root/nbagent/labextension"
echo "built nbagent/labextension/ ($(ls "$root/nbagent/labextension/static" | wc -l) files in static/)"
