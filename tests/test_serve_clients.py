"""Real outside agents fix the error in a served notebook (``nbagent.serve()``), through the lines
``serve`` prints and nbagent's tools, and provenance names them.

- Claude Code (npm ``@anthropic-ai/claude-code``, installed by scripts/test.sh into
  ``~/.cache/nbagent/claude-code``), headless (``claude -p``) against a scripted Anthropic API on
  loopback, registered with exactly the ``export`` and ``claude mcp add`` lines ``served.setup()`` prints.
- pydantic-ai's MCP client (``MCPToolset`` over streamable HTTP) with its scripted ``FunctionModel``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("mcp")

import nbagent  # noqa: E402
from tests.support.scripted_model_api import ScriptedModelApi  # noqa: E402

pytestmark = pytest.mark.timeout(120)

CLAUDE_CODE_DIR = Path(os.environ.get("NBAGENT_CLAUDE_CODE_DIR", Path.home() / ".cache" / "nbagent" / "claude-code"))
CODEX_DIR = Path(os.environ.get("NBAGENT_CODEX_DIR", Path.home() / ".cache" / "nbagent" / "codex"))
BROKEN, FIXED = "total = sum(values) / len(valeus)", "total = sum(values) / len(values)"


def installed(folder: Path, command: str) -> str:
    """The command from its scripts/test.sh install folder, else on PATH; the test skips without it."""
    cached = folder / "node_modules" / ".bin" / command
    found = str(cached) if cached.is_file() else shutil.which(command)
    if found is None:
        pytest.skip(f"{command} is not installed (scripts/test.sh installs it into {folder})")
    return found


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    for cid, source in [("data", "values = [1, 2, 3]"), ("mean", BROKEN)]:
        cell = nbformat.v4.new_code_cell(source)
        cell.id = cid
        nb.cells.append(cell)
    nb.cells[1].outputs = [nbformat.v4.new_output("error", ename="NameError", evalue="name 'valeus' is not defined",
                                                  traceback=["NameError: name 'valeus' is not defined"])]
    path = tmp_path / "analysis.ipynb"
    nbformat.write(nb, str(path))
    return path


def serve_in_tmp(notebook: Path, tmp_path: Path, monkeypatch, approve_code: bool):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))  # the token file, away from the user's
    return nbagent.serve(notebook, namespace={}, approve_code=approve_code, save_to=tmp_path / "sessions")


@pytest.fixture
def served(notebook: Path, tmp_path: Path, monkeypatch):
    server = serve_in_tmp(notebook, tmp_path, monkeypatch, approve_code=False)
    yield server
    server.stop()


def printed(setup: str, start: str) -> str:
    """The one line of ``served.setup()`` that starts with ``start``."""
    [line] = [line for line in setup.splitlines() if line.startswith(start)]
    return line


def run_claude_code(served, tmp_path: Path, answer: str) -> tuple[subprocess.CompletedProcess, list[str], str]:
    """Claude Code registered with the lines ``served`` prints, asked headless to fix the error; a scripted
    model has it call read_notebook, then edit_cell with the fix, then answer ``answer``. Returns the run, the
    tool results it sent the model, and its version."""
    claude = installed(CLAUDE_CODE_DIR, "claude")
    tool = "mcp__nbagent__{}".format
    model = ScriptedModelApi([(tool("read_notebook"), {}),
                               (tool("edit_cell"), {"cell_id": "mean", "source": FIXED}), answer])
    work, home = tmp_path / "project", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    env = {"PATH": f"{Path(claude).parent}{os.pathsep}{os.environ['PATH']}", "HOME": str(home),
           "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "ANTHROPIC_BASE_URL": model.url,
           "ANTHROPIC_API_KEY": "sk-scripted-not-a-key", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
           "DISABLE_ERROR_REPORTING": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    setup = served.setup()
    # exactly what a user pastes: the export line, then the Claude Code line
    script = "\n".join(["set -e", printed(setup, "export "), printed(setup, "claude mcp add "),
                        'claude -p "fix the error in the notebook" --allowedTools mcp__nbagent '
                        "--model claude-sonnet-4-5-20250929"])
    try:
        run = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=100)
    finally:
        model.close()
    assert run.returncode == 0, run.stderr + run.stdout
    assert answer in run.stdout
    version = subprocess.run([claude, "--version"], env=env, capture_output=True, text=True, timeout=60).stdout.split()[0]
    return run, model.tool_results(), version


def test_claude_code_registered_with_the_printed_lines_fixes_the_error(served, notebook: Path, tmp_path: Path):
    _, results, version = run_claude_code(served, tmp_path, "I fixed the typo: `valeus` is now `values`.")
    assert len(results) == 2 and BROKEN in results[0], results  # it read the notebook through nbagent's tool
    assert nbformat.read(str(notebook), as_version=4).cells[1].source == FIXED
    frame = nbagent.provenance(notebook)
    # its clientInfo's title (name "claude-code", title "Claude Code"): what cards, badges and provenance show
    assert list(frame["author"]) == [f"Claude Code {version}"]
    assert list(frame["action"]) == ["edited"]


def test_claude_code_gets_an_error_at_once_when_nobody_can_approve(notebook: Path, tmp_path: Path, monkeypatch):
    served = serve_in_tmp(notebook, tmp_path, monkeypatch, approve_code=True)  # no chat widget shown
    try:
        _, results, _ = run_claude_code(served, tmp_path, "I could not edit the notebook.")
    finally:
        served.stop()
    assert len(results) == 2 and "nobody can press Approve" in results[1], results
    assert nbformat.read(str(notebook), as_version=4).cells[1].source == BROKEN
    assert nbagent.provenance(notebook).empty


def test_codex_configured_with_the_printed_block_fixes_the_error(served, notebook: Path, tmp_path: Path):
    codex = installed(CODEX_DIR, "codex")
    tool = "mcp__nbagent__{}".format  # Codex offers the server's tools as the namespace mcp__nbagent
    model = ScriptedModelApi([(tool("read_notebook"), {}), (tool("edit_cell"), {"cell_id": "mean", "source": FIXED}),
                              "I fixed the typo: `valeus` is now `values`."])
    work, home, codex_home = tmp_path / "project", tmp_path / "home", tmp_path / "codex"
    for folder in (work, home, codex_home):
        folder.mkdir()
    setup = served.setup()
    block = setup.split("\n# Codex", 1)[1].split("\n\n", 1)[0].split("\n", 1)[1]  # the printed TOML, as is
    (codex_home / "config.toml").write_text("\n".join([
        'model = "gpt-5.1-codex"', 'model_provider = "scripted"', "[model_providers.scripted]", 'name = "scripted"',
        f'base_url = "{model.url}/v1"', 'wire_api = "responses"', 'env_key = "SCRIPTED_KEY"', "[analytics]",
        "enabled = false", block, ""]), encoding="utf-8")
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(codex_home), "SCRIPTED_KEY": "sk-not-a-key"}
    script = "\n".join(["set -e", printed(setup, "export "),
                        f'{codex} exec --skip-git-repo-check "fix the error in the notebook" </dev/null'])
    try:
        run = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=100)
    finally:
        model.close()
    assert run.returncode == 0, run.stderr + run.stdout
    results = model.tool_results()
    assert len(results) == 2 and BROKEN in results[0], results + [run.stderr[-2000:]]
    assert nbformat.read(str(notebook), as_version=4).cells[1].source == FIXED
    version = subprocess.run([codex, "--version"], env=env, capture_output=True, text=True, timeout=60).stdout.split()[-1]
    assert list(nbagent.provenance(notebook)["author"]) == [f"Codex {version}"]


def test_only_the_reading_tools_are_listed_read_only(served):
    """MCP's readOnlyHint: Codex runs those without asking; edits and code wait for the client's own prompt."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def listed():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {served.token}"}) as http:
            async with Client(streamable_http_client(served.url, http_client=http), mode="legacy") as client:
                return (await client.list_tools()).tools

    hints = {tool.name: tool.annotations.read_only_hint for tool in asyncio.run(listed())}
    assert {name for name, read_only in hints.items() if read_only} == {"read_notebook", "list_variables",
                                                                      "describe_variable"}
    assert {"edit_cell", "insert_cell", "run_cell", "run_python"} <= set(hints)


