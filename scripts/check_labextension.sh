#!/usr/bin/env bash
# CI check: rebuild the front-end extension from js/labextension/ and fail if the build differs from the
# committed nbagent/labextension/ (the webpack build is byte-reproducible for the same lockfile and the
# same JupyterLab in .venv). The committed files are put back afterwards, whatever the result.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/nbagent/labextension"
tmp="$(mktemp -d)"
cp -a "$out" "$tmp/committed"
restore() { rm -rf "$out"; cp -a "$tmp/committed" "$out"; rm -rf "$tmp"; }
trap restore EXIT
"$root/scripts/build_labextension.sh" >/dev/null 2>"$tmp/log" || { cat "$tmp/log" >&2; exit 1; }
if diff -r "$tmp/committed" "$out" >"$tmp/diff"; then
  echo "labextension up to date"
else
  sed 's/^/  /' "$tmp/diff" | head -20 >&2
  echo "nbagent/labextension/ differs from a fresh build of js/labextension/" \
       "(run scripts/build_labextension.sh and commit it)" >&2
  exit 1
fi
