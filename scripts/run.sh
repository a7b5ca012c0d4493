#!/usr/bin/env bash
# Set everything up and open JupyterLab on the quick-start notebook (offline model).
# The server is rooted at this repository. The example notebooks are copied from notebooks/ into
# my-notebooks/ (git ignores it; a copy already there is kept, with your edits and chats), and
# JupyterLab opens my-notebooks/quickstart.ipynb, so running them leaves the repository clean.
# A browser opens http://localhost:8888/lab/tree/my-notebooks/quickstart.ipynb; without one
# (--no-browser, a remote machine) open the http://127.0.0.1:8888/lab/tree/...?token=... URL it
# prints (another port when 8888 is taken). Extra arguments go to `jupyter lab`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f .venv/.nbagent-setup ]; then
  echo "nbagent: first run: installing nbagent, JupyterLab and the offline model into ./.venv" \
       "(2-10 minutes; each step prints its progress; later runs skip the install)"
fi
bash scripts/setup.sh

mkdir -p my-notebooks
for nb in notebooks/*.ipynb; do
  [ -e "my-notebooks/${nb##*/}" ] || cp "$nb" my-notebooks/
done
echo "nbagent: the example notebooks are in my-notebooks/ (copies of notebooks/; delete one to get it afresh)"

# No "get notified about Jupyter news?" toast over the quick start: this venv's JupyterLab gets
# default settings with news and update checks off (share/jupyter/lab/settings/overrides.json of
# .venv only, merged into what is there; your own JupyterLab settings still win).
.venv/bin/python - <<'EOF'
import json, sys
from pathlib import Path

path = Path(sys.prefix, "share", "jupyter", "lab", "settings", "overrides.json")
settings = json.loads(path.read_text()) if path.is_file() else {}
notification = settings.setdefault("@jupyterlab/apputils-extension:notification", {})
if notification.get("fetchNews") != "false" or notification.get("checkForUpdates") is not False:
    notification.update(fetchNews="false", checkForUpdates=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2) + "\n")
EOF

echo "nbagent: starting JupyterLab on my-notebooks/quickstart.ipynb (Ctrl+C stops it)"
# the URL it prints (and the browser opens) is the quick start's, not the bare /lab
args=(--ServerApp.root_dir="$PWD" --LabApp.default_url=/lab/tree/my-notebooks/quickstart.ipynb
      --LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate)
if [ "$(id -u)" = "0" ]; then
  args+=(--allow-root)  # Jupyter refuses to start as root without it (containers, CI machines)
fi
exec .venv/bin/jupyter lab "${args[@]}" "$@"