def test_pydantic_ais_mcp_client_with_a_scripted_model_fixes_the_error(served, notebook: Path):
    pytest.importorskip("pydantic_ai.mcp")
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    seen: list[str] = []

    def scripted(messages: list, info: AgentInfo) -> ModelResponse:
        returned = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        seen[:] = [str(p.content) for p in returned]
        if not returned:
            assert {"read_notebook", "edit_cell"} <= {t.name for t in info.function_tools}
            return ModelResponse(parts=[ToolCallPart("read_notebook", {})])
        if len(returned) == 1:
            return ModelResponse(parts=[ToolCallPart("edit_cell", {"cell_id": "mean", "source": FIXED})])
        return ModelResponse(parts=[TextPart("Fixed: `valeus` was a typo for `values`.")])

    toolset = MCPToolset(served.url, headers={"Authorization": f"Bearer {served.token}"})
    agent = Agent(FunctionModel(scripted), toolsets=[toolset])

    async def go():
        async with agent:
            return await agent.run("fix the error in the notebook")

    result = asyncio.run(go())
    assert result.output.startswith("Fixed")
    assert BROKEN in seen[0]  # it read the notebook through nbagent's tool
    assert nbformat.read(str(notebook), as_version=4).cells[1].source == FIXED
    import fastmcp

    # pydantic-ai introduces itself as the FastMCP client it is built on (MCPToolset(client_info=...) renames it)
    assert list(nbagent.provenance(notebook)["author"]) == [f"fastmcp {fastmcp.__version__}"]
