"""The notebook tools (``nbagent.notebook_tools``, ``Agent(notebook=True)``): the agent sees the
notebook's variables and runs code in its namespace, in IPython's real shell with real pandas and
matplotlib; ``%chat_code`` and ``@name`` in ``%%chat``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("IPython")
matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

from nbagent import Agent, notebook_tools  # noqa: E402
from nbagent.core.steps import ApprovalDecision, FinishReason, StepStatus, TurnStatus  # noqa: E402
from nbagent.loop.tools import Tool  # noqa: E402
from nbagent.notebook.kernel_tools import CodeStatus, code_cells  # noqa: E402
from support.widget_messages import deliver_raw  # noqa: E402
from nbagent.notebook.variables import attach_variables  # noqa: E402
from nbagent.providers.base import ToolSpec  # noqa: E402
from nbagent.providers.demo import DemoProvider  # noqa: E402
from support.scripted import ScriptedProvider, text_call, tool_call  # noqa: E402
from support.tool_runs import approving, tool_steps  # noqa: E402
from nbagent.core.conversation_state import plumbing_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NAMES = ("sales", "by_month", "nbagent_agent", "bot", "scores", "big", "n", "stopped", "loop_count", "x")


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbagent")
    return shell


@pytest.fixture(autouse=True)
def fresh(ip):
    for name in NAMES:
        ip.user_ns.pop(name, None)
    ip.rl_next_input = None
    yield
    for name in NAMES:
        ip.user_ns.pop(name, None)


def sales_frame():
    return pd.DataFrame({"month": ["Jan", "Feb", "Mar", "Jan", None],
                         "revenue": [10, 20, 30, 5, 7], "units": [1.0, 2.0, None, 4.0, 5.0]})


def tools_of(namespace, **options) -> dict[str, Tool]:
    return {t.name: t for t in notebook_tools(namespace, **options)}


def run_tool(tool: Tool, args: dict, timeout: float | None = None):
    return asyncio.run(tool.run(args, timeout=timeout))




def scripted_agent(namespace, *calls, **options) -> tuple[Agent, ScriptedProvider]:
    provider = ScriptedProvider([list(c) for c in calls])
    tool_options = {k: options.pop(k) for k in ("approve_code", "timeout") if k in options}
    return Agent(model=provider, tools=notebook_tools(namespace, **tool_options), **options), provider


def cell_threads_still_running(wait: float = 10.0) -> list[threading.Thread]:
    """The threads running agent code that have not ended within ``wait`` seconds each."""
    threads = [t for t in threading.enumerate() if t.name.startswith("nbagent-cell-")]
    for t in threads:
        t.join(wait)
    return [t for t in threads if t.is_alive()]


def run_python_call(cid: str, code: str) -> list:
    return tool_call((cid, "run_python", {"code": code}))


# --- list_variables ------------------------------------------------------------------------


def test_list_variables_shows_the_users_names_with_type_shape_dtypes_and_size(ip):
    ip.run_cell("import os, numpy as np\nfrom collections import OrderedDict\nsales = __import__('pandas').DataFrame("
                "{'month': ['Jan'], 'revenue': [10]})\n_hidden = 1\nscores = [1, 2, 3]\nx = np.zeros((3, 4))\n"
                "def n(a: int) -> int:\n    return a")
    text = run_tool(tools_of(None)["list_variables"], {}).text  # None: the running shell's namespace
    lines = {ln.split(":")[0][2:]: ln for ln in text.splitlines() if ln.startswith("- ")}
    assert "DataFrame, 1 rows × 2 columns (month:" in lines["sales"] and "revenue: int64" in lines["sales"]
    assert lines["sales"].endswith(" B")  # memory size
    assert "list, length 3" in lines["scores"] and "shape 3×4, dtype float64" in lines["x"]
    assert lines["n"] == "- n: function(a: int) -> int"  # defined in the notebook: listed
    for left_out in ("os", "np", "OrderedDict", "_hidden", "In", "Out", "exit", "quit", "get_ipython", "_", "__builtins__"):
        assert left_out not in lines
    for name in ("_hidden", "np", "os", "OrderedDict"):
        ip.user_ns.pop(name)


def test_list_variables_is_capped():
    namespace = {f"variable_{i:04d}": list(range(i)) for i in range(1_000)}
    text = run_tool(tools_of(namespace)["list_variables"], {}).text
    assert len(text) <= 4_200 and "more not listed" in text
    assert "variable_0000" in text and "variable_0999" not in text


# --- describe_variable ---------------------------------------------------------------------


def test_describe_a_dataframe_gives_columns_head_and_describe():
    text = run_tool(tools_of({"sales": sales_frame()})["describe_variable"], {"name": "sales"}).text
    assert "- month: " in text and "4 of 5 non-null" in text  # dtype and non-null count per column
    assert "- units: float64, 4 of 5 non-null" in text
    assert "head(5):" in text and "Mar" in text
    assert "describe():" in text and "mean" in text and "14.4" in text  # revenue's mean


def test_describe_a_series_and_containers_shows_what_printing_shows():
    namespace = {"revenue": sales_frame()["revenue"], "big": list(range(100_000)), "word": "hello"}
    tools = tools_of(namespace)
    series = run_tool(tools["describe_variable"], {"name": "revenue"}).text
    assert "Series" in series and "non-null: 5 of 5" in series and "mean" in series
    big = run_tool(tools["describe_variable"], {"name": "big"}).text
    assert big.startswith("[variable big]\n```\nbig: list, length 100,000") and "[0, 1, 2," in big and "..." in big
    assert len(big) < 1_000  # capped: never the whole list
    assert "'hello'" in run_tool(tools["describe_variable"], {"name": "word"}).text


def test_an_unknown_name_is_a_tool_error_suggesting_close_names():
    out = run_tool(tools_of({"sales": sales_frame(), "salary": 3})["describe_variable"], {"name": "sale"})
    assert out.is_error
    assert "no variable named 'sale'" in out.text and "did you mean 'sales' or 'salary'?" in out.text


# --- run_python --------------------------------------------------------------------------------


def test_run_python_returns_value_stdout_and_stderr_and_keeps_variables():
    namespace = {"sales": sales_frame()}
    out = run_tool(tools_of(namespace)["run_python"],
                   {"code": "import sys\nprint('hello')\nprint('careful', file=sys.stderr)\n"
                            "total = int(sales.revenue.sum())\ntotal * 2"})
    assert not out.is_error
    assert out.text == ("[stdout]\n```\nhello\n```\n[stderr]\n```\ncareful\n```\n[value]\n```\n144\n```\n"
                        "[variables] created total (int, value 72)")  # each part fenced as data  # the module sys is not a variable
    assert namespace["total"] == 72  # like a cell: what it assigns stays


def test_an_exception_is_a_tool_error_with_a_trimmed_traceback():
    namespace: dict = {}
    code = "def f(x):\n    return 1 / x\nprint('before')\nf(0)"
    out = run_tool(tools_of(namespace)["run_python"], {"code": code})
    assert out.is_error and out.error == "ZeroDivisionError: division by zero"
    assert "[stdout]\n```\nbefore" in out.text and "return 1 / x" in out.text and "line 4" in out.text
    assert "nbagent" not in out.text and "cell_runner" not in out.text  # only the code's own frames
    syntax = run_tool(tools_of(namespace)["run_python"], {"code": "def broken(:\n  pass"})
    assert syntax.is_error and "SyntaxError" in syntax.text


def test_a_figure_or_a_dataframe_shows_in_the_card_while_the_model_gets_text():
    import matplotlib.pyplot as plt

    open_before = set(plt.get_fignums())
    tools = tools_of({"sales": sales_frame()})
    plot = run_tool(tools["run_python"], {"code": "import matplotlib.pyplot as plt\n"
                                          "fig, ax = plt.subplots()\nax.bar(['a', 'b'], [1, 2])\nax.set_title('two bars')"})
    assert set(plot.display) == {"image/png"} and len(plot.display["image/png"]) > 1_000
    assert "[figure] [matplotlib figure" in plot.text and "'two bars'" in plot.text and "iVBOR" not in plot.text
    assert set(plt.get_fignums()) == open_before  # closed: a later cell does not show it again
    table = run_tool(tools["run_python"], {"code": "sales.head(3).assign(figure=1)"})  # not an Axes' .figure
    assert "<table" in table.display["text/html"] and "DataFrame: 3 rows x 4 columns" in table.text
    assert "Mar" in table.display["text/html"]
    axes = run_tool(tools_of({"ax": plt.subplots()[1]})["run_python"], {"code": "ax"})
    assert set(axes.display) == {"image/png"}  # an Axes the code returns shows its figure
    plt.close("all")


def test_output_to_the_model_is_capped_with_a_note_of_the_cut():
    out = run_tool(tools_of({})["run_python"], {"code": "print('x' * 100_000)\nprint('the end')"})
    assert len(out.text) < 4_200 and "characters of stdout cut" in out.text
    assert out.text.rstrip().endswith("the end\n```")  # the end of the output is kept


def test_namespace_none_outside_a_kernel_is_a_config_error_saying_to_pass_one():
    script = ("import nbagent\n"
              "for make in (lambda: nbagent.notebook_tools(), lambda: nbagent.Agent(model='demo', notebook=True)):\n"
              "    try:\n        make()\n    except nbagent.NbagentError as exc:\n"
              "        print(exc.kind, '|', exc)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 2 and all(ln.startswith("config |") and "pass one" in ln for ln in lines), out


# --- run_python in a conversation: approval, timeout, Stop -----------------------------------------


def test_run_python_asks_for_approval_even_when_the_policy_allows_all():
    namespace: dict = {}
    agent, _ = scripted_agent(namespace, run_python_call("c1", "x = 41 + 1\nx"), text_call("done"),
                              run_python_call("c2", "y = 'ran'"), text_call("ok"), policy="allow_all")
    conv = agent.conversation
    denied = []

    def deny(event, step):
        if event == "step" and step.status == StepStatus.WAITING_FOR_USER and step.approval == ApprovalDecision.PENDING:
            denied.append(step.tool_calls[0].id)
            conv.deny(step.tool_calls[0].id)

    plumbing_of(conv).add_listener(deny)
    conv.ask("compute")
    assert denied == ["c1"] and "x" not in namespace  # it waited for a decision; denied, it never ran
    assert tool_steps(conv)[-1].approval == ApprovalDecision.DENIED
    plumbing_of(conv).remove_listener(deny)
    approving(conv)
    conv.ask("again")
    assert namespace["y"] == "ran" and tool_steps(conv)[-1].approval == ApprovalDecision.APPROVED


def test_approve_code_false_runs_without_asking():
    namespace: dict = {}
    agent, _ = scripted_agent(namespace, run_python_call("c1", "x = 7\nx * 6"), text_call("done"),
                              approve_code=False)
    agent.conversation.ask("compute")
    (step,) = tool_steps(agent.conversation)
    assert step.approval == ApprovalDecision.AUTO and step.content.startswith("[value]\n```\n42\n```\n[variables]")
    assert namespace["x"] == 7


def test_hanging_code_is_ended_by_the_timeout_and_the_conversation_goes_on():
    namespace: dict = {}
    code = "stopped = False\ntry:\n    while True:\n        pass\nfinally:\n    stopped = True"
    agent, provider = scripted_agent(namespace, run_python_call("c1", code), text_call("it hung"),
                                     run_python_call("c2", "1 + 1"), text_call("two"),
                                     approve_code=False, tool_timeout=0.5)
    conv = agent.conversation
    conv.ask("loop forever")
    (step,) = tool_steps(conv)
    assert step.status == StepStatus.ERROR and "ran longer than 0.5 s and was interrupted" in step.content
    assert provider.requests[1].messages[-1].tool_results[0].is_error  # the model was told
    assert not cell_threads_still_running()
    assert namespace["stopped"] is True  # the loop itself ended (its finally ran), not just the wait
    assert conv.ask("and now?").text == "two" and tool_steps(conv)[-1].content == "[value]\n```\n2\n```"


def test_stop_interrupts_running_code_and_the_conversation_goes_on():
    namespace: dict = {}
    started = threading.Event()
    namespace["started"] = started
    code = "stopped = False\ntry:\n    started.set()\n    while True:\n        pass\nfinally:\n    stopped = True"
    agent, _ = scripted_agent(namespace, run_python_call("c1", code), run_python_call("c2", "'fine'"),
                              text_call("fine"), approve_code=False)
    conv = agent.conversation
    threading.Thread(target=lambda: started.wait(30) and conv.interrupt(), daemon=True).start()
    response = conv.ask("loop forever")
    assert response.finish_reason == FinishReason.INTERRUPTED and conv.turns[-1].status == TurnStatus.INTERRUPTED
    assert tool_steps(conv)[0].status == StepStatus.CANCELED
    assert not cell_threads_still_running()  # the code's thread unwinds (its finally runs)
    assert namespace["stopped"] is True
    assert conv.ask("and now?").text == "fine" and tool_steps(conv)[-1].content == "[value]\n```\n'fine'\n```"
    cells = code_cells(conv.history)
    assert [(c.call_id, c.status) for c in cells] == [("c1", CodeStatus.INTERRUPTED), ("c2", CodeStatus.OK)]


def test_code_cells_lists_the_code_that_ran_in_order_with_turn_and_status():
    namespace: dict = {}
    agent, _ = scripted_agent(namespace, run_python_call("a", "x = 1"), run_python_call("b", "1 / 0"),
                              text_call("t0"), run_python_call("c", "x + 1"), text_call("t1"),
                              run_python_call("d", "never = 1"), text_call("t2"))
    conv = agent.conversation
    approver = approving(conv)
    conv.ask("first")
    conv.ask("second")
    plumbing_of(conv).remove_listener(approver)
    plumbing_of(conv).add_listener(lambda e, s: e == "step" and s.status == StepStatus.WAITING_FOR_USER
                      and s.approval == ApprovalDecision.PENDING and conv.deny(s.tool_calls[0].id))
    conv.ask("third")  # denied: it never ran, so it is not listed
    cells = code_cells(conv.history)
    assert [(c.call_id, c.code, c.turn, c.status) for c in cells] == [
        ("a", "x = 1", 0, CodeStatus.OK), ("b", "1 / 0", 0, CodeStatus.ERROR), ("c", "x + 1", 1, CodeStatus.OK)]


# --- the demo model, end to end --------------------------------------------------------------------


def test_the_demo_model_describes_the_named_variable_runs_a_step_and_answers(ip):
    ip.user_ns["sales"] = sales_frame()
    agent = Agent(model="demo", notebook=True, delay=0)  # the tools of the shell it runs in
    conv = agent.conversation
    approved = approving(conv).approved
    response = conv.ask("look at sales and plot revenue by month")
    names = [s.tool_calls[0].name for s in tool_steps(conv)]
    assert names == ["list_variables", "describe_variable", "run_python"]
    assert tool_steps(conv, "describe_variable")[0].tool_calls[0].args == {"name": "sales"}
    (run,) = tool_steps(conv, "run_python")
    assert approved == [run.tool_calls[0].id]  # it asked, under the default allow_all policy
    assert run.status == StepStatus.DONE and "image/png" in run.display  # the bar chart, in the card
    assert "groupby('month'" in run.tool_calls[0].args["code"]
    assert ip.user_ns["by_month"].to_dict() == {"Jan": 15, "Feb": 20, "Mar": 30}
    assert "Jan    15" in response.text and "scripted" in response.text
    assert "[variables] created by_month (Series" in response.text  # what the code made, as the model saw it
    del ip.user_ns["by_month"]
    again = Agent(model="demo", notebook=True, delay=0).conversation  # the same history, the same moves
    approving(again)
    assert again.ask("look at sales and plot revenue by month").text == response.text


def test_the_demo_model_uses_attached_variables_and_matches_tool_names_as_whole_words():
    namespace = {"sales": sales_frame()}
    prompt, attached = attach_variables("what is in @sales?", namespace)
    agent = Agent(model=DemoProvider(delay=0), tools=notebook_tools(namespace, approve_code=False))
    agent.conversation.ask(prompt)
    assert attached == ["sales"] and [s.tool_calls[0].args for s in tool_steps(agent.conversation)] == [
        {"code": "sales.head()"}]  # described already: straight to the code
    other = Agent(model=DemoProvider(delay=0), tools=notebook_tools({"scores": [3, 1, 2]}, approve_code=False))
    answer = other.conversation.ask("what are my scores?").text
    assert [s.tool_calls[0].args for s in tool_steps(other.conversation)][1:] == [{"name": "scores"}, {"code": "scores"}]
    assert "[value]\n```\n[3, 1, 2]" in answer
    evil = Tool("evil", "Deletes everything.", None, lambda: "deleted")
    bot = Agent(model=DemoProvider(delay=0), tools=[evil]).conversation
    bot.ask("show me the evil_table")
    assert not tool_steps(bot)  # "evil_table" does not name the tool "evil"
    bot.ask("call evil now")
    assert [s.content for s in tool_steps(bot)] == ["deleted"]


def test_demo_without_run_python_summarises_the_description():
    from nbagent.providers.demo_notebook import notebook_move
    from nbagent.core.messages import Message, TextPart

    tools = [ToolSpec("list_variables", "", {}), ToolSpec("describe_variable", "", {})]
    move = notebook_move([Message("user", [TextPart("hi @sales\n\n[Attached notebook variables: @sales]\n"
                                                    "--- @sales ---\nsales: DataFrame, 5 rows × 3 columns")])],
                         tools, "hi @sales\n\n[Attached notebook variables: @sales]\n--- @sales ---\n"
                                "sales: DataFrame, 5 rows × 3 columns", 1)
    assert move.call is None and "DataFrame, 5 rows × 3 columns" in move.answer


# --- %chat_code and @name in %%chat -------------------------------------------------------------------


def run(ip, source: str):
    with capture_output() as cap:
        result = ip.run_cell(source, store_history=True)
    return result, cap.stdout + cap.stderr


def test_chat_code_puts_the_code_the_agent_ran_into_the_next_cell(ip):
    result, out = run(ip, "%chat_code")
    assert not result.success or "no agent" in out  # nothing to put yet
    agent, _ = scripted_agent(ip.user_ns, run_python_call("a", "n = 1"), run_python_call("b", "n + 1"),
                              text_call("done"), approve_code=False)
    ip.user_ns["bot"] = agent
    agent.conversation.ask("go")
    result, out = run(ip, "%chat_code -a bot")
    assert [c.turn for c in agent.conversation.notebook.code_cells()] == [0, 0]  # 0-based, as conv.turns
    head, body = ip.rl_next_input.split("\n", 1)  # what a person reads counts turns from 1 (#43.6)
    assert head.startswith("%%chat_run call=b turn=1 sha=") and body == "# run by the agent (turn 1, b)\nn + 1"
    assert result.success and "this cell now holds 1 piece of code the agent ran (turn 1)" in out
    run(ip, "%chat_code -a bot -n 2")
    assert ip.rl_next_input.split("\n", 1)[1] == "# run by the agent (turn 1, a)\nn = 1\n\n# run by the agent (turn 1, b)\nn + 1"
    result, out = run(ip, "%chat_code -a bot -n 0")
    assert "-n must be at least 1" in out


def test_agent_code_runs_again_only_once_the_user_edits_it(ip):
    """Run All reaching a %chat_code cell: the agent's code as it wrote it is not run (a note);
    edited, it runs as the user's code."""
    agent, _ = scripted_agent(ip.user_ns, run_python_call("a", "hits = hits + 1"), text_call("done"),
                              approve_code=False)
    ip.user_ns.update(bot=agent, hits=0)
    agent.conversation.ask("go")
    assert ip.user_ns["hits"] == 1  # the agent's run, approved
    run(ip, "%chat_code -a bot")
    cell = ip.rl_next_input
    for _ in range(2):  # Run All, twice
        result, out = run(ip, cell)
        assert result.success and out.startswith("⏸ not run: code the agent ran in turn 1 (a)")
    assert ip.user_ns["hits"] == 1
    result, out = run(ip, cell + "\nprint('mine', hits)")  # the user's edit
    assert result.success and "mine 2" in out and ip.user_ns["hits"] == 2
    run(ip, cell.split("\n", 1)[1])  # the %%chat_run line deleted: plain code
    assert ip.user_ns["hits"] == 3


