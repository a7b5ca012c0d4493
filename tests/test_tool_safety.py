"""Tools never hang a turn or the kernel, and say what they are doing (issue 31): schema patterns
that backtrack, stuck sync tool threads beside quick tools, a stopped tool's result, and a call
waiting for an approval nothing can give."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from nbagent import Agent, Conversation, FinishReason, StepStatus, tool
from nbagent.core.steps import ApprovalDecision
from nbagent.loop import tool_threads
from nbagent.loop.tool_schema import validate_value
from support.scripted import ScriptedProvider, text_call, tool_call
from support.tool_runs import finished_tool_steps, in_a_thread
from support.waiting import until
from nbagent.core.conversation_state import plumbing_of

EVIL = "^(a+)+$"  # 28 characters took re 19.8 s, doubling with each one
EVIL_TOO = "^(a|aa)+$"




# --- 6. schema patterns ------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", [EVIL, EVIL_TOO])
@pytest.mark.parametrize("with_regex", [True, False], ids=["regex", "re-only"])
def test_a_backtracking_schema_pattern_is_checked_in_bounded_time(pattern, with_regex, monkeypatch):
    if not with_regex:
        monkeypatch.setitem(sys.modules, "regex", None)  # import regex fails: only re is there
    else:
        pytest.importorskip("regex")
    schema = {"type": "string", "pattern": pattern}
    problems = in_a_thread(lambda: validate_value("a" * 60 + "!", schema, ""))  # decided, or left to the server
    assert problems == [] or (len(problems) == 1 and f"must match the pattern {pattern!r}" in problems[0])
    assert validate_value("aaa", schema, "") == []
    [short] = validate_value("b", schema, "")  # a short value is still checked
    assert f"must match the pattern {pattern!r}" in short


# --- 14. stuck sync tool threads ----------------------------------------------------------------


def test_a_quick_tool_still_runs_beside_stuck_ones_and_the_refusal_names_the_stuck_tool(monkeypatch):
    monkeypatch.setattr(tool_threads, "MAX_ABANDONED_THREADS", 4)
    release = threading.Event()

    @tool(timeout=0.1)
    def hang(i: int) -> str:
        """Never returns in time."""
        release.wait(60)
        return "late"

    @tool
    def quick() -> str:
        """Answers at once."""
        return "quick answer"

    calls = [tool_call(*[(f"a{i}", "hang", {"i": i}) for i in range(4)]), text_call("first"),
             tool_call(("b0", "hang", {"i": 9}), ("q", "quick", {})), text_call("second")]
    agent = Agent(model=ScriptedProvider(calls), tools=[hang, quick])
    try:
        agent.ask("hang four")
        assert tool_threads.stuck_tools() == {"hang": 4}
        agent.ask("hang again, and a quick one")
        by_id = {s.tool_calls[0].id: s for s in finished_tool_steps(agent.conversation)}
        assert by_id["q"].status == StepStatus.DONE and by_id["q"].content == "quick answer"
        refused = by_id["b0"]
        assert refused.status == StepStatus.ERROR and "TooManyHungTools" in refused.content
        assert "stuck: 'hang' (4)" in refused.content and "tools that are not stuck still run" in refused.content
    finally:
        release.set()
    in_a_thread(lambda: [t.join(10) for t in threading.enumerate() if t.name.startswith("nbagent-tool-")])
    assert not tool_threads.stuck_tools()


# --- 16. a tool stopped while it runs --------------------------------------------------------


def test_a_tool_stopped_while_it_runs_says_so_not_that_it_never_ran():
    started = threading.Event()

    @tool
    async def slow() -> str:
        """Takes its time."""
        import asyncio

        started.set()
        await asyncio.sleep(120)
        return "never"

    agent = Agent(model=ScriptedProvider([tool_call(("s", "slow", {}))]), tools=[slow])
    conv = agent.conversation
    threading.Thread(target=lambda: started.wait(60) and conv.interrupt(), daemon=True).start()
    conv.ask("go slowly")
    (step,) = finished_tool_steps(conv)
    assert step.status == StepStatus.CANCELED
    assert step.content.startswith("The user stopped this tool call while it ran (after ")
    assert "before this tool call ran" not in step.content


def test_a_call_stopped_before_it_ran_still_says_so():
    agent = Agent(model=ScriptedProvider([tool_call(("s", "slow", {}))]), tools=[], policy="ask")
    conv = agent.conversation
    conv.approval_wait = None

    def stop_when_waiting(event, step):
        if event == "step" and step.is_tool_run and step.status == StepStatus.WAITING_FOR_USER:
            threading.Thread(target=conv.interrupt, daemon=True).start()

    plumbing_of(conv).add_listener(stop_when_waiting)
    conv.ask("go")
    (step,) = finished_tool_steps(conv)
    assert step.content == "The user interrupted the turn before this tool call ran."


# --- 18. approval where nothing can answer ------------------------------------------------------


SCRIPT = textwrap.dedent('''
    import sys
    from nbagent import Agent, tool

    @tool
    def calculator(expression: str) -> float:
        """Evaluate an arithmetic expression."""
        return 84.0

    agent = Agent(model="demo", tools=[calculator], policy="ask")
    conv = agent.conversation
    conv.approval_wait = float(sys.argv[1])
    resp = conv.ask("What is 12 * 7?")
    print("answered:", resp.text)
''')


def test_a_blocking_ask_waiting_for_approval_in_a_script_says_so_and_ends_with_a_clear_error(tmp_path):
    script = tmp_path / "use.py"
    script.write_text(SCRIPT)
    try:
        done = subprocess.run([sys.executable, str(script), "2"], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the script blocked waiting for an approval nothing could give")
    assert done.returncode == 1 and "answered" not in done.stdout
    assert "⏸ tool call 'calculator' (call_demo_1) is waiting for approval" in done.stderr
    assert "conv.approve('call_demo_1')" in done.stderr
    assert ("ConfigError: [config] policy='ask': tool call 'calculator' (call_demo_1) waited 2 s for approval "
            "and nothing answered it") in done.stderr


async def test_a_call_nobody_approved_in_time_says_so_not_that_the_user_interrupted():
    """#48 rough edges: the approval timeout ended the call with "The user interrupted the turn
    before this tool call ran." although nobody did; the card, the model's result and the audit say
    that nobody answered within approval_wait."""
    from nbagent import ConfigError

    @tool
    def calculator(expression: str) -> float:
        """Evaluate an arithmetic expression."""
        return 84.0

    agent = Agent(model="demo", tools=[calculator], policy="ask")
    conv = agent.conversation
    conv.approval_wait = 0.5
    with pytest.raises(ConfigError, match="waited 0.5 s for approval and nothing answered it"):
        await conv.chat_to_completion("What is 12 * 7?")
    (step,) = finished_tool_steps(conv)
    assert "interrupted" not in step.content and "The user" not in step.content
    assert step.content == "Nobody answered the approval request within 0.5 s (conv.approval_wait); the call did not run."
    assert step.decided_by == "approval_wait" and step.approval == ApprovalDecision.CANCELED
    assert conv.turns[-1].finish_reason == FinishReason.INTERRUPTED  # the turn still ends there
    assert conv.approvals_df()["decided_by"].tolist() == ["approval_wait"]


def test_the_default_wait_is_at_most_30_s_and_an_answer_from_another_thread_still_works():
    assert Conversation.approval_wait is not None and Conversation.approval_wait <= 30

    @tool
    def calculator(expression: str) -> float:
        """Evaluate an arithmetic expression."""
        return 84.0

    agent = Agent(model="demo", tools=[calculator], policy="ask")
    conv = agent.conversation

    def approve_from_another_thread(event, step):
        if event == "step" and step.is_tool_run and step.status == StepStatus.WAITING_FOR_USER:
            threading.Timer(0.5, conv.approve, args=(step.tool_calls[0].id,)).start()

    plumbing_of(conv).add_listener(approve_from_another_thread)
    assert "84" in conv.ask("What is 12 * 7?").text


async def test_a_widget_counts_as_someone_who_can_approve_only_once_a_view_of_it_spoke():
    """A widget no view draws (nbclient, papermill) leaves an awaited turn to approval_wait; once a
    view says it is drawn (``{"type": "view"}``, as widget.js does), the call waits for its buttons."""
    import asyncio

    pytest.importorskip("anywidget")
    from nbagent import ConfigError
    from nbagent.notebook.protocol import Approve
    from nbagent.notebook.widget import ChatWidget
    from support.widget_messages import deliver

    @tool
    def calculator(expression: str) -> float:
        """Evaluate an arithmetic expression."""
        return 84.0

    agents = [Agent(model="demo", tools=[calculator], policy="ask") for _ in range(2)]
    for agent in agents:
        agent.conversation.approval_wait = 0.5
    hidden, w = (ChatWidget(agent) for agent in agents)
    with pytest.raises(ConfigError, match="its chat widget is displayed but no live view shows it"):
        await agents[0].conversation.chat_to_completion("What is 12 * 7?")
    conv = agents[1].conversation
    w._on_msg(w, {"type": "view"})  # the front end drew a view of it
    turn = asyncio.ensure_future(conv.chat_to_completion("What is 12 * 7?"))
    await until(lambda: any(s.status == StepStatus.WAITING_FOR_USER for s in conv.history), "the call waiting")
    waiting = [s for s in conv.history if s.status == StepStatus.WAITING_FOR_USER]
    await asyncio.sleep(4 * conv.approval_wait)
    assert not turn.done()  # left to the person at the view, past approval_wait
    deliver(w, Approve(call_id=waiting[0].tool_calls[0].id))
    assert "84" in (await asyncio.wait_for(turn, 30)).text
    hidden.close()
    w.close()
