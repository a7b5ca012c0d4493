"""Every notebook in notebooks/ runs top to bottom in a real kernel (nbclient), offline, and
shows what its text promises."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
OWN_FILE = {"fix_the_error"}  # notebooks that edit their own .ipynb
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "NBAGENT_MODEL")


def code_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


def outputs(cell) -> list:
    return cell.get("outputs", []) if cell.cell_type == "code" else []


def text_of(cell) -> str:
    return "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in outputs(cell))


def data_of(cell, mime: str) -> str:
    return "".join(str(o.get("data", {}).get(mime, "")) for o in outputs(cell))


def run_notebook(path: Path, tmp_path: Path, monkeypatch):
    for key in KEYS:  # the kernel inherits this environment: no key, no call out
        monkeypatch.delenv(key, raising=False)
    nb = nbformat.read(path, as_version=4)
    if path.stem in OWN_FILE:  # as Jupyter Server does: the kernel knows its notebook's file (a copy here)
        copy = tmp_path / path.name
        copy.write_bytes(path.read_bytes())
        monkeypatch.setenv("JPY_SESSION_NAME", str(copy))
    monkeypatch.chdir(tmp_path)
    client = nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    return nb


@pytest.mark.notebook  # a real kernel
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    nb = run_notebook(path, tmp_path, monkeypatch)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.get("execution_count") for c in code)  # every cell ran
    for cell in code:
        errors = [o for o in outputs(cell) if o.get("output_type") == "error"]
        expected = "raises-exception" in cell.metadata.get("tags", [])
        assert bool(errors) == expected, (cell.source, errors)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")  # an intro
    CHECKS.get(path.stem, lambda nb, tmp: None)(nb, tmp_path)


def check_tools(nb, tmp_path):
    assert "84" in "".join(text_of(c) for c in code_cells(nb))  # 12 * 7 through the approved calculator call


def check_usage(nb, tmp_path):
    cells = code_cells(nb)
    texts = "".join(text_of(c) for c in cells)
    assert "session-2.json" in texts
    plot = next(c for c in cells if "plot_usage()" in c.source)
    assert data_of(plot, "image/png"), outputs(plot)  # the plot is shown

    def cell(marker: str):
        return next(c for c in cells if marker in c.source)

    # prices and the prompt cache: genai-prices is the source, the three busts are found with their causes
    assert "genai-prices" in data_of(cell('"price_source"'), "text/html")
    assert "busts by cause: {'system': 1, 'tools': 1, 'history': 1}" in texts
    assert data_of(cell("cache_hit_ratio\"], marker"), "image/png")
    assert "PrefixChange.SYSTEM" in text_of(cell("prefix_change) for s in"))  # the loop saw the edit
    # the approval audit names who decided; it survives save and load
    audit = data_of(cell("conv.approvals_df()[["), "text/html")
    assert "policy no_deletes" in audit and "user" in audit and "Reason: not be" in audit
    assert text_of(cell("Conversation.load(path).approvals_df()")).strip() == "True"
    assert data_of(cell('groupby("tool", observed=True)'), "image/png")  # which tool bloats the context
    assert data_of(cell("nbagent.compare("), "text/html").count("<tr>") >= 5  # header + 2 prompts x 2 models
    # budgets refuse before sending; one turn may be let through
    assert "budget → [budget] over budget, nothing sent" in texts and "turns recorded: 2" in texts
    # Parquet + DuckDB over a folder of sessions
    assert "claude-sonnet-4-5" in data_of(cell("per_model_day = duckdb.sql"), "text/html")
    assert "TIMESTAMP WITH TIME ZONE" in data_of(cell("describe select"), "text/html")
    dataset = data_of(cell('partition="month"'), "text/html")  # one month-partitioned dataset, queried in place
    assert "month" in dataset and "claude-sonnet-4-5" in dataset


def check_teaching(nb, tmp_path):
    texts = "".join(text_of(c) for c in code_cells(nb))
    assert "84" in texts and "thought:" in texts
    math = next(c for c in code_cells(nb) if c.source.startswith("%%chat"))
    assert "$x_1 = 2$ and $x_2 = 3$" in data_of(math, "text/markdown")  # math in the answer, as markdown
    tables = [c for c in code_cells(nb) if "history_df()" in c.source]
    assert len(tables) == 3 and all("<table" in data_of(c, "text/html") for c in tables)  # after each turn
    usage = next(c for c in code_cells(nb) if "usage_df()" in c.source)
    assert data_of(usage, "text/html").count("<tr>") >= 4  # a header and three turns
    check_teaching_sessions(nb, tmp_path)
    check_teaching_course(nb)


def check_teaching_course(nb):
    """The course set up in a folder (issue #34): the policy and AGENTS.md obeyed, %chat_policy shown."""
    cells = code_cells(nb)

    def cell(marker: str):
        return next(c for c in cells if marker in c.source)

    made = text_of(cell("student = Agent()"))
    assert "demo:demo | rules: AGENTS.md | saved in: sessions" in made and "tutor of Data Science 101" in made
    refused = text_of(cell('Agent(model="openai:gpt-4.1-mini")'))
    assert "ConfigError - model 'openai:gpt-4.1-mini' is not allowed by the course policy course/nbagent.toml" in refused
    assert "budget: 2.0" in refused
    shown = text_of(cell("%chat_policy"))
    assert "nbagent.toml" in shown and "models: demo" in shown and "run_code: no" in shown
    assert "left of $2.00 this week" in shown and "rules: " in shown and "AGENTS.md" in shown


def check_teaching_sessions(nb, tmp_path):
    """The replayed lesson and the class review (issue #21), from the sessions the notebook made."""
    cells = code_cells(nb)

    def cell(marker: str):
        return next(c for c in cells if marker in c.source)

    (lesson,) = (tmp_path / "lesson").glob("*-what-is-12-7-*.json")
    replayed = text_of(cell("replay = Agent("))
    assert "answer:  Let me use `calculator` for that." in replayed and "**84**" in replayed
    note = text_of(cell("replay.provider.notes"))
    assert "the recording answers the prompt \u201cHello! Who are you?\u201d" in note
    assert "prompt='Can you do my homework?'" in note
    assert "bob: refused (budget)" in text_of(cell("for student, prompts"))
    rows = {line.split()[0]: line.split()[1:] for line in text_of(cell("per_student =")).splitlines()[2:]}
    assert sorted(rows) == ["alice", "bob", "chen"]  # chats, turns, tokens, cost_usd, out_of_budget
    assert [rows[u][-1] for u in ("alice", "bob", "chen")] == ["False", "True", "False"]
    assert rows["alice"][1] == "2" and int(rows["bob"][1]) < 6 and all(float(r[3]) > 0 for r in rows.values())
    turns = data_of(cell("turns = load_sessions("), "text/html")
    assert "alice" in turns and "bob" in turns and "chen" in turns
    assert "Hello!" in data_of(cell("Markdown(Conversation.load(bob)"), "text/markdown")


def check_providers(nb, tmp_path):
    texts = "".join(text_of(c) for c in code_cells(nb))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        assert f"{key} is not set: skipped" in texts
    assert "sk-" not in texts
    from nbagent.providers.local import local_runtime_available

    if local_runtime_available():  # the local llama.cpp server answered as an OpenAI-compatible one
        assert "/v1 →" in texts


def check_magics(nb, tmp_path):
    chats = [c for c in code_cells(nb) if c.source.startswith("%%chat") and "--widget" not in c.source
             and "no_such_agent" not in c.source]
    assert len(chats) == 4
    for cell in chats:
        results = [o for o in outputs(cell) if o.get("output_type") == "execute_result"]
        assert len(results) == 1 and results[0]["data"]["text/markdown"].strip(), outputs(cell)
        assert not [o for o in outputs(cell) if o.get("output_type") == "stream" and o["name"] == "stdout"]
    texts = "".join(text_of(c) for c in code_cells(nb))
    assert "Paris" in texts  # the DataFrame went into the prompt (the demo model quotes it back)
    assert "**42**" in data_of(next(c for c in chats if "add 2 + 40" in c.source), "text/markdown")
    for name in ("%chat_usage", "%chat_history"):
        assert "<table" in data_of(next(c for c in code_cells(nb) if c.source == name), "text/html")
    assert (tmp_path / "chat.json").exists() and (tmp_path / "chat.md").exists()
    assert (tmp_path / "chat.html").read_text().startswith("<!DOCTYPE html>")
    widget = next(c for c in code_cells(nb) if "--widget" in c.source)
    assert data_of(widget, "application/vnd.jupyter.widget-view+json")
    error = next(c for c in code_cells(nb) if "no_such_agent" in c.source)
    (out,) = [o for o in outputs(error) if o.get("output_type") == "error"]
    assert len(out["traceback"]) == 1 and "no agent named 'no_such_agent'" in out["traceback"][0]


def check_data_analysis(nb, tmp_path):
    cells = code_cells(nb)

    def cell(marker: str):
        return next(c for c in cells if marker in c.source)

    listing = text_of(cell('tools["list_variables"]'))
    assert "- sales: DataFrame, 7 rows × 3 columns" in listing and "- targets: dict, length 2" in listing
    assert "- plt" not in listing and "- pd" not in listing and "- Agent" not in listing  # modules, imports
    assert "- revenue: int64, 7 of 7 non-null" in text_of(cell('tools["describe_variable"]'))
    turn = text_of(cell("conv.approve("))
    assert "the agent wants to run:\nby_month = sales.groupby('month'" in turn  # it waited for approval
    assert "Jan    200" in turn and "scripted" in turn  # then ran, and the model saw the result
    assert "Apr    150" in text_of(cell("by_month"))  # what the code defined is the notebook's
    assert data_of(cell("card.display"), "image/png")  # the card's figure
    assert "this cell now holds 1 piece of code the agent ran (turn 1)" in text_of(cell("%chat_code"))
    assert "call_demo_5 turn 0 ok | by_month = " in text_of(cell("conv.notebook.code_cells()"))
    chat = data_of(cell("@targets"), "text/markdown")
    assert "attached: `@targets`" in chat and "dict, length 2" in chat
    assert "--- @targets ---\n[variable targets]\n```\ntargets: dict" in text_of(cell("turns[-1].prompt"))  # fenced
    assert "('get_current_time', 'mcp-time')" in text_of(cell("Stamp the report"))  # a real MCP server
    assert "get_current_time (MCP mcp-time)" in text_of(cell("%chat_tools -a analyst"))


def check_fix_the_error(nb, tmp_path):
    cells = code_cells(nb)

    def cell(marker: str):
        return next(c for c in cells if marker in c.source)

    broken = cell('sales["revnue"]')
    assert [o.get("ename") for o in outputs(broken) if o.get("output_type") == "error"] == ["KeyError"]
    copy = tmp_path / "fix_the_error.ipynb"
    turn = text_of(cell("approve_next(turn)"))
    assert f"edit_cell asks to edit cell [3] (file: {copy}):" in turn  # the diff, before Approve
    assert '  - total = sales["revnue"].sum()\n  + total = sales["revenue"].sum()\n    total' in turn
    assert "run_cell asks to run cell [3]" in turn and "Fixed: the cell runs clean now" in turn
    assert "415" in text_of(next(c for c in cells if c.source == "total"))  # the fixed cell ran in this kernel
    assert 'total = sales["revenue"].sum()' in text_of(cell("read_notebook"))
    history = text_of(cell("recorded_actions")).splitlines()
    assert [line.split()[0] for line in history] == ["edited", "ran"] and "approved by user" in history[0]
    assert "has its previous source again" in text_of(cell("conv.undo("))
    saved = next(c for c in nbformat.read(copy, as_version=4).cells if c.id == "broken")
    assert saved.source == 'total = sales["revnue"].sum()\ntotal'  # undone, in the file
    from nbagent.notebook.provenance import recorded_actions

    assert recorded_actions(saved.metadata) == []  # the undone edit's record (and its run) went with it (#43)


def check_mcp(nb, tmp_path):
    cells = code_cells(nb)
    texts = [text_of(c) for c in cells]
    assert texts[0].strip() == "False"  # nothing started before the first turn
    assert '"timezone": "Europe/Paris"' in texts[2]  # the real server answered through the demo model
    assert "('get_current_time', 'mcp-time')" in texts[3]
    assert "get_current_time (MCP mcp-time)" in texts[4]
    assert "no-such-mcp-server" in texts[5] and "not found" in texts[5]
    assert texts[6].strip() == "False"  # aclose() stopped it


def check_class_view(nb, tmp_path):
    """The teacher's view: one row per student, ben asked for help, ana's second turn reached the view."""
    cells = code_cells(nb)

    def cell(marker: str):
        return next(c for c in cells if marker in c.source)

    summary = data_of(cell("summary = nbagent.class_summary("), "text/html")
    assert "<td>ana</td>" in summary and "<td>ben</td>" in summary
    assert text_of(cell("asking for help")).strip() == "asking for help: ['ben']"
    priced = data_of(cell("priced = "), "text/html")
    assert priced.count("True") == 1 and priced.count("False") == 1  # ben spent more than the budget, ana not
    assert "('ana', 2), ('ben', 2)" in text_of(cell("view.rows"))
    assert "application/vnd.jupyter.widget-view+json" in json.dumps(outputs(cell("view = nbagent.class_view(")))


def check_quickstart(nb, tmp_path):
    """The first minute, offline: the demo model answers from a cell with a tool call, the usage is a table,
    the last cell fails on purpose (for the chat's "fix the error"), and the text says what the local model is."""
    intro, cells = nb.cells[0].source, code_cells(nb)
    assert "135-million-parameter **toy for trying the interface**" in intro and "fix the error" in intro
    assert 'Agent(model="demo", notebook=True)' in "".join(c.source for c in cells)
    asked = next(c for c in cells if "chat_to_completion" in c.source)
    assert "`sales`" in text_of(asked), text_of(asked)  # list_variables ran in this kernel and found the data
    usage = next(c for c in cells if "usage_df()" in c.source)
    assert data_of(usage, "text/html").split("<tbody>")[1].count("<tr>") == 1, data_of(usage, "text/html")  # one turn
    last = cells[-1]
    assert "raises-exception" in last.metadata.get("tags", []) and 'sales["revnue"]' in last.source
    assert [(o.get("ename"), o.get("evalue")) for o in outputs(last) if o.get("output_type") == "error"] == [
        ("KeyError", "'revnue'")]


CHECKS = {"class_view": check_class_view, "data_analysis": check_data_analysis, "tools_and_approval": check_tools, "usage_analysis": check_usage,
          "teaching": check_teaching, "providers": check_providers, "magics": check_magics, "mcp_tools": check_mcp,
          "fix_the_error": check_fix_the_error, "quickstart": check_quickstart}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_tracked_notebook_is_kept_without_outputs(path):
    """The notebooks in git hold no outputs, execution counts or widget state: a diff shows only what
    was edited, and scripts/run.sh works on copies in my-notebooks/ (running one never dirties git)."""
    nb = nbformat.read(path, as_version=4)
    ran = [c.id for c in code_cells(nb) if c.get("outputs") or c.get("execution_count") is not None]
    assert ran == [], f"{path.name}: cells with outputs (python scripts/make_notebooks.py rewrites them): {ran}"
    assert "widgets" not in nb.metadata, f"{path.name} holds saved widget state"
