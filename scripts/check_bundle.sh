#!/usr/bin/env bash
# CI check: rebuild the bundle from js/ into a temporary folder and fail if it differs from the
# committed nbagent/notebook/static/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$root/scripts/build_js.sh" "$tmp" >/dev/null
status=0
# every file of the fresh build and every file committed in static/ (a stale or missing one fails)
for f in $( (ls "$tmp"; ls "$root/nbagent/notebook/static") | sort -u); do
  if ! cmp -s "$tmp/$f" "$root/nbagent/notebook/static/$f"; then
    echo "nbagent/notebook/static/$f differs from a fresh build of js/ (run scripts/build_js.sh and commit it)" >&2
    status=1
  fi
done
[ $status -eq 0 ] && echo "bundle up to date"
exit $status
