"""README's Python code runs as written: each ```python block is pasted into one cell of a fresh
notebook and run in a real kernel (nbclient), as a reader copying it into Jupyter would -- top-level
``await`` and a displayed widget included -- offline: no API keys, no local model file, every proxy
pointed at a closed port so nothing reaches out. A block that needs a key or a widget front end
can say so with ``<!-- readme-test: skip (why) -->`` on the line before it; the "Use" block may not."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.notebook  # a real kernel

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("pandas")

README = Path(__file__).resolve().parents[1] / "README.md"
SKIP = re.compile(r"<!--\s*readme-test:\s*skip\b(.*?)-->")
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "NBAGENT_MODEL")
CLOSED = "http://127.0.0.1:9"  # the discard port: a request through this proxy fails at once


@dataclass
class Block:
    """One ```python block: the README section it sits in, its code, and why it is skipped ("" if run)."""

    section: str
    code: str
    skip: str


def python_blocks(text: str) -> list[Block]:
    blocks, section = [], ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("## "):
            section = lines[i][3:].strip()
        if lines[i].strip() == "```python":
            end = lines.index("```", i + 1)
            before = next((ln for ln in reversed(lines[:i]) if ln.strip()), "")
            why = SKIP.search(before)
            blocks.append(Block(section, "\n".join(lines[i + 1:end]) + "\n", why.group(1).strip() or "marked"
                                if why else ""))
            i = end
        i += 1
    return blocks


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def test_the_use_section_has_a_python_block_that_is_not_skipped():
    use = [b for b in BLOCKS if b.section == "Use"]
    assert use and not any(b.skip for b in use), [b.skip for b in use]


def run_as_a_notebook(cells: list[str], folder: Path, monkeypatch) -> list:
    """Run ``cells`` in a new python3 kernel working in ``folder``; the executed cells."""
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("NBAGENT_MODEL_DIR", str(folder / "no-models"))  # "local" is not installed here
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(proxy, CLOSED)
    for bypass in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(bypass, "127.0.0.1,localhost")  # loopback servers (none here) stay reachable
    monkeypatch.chdir(folder)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                                     resources={"metadata": {"path": str(folder)}})
    client.execute()
    return nb.cells


def errors_of(cell) -> list[str]:
    return ["\n".join(o.get("traceback", [])) or f"{o.get('ename')}: {o.get('evalue')}"
            for o in cell.get("outputs", []) if o.get("output_type") == "error"]


# What the Use block must have done, checked in a cell after it (in the same kernel).
USE_DID = """
from pathlib import Path
assert [t.status.value for t in conv.turns] == ["done"] * 3, [t.status for t in conv.turns]
assert "42" in resp.text, resp.text  # the blocking ask() ran the tool: 6 * 7
assert Conversation.load("chats/session.json").turns and Path("parquet").is_dir()
print("use block: ok")
"""


@pytest.mark.parametrize("block", [b for b in BLOCKS if not b.skip],
                         ids=lambda b: f"{b.section}-{b.code.splitlines()[0][:30]}")
def test_readme_python_block_runs_as_written(block, tmp_path, monkeypatch):
    checks = [USE_DID] if block.section == "Use" else []
    cells = run_as_a_notebook([block.code, *checks], tmp_path, monkeypatch)
    assert errors_of(cells[0]) == [], f"README's {block.section} block failed:\n" + "\n".join(errors_of(cells[0]))
    for check in cells[1:]:
        assert errors_of(check) == [], "\n".join(errors_of(check))
