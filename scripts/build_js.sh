#!/usr/bin/env bash
# Rebuild the widget bundle (nbagent/notebook/static/widget.js, widget.css) from js/ with the pinned toolchain.
# Usage: scripts/build_js.sh [OUTDIR]   (default: nbagent/notebook/static)
set -euo pipefail
cd "$(dirname "$0")/../js"
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
node build.mjs "${1:-../nbagent/notebook/static}"
