#!/usr/bin/env bash
# Build the documentation site (docs/ -> docs/_build/html) with Sphinx, MyST-NB and the PyData theme.
#
#   scripts/docs.sh build    build it and exit: non-zero on any warning (-W: a broken link or cross-reference,
#                            a page in no toctree, an undocumented public name) or on any example that fails
#                            (every notebook and code cell runs, as README's code blocks do)
#   scripts/docs.sh          build it, then serve it on http://127.0.0.1:8000/ (PORT=... for another port)
#
# After scripts/setup.sh (its `docs` dependency group has Sphinx) nothing else is needed. Every build runs
# every example (about a minute); CACHE=1, while writing pages, reuses the outputs of the notebooks unchanged
# since the last build (MyST-NB's cache in docs/_build/.jupyter_cache), so a change to nbagent can go unseen.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=docs/_build/html

build() {
  local start=$SECONDS
  if ! .venv/bin/python -c "import sphinx, myst_nb, pydata_sphinx_theme" 2>/dev/null; then
    echo "docs: Sphinx, MyST-NB or the PyData theme is missing from .venv: run scripts/setup.sh" >&2
    exit 1
  fi
  local execution=()
  if [ "${CACHE:-0}" = 1 ]; then execution=(-D nb_execution_mode=cache); fi
  # -W --keep-going: every warning is reported, then the build fails; -n: nitpicky (every reference resolves);
  # -E: every page is read afresh, so the checks of the whole site run every time
  .venv/bin/python -m sphinx -b html -W --keep-going -n -E -q "${execution[@]}" docs "$OUT"
  # internal links between pages, checked offline: the HTML builder already fails on a broken reference or
  # a missing page or image; linkcheck would add the web links, which need the network (not run here)
  echo "docs: built $OUT/index.html in $((SECONDS - start)) s"
}

case "${1:-serve}" in
  build) build ;;
  serve)
    build
    port="${PORT:-8000}"
    echo "docs: serving on http://127.0.0.1:$port/ (Ctrl+C stops)"
    exec .venv/bin/python -m http.server "$port" --bind 127.0.0.1 --directory "$OUT"
    ;;
  *) echo "usage: scripts/docs.sh [build]" >&2; exit 2 ;;
esac
