"""Every notebook in notebooks/ runs top to bottom in a real kernel without errors."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    if path.stem == "quickstart":
        from nbagent.providers.local import local_runtime_available

        if not local_runtime_available():
            pytest.skip("the quick start uses the local model (run scripts/setup.sh)")
    nb = nbformat.read(path, as_version=4)
    monkeypatch.chdir(tmp_path)
    client = nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, errors
    texts = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                    for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    if path.stem == "tools_and_approval":
        assert "84" in texts  # 12 * 7 went through the approved calculator call
    if path.stem == "usage_analysis":
        assert "session-2.json" in texts