def test_at_name_in_a_chat_cell_attaches_the_variable(ip):
    ip.user_ns["sales"] = sales_frame()
    provider = ScriptedProvider([text_call("seen")])
    ip.user_ns["bot"] = Agent(model=provider)
    result, out = run(ip, "%%chat -a bot\nPlot @sales by month; mail bob@sales.com; @nosuch stays")
    assert result.success and "attached: @sales" in out
    prompt = provider.requests[0].messages[-1].text
    assert prompt.startswith("Plot @sales by month; mail bob@sales.com; @nosuch stays\n\n"
                             "[Attached notebook variables: @sales]\n--- @sales ---\n[variable sales]\n```\nsales: DataFrame")
    assert "4 of 5 non-null" in prompt and prompt.count("--- @") == 1  # the email and the unknown name: left alone
    assert "attached: `@sales`" in result.result.markdown  # the cell's result says what went with it
    assert ip.user_ns["bot"].conversation.turns[-1].prompt == prompt


def test_chat_code_records_the_insert_in_the_cells_metadata_through_an_open_chat(ip, monkeypatch):
    """In JupyterLab / Notebook 7 the kernel knows the running cell's id; every page showing a chat
    gets the ``inserted`` action for it (applied without an answer: the kernel is busy in the cell)."""
    from nbagent.notebook.widget import ChatWidget

    agent, _ = scripted_agent(ip.user_ns, run_python_call("a", "n = 1"), text_call("done"), approve_code=False)
    ip.user_ns["bot"] = agent
    agent.conversation.ask("go")
    widget = ChatWidget(agent)
    sent = []
    widget.send = sent.append
    deliver_raw(widget, {"type": "notebook", "host": True})  # its view reached the notebook

    class Kernel:
        def get_parent(self, *_):
            return {"metadata": {"cellId": "cell-42"}}

    monkeypatch.setattr(ip, "kernel", Kernel(), raising=False)
    result, _ = run(ip, "%chat_code -a bot")
    assert result.success
    (note,) = [m for m in sent if m.get("op") == "add_action"]
    assert note["id"] == "" and note["cell_id"] == "cell-42"  # nobody waits for an answer
    action = note["action"]
    assert (action["action"], action["turn"], action["call_id"], action["approved_by"]) == ("inserted", 0, "a", "%chat_code")
    assert action["session_id"] == agent.conversation.conversation_id
    from nbagent.notebook.provenance import code_hash

    assert action["code_sha256"] == code_hash(ip.rl_next_input)
    widget.close()
