"""``%load_ext nbagent``: ``%%chat`` and the ``%chat_*`` magics in IPython's real shell
(``InteractiveShell.instance()``), run the way a user runs them: as cells."""

from __future__ import annotations

import json
import signal
import sys
import threading

import pytest

pytest.importorskip("IPython")

from IPython.core.error import UsageError  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

from nbagent import Agent, NbagentError, tool  # noqa: E402
from nbagent.core.steps import ApprovalDecision, StepStatus, TurnStatus  # noqa: E402
from nbagent.providers.base import TextDelta  # noqa: E402
from support.scripted import ScriptedProvider, text_call  # noqa: E402
from support.small_disk import fill, small_disk  # noqa: E402
from nbagent.core.conversation_state import plumbing_of  # noqa: E402


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbagent")
    return shell


@pytest.fixture(autouse=True)
def fresh(ip):
    for name in ("nbagent_agent", "bot", "df", "add"):
        ip.user_ns.pop(name, None)
    yield


def run(ip, source: str):
    """Run a cell as a user would; (result, what it printed, what it displayed)."""
    with capture_output() as cap:
        result = ip.run_cell(source, store_history=True)
    return result, cap.stdout + cap.stderr, cap.outputs


def scripted_bot(ip, *calls, **agent_kwargs) -> ScriptedProvider:
    provider = ScriptedProvider([list(c) for c in calls])
    ip.user_ns["bot"] = Agent(model=provider, **agent_kwargs)
    return provider


def one_line(out: str) -> str:
    lines = [ln for ln in out.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in out, out
    return lines[0]


# --- %%chat ---------------------------------------------------------------------------


def test_the_answer_is_the_cells_result_shown_as_markdown(ip):
    result, out, _ = run(ip, "%%chat -m demo --new\nHello there")
    assert result.success, result.error_in_exec
    conv = ip.user_ns["nbagent_agent"].conversation
    answer = result.result
    assert isinstance(answer, str) and answer == conv.last_response and "demo model" in answer
    assert ip.user_ns["_"] == answer  # the result, as `_`
    # plain IPython has no running loop: the turn was over when the cell returned
    assert conv.is_idle() and conv.turns[-1].status == TurnStatus.DONE
    shown, _meta = ip.display_formatter.format(answer)
    markdown = shown["text/markdown"]
    assert "demo model" in markdown and "💭" in markdown  # the answer with its thoughts
    assert "<sub>demo · in " in markdown  # the usage line
    assert "demo model" in out  # it streamed into the cell first


def test_the_answer_streams_while_the_turn_runs(ip, monkeypatch):
    ip.user_ns["bot"] = Agent(model="demo")
    conv = ip.user_ns["bot"].conversation
    writes: list[tuple[str, bool]] = []  # (text, turn still running?)

    class Recorder:
        def write(self, text):
            writes.append((text, not conv.is_idle()))

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stdout", Recorder())
    result = ip.run_cell("%%chat -a bot\nTell me something", store_history=True)
    monkeypatch.undo()
    assert result.success, result.error_in_exec
    during = "".join(text for text, running in writes if running)
    assert "💭" in during and "demo model" in during  # thoughts and answer, before the turn ended


def test_one_agent_is_kept_across_cells_and_named_agents_are_used(ip):
    run(ip, "%%chat -m demo --new\nFirst")
    agent = ip.user_ns["nbagent_agent"]
    run(ip, "%%chat\nSecond")
    assert ip.user_ns["nbagent_agent"] is agent and agent.conversation.turn_count == 2

    @tool
    def calculator(expression: str) -> float:
        """Evaluates arithmetic."""
        return 42.0

    ip.user_ns["bot"] = Agent(model="demo", tools=[calculator])
    result, out, _ = run(ip, "%%chat -a bot\nWhat is 6 * 7?")
    assert "🔧 calculator" in out and "42" in result.result
    assert ip.user_ns["bot"].conversation.turn_count == 1 and agent.conversation.turn_count == 2
    run(ip, "%%chat -a bot -m demo:other --system 'Be brief.'\nAgain")
    bot = ip.user_ns["bot"]
    assert bot.model == "demo:other" and bot.conversation.turns[-1].model == "other"
    assert bot.conversation.connection.chat_session.system == "Be brief."
    assert bot.conversation.turn_count == 2  # the same conversation, now with another model


def test_variables_are_put_in_the_prompt(ip):
    pd = pytest.importorskip("pandas")
    ip.user_ns["df"] = pd.DataFrame({"city": [f"city-{i}" for i in range(500)], "n": range(500)})
    ip.user_ns["who"] = "Ada"
    ip.user_ns["pi"] = 3.14159
    ip.user_ns["long"] = "x" * 50_000
    ip.user_ns["point"] = {"x": [10, 20]}
    run(ip, "%%chat -m demo --new\nHi {who}, pi is {pi:.2f}; {{braces}} stay; {who!r} {point[x]}")
    prompt = ip.user_ns["nbagent_agent"].conversation.turns[-1].prompt
    assert prompt == "Hi Ada, pi is 3.14; {braces} stay; 'Ada' [10, 20]"
    run(ip, "%%chat\nTable: {df}\nText: {long}")
    prompt = ip.user_ns["nbagent_agent"].conversation.turns[-1].prompt
    assert "500 rows × 2 columns" in prompt and "city-0" in prompt and "city-499" in prompt
    assert "city-250" not in prompt  # capped: first and last rows only
    assert "more characters left out" in prompt and len(prompt) < 6_000


def test_a_format_spec_cannot_pass_the_cap(ip):
    ip.user_ns["long"] = "x" * 50_000
    ip.user_ns["n"] = 7
    run(ip, "%%chat -m demo --new\nText: {long:<100} and {long!r:^10}")
    prompt = ip.user_ns["nbagent_agent"].conversation.turns[-1].prompt
    assert prompt.count("more characters left out") == 2 and len(prompt) < 9_000
    result, out, _ = run(ip, "%%chat -m demo\nPadded: {n:>100000000}")
    assert isinstance(result.error_in_exec, NbagentError)
    assert "asks for more than 4,000 characters" in one_line(out)


class Hostile:
    def __str__(self):
        raise RuntimeError("my __str__ is broken")

    def __format__(self, spec):
        raise ZeroDivisionError("no format")

    def __getattr__(self, name):
        raise PermissionError("no attributes")


def test_a_raising_str_is_one_line(ip):
    ip.user_ns["bad"] = Hostile()
    for cell, message in [("{bad}", "{bad} failed: RuntimeError: my __str__ is broken"),
                          ("{bad:>5}", "{bad} failed: ZeroDivisionError: no format"),
                          ("{bad.x}", "{bad.x} failed: PermissionError: no attributes")]:
        result, out, _ = run(ip, f"%%chat -m demo\nLook at {cell}")
        assert isinstance(result.error_in_exec, NbagentError) and result.error_in_exec.kind == "config"
        assert message in one_line(out)
    ip.user_ns.pop("bad")


@pytest.mark.parametrize("cell, message", [
    ("%%chat -m demo\nWhat is {nope}?", "{nope} is not a notebook variable"),
    ("%%chat -m demo\nA dict: {'a': 1}", "{{"),
    ("%%chat -m demo\nUnbalanced } brace", "{{ and }}"),
    ("%%chat -a missing\nhi", "no agent named 'missing'"),
    ("%%chat -m demo\n   ", "the cell is empty"),
    ("%%chat -m nosuchprovider:x --new\nhi", "unknown model"),
])
def test_errors_are_one_readable_line(ip, cell, message):
    result, out, _ = run(ip, cell)
    error = result.error_in_exec
    assert isinstance(error, NbagentError) and error.kind == "config"
    line = one_line(out)
    assert line.endswith(str(error)) and "NbagentError" in line and message in line


def test_a_failed_turn_shows_its_partial_answer_then_one_line(ip):
    scripted_bot(ip, [TextDelta("partial <img src=x onerror=alert(1)> answer"),
                      NbagentError("connection reset", kind="network")])
    result, out, outputs = run(ip, "%%chat -a bot\nhi")
    assert isinstance(result.error_in_exec, NbagentError) and result.error_in_exec.kind == "network"
    assert "connection reset" in one_line(out.strip().splitlines()[-1])
    markdown = outputs[-1].data["text/markdown"]
    assert "partial" in markdown and "connection reset" in markdown
    assert "<img" not in markdown  # model text is escaped
    assert ip.user_ns["bot"].conversation.is_idle()  # and the agent is usable again


def test_bad_options_give_ipythons_usage_error_and_help_shows_them(ip):
    result, out, _ = run(ip, "%%chat --bogus\nhi")
    assert type(result.error_in_exec) is UsageError and "unrecognized arguments: --bogus" in out
    _, help_text, _ = run(ip, "%%chat?")
    assert "%%chat [-a NAME] [-m MODEL] [--system S] [--new] [--widget]" in help_text
    _, help_text, _ = run(ip, "%chat_model?")
    assert "%chat_model [-a NAME] MODEL" in help_text and "local:/path/model.gguf" in help_text


def test_a_tool_call_needing_approval_is_denied_not_left_waiting(ip):
    @tool
    def calculator(expression: str) -> float:
        """Evaluates arithmetic."""
        return 42.0

    ip.user_ns["bot"] = Agent(model="demo", tools=[calculator], policy="ask")
    result, out, _ = run(ip, "%%chat -a bot\nWhat is 6 * 7?")
    assert result.success and "--widget" in out
    steps = ip.user_ns["bot"].conversation.history
    call = [s for s in steps if s.tool_calls and s.target.value == "ENVIRONMENT"][-1]
    assert call.approval == ApprovalDecision.DENIED and call.status != StepStatus.WAITING_FOR_USER
    assert call.decided_by == "%%chat cell"  # the approval audit names the cell, not a person


def test_widget_option_shows_the_widget_and_completes_in_plain_ipython(ip):
    pytest.importorskip("anywidget")
    result, _, outputs = run(ip, "%%chat -m demo --new --widget\nHello")
    assert result.success and result.result is None
    assert any("application/vnd.jupyter.widget-view+json" in o.data for o in outputs)
    conv = ip.user_ns["nbagent_agent"].conversation
    assert conv.turn_count == 1 and conv.is_idle() and conv.last_response


def test_interrupting_keeps_the_partial_answer(ip, ctrl_c):
    ip.user_ns["bot"] = Agent(model="demo", delay=0.05)
    conv = ip.user_ns["bot"].conversation
    main = threading.main_thread().ident
    sent = []

    def interrupt_at_first_text(event, step):
        if event == "step" and step.source.value == "MODEL" and step.content and not sent:
            sent.append(True)
            signal.pthread_kill(main, signal.SIGINT)  # what the kernel's Interrupt does

    plumbing_of(conv).add_listener(interrupt_at_first_text)
    result, out, _ = run(ip, "%%chat -a bot\nTell me a long story")
    assert sent and result.success, result.error_in_exec
    assert conv.turns[-1].status == TurnStatus.INTERRUPTED and conv.is_idle()
    answer = [s for s in conv.history if s.source.value == "MODEL"][-1]
    assert answer.status == StepStatus.CANCELED and answer.content  # the partial answer, kept
    assert result.result == answer.content and not answer.content.endswith("API key.")  # cut short
    assert "stopped" in result.result.markdown and "Traceback" not in out
    run(ip, "%%chat -a bot\nAnd now?")  # the agent goes on
    assert conv.turns[-1].status == TurnStatus.DONE


# --- the line magics ----------------------------------------------------------------------


def test_chat_model_switches_the_model_and_keeps_the_conversation(ip):
    run(ip, "%%chat -m demo --new\nFirst")
    _, out, _ = run(ip, "%chat_model demo:second")
    agent = ip.user_ns["nbagent_agent"]
    assert "demo:second" in out and agent.model == "demo:second"
    run(ip, "%%chat\nAgain")
    assert [t.model for t in agent.conversation.turns] == ["demo", "second"]
    result, out, _ = run(ip, "%chat_model nosuch:thing")
    assert isinstance(result.error_in_exec, NbagentError) and "unknown model" in one_line(out)


def test_chat_tools_registers_notebook_functions(ip):
    run(ip, "def add(a: int, b: int) -> int:\n    'Add two numbers.'\n    return a + b")
    run(ip, "%%chat -m demo --new\nHi")
    _, out, _ = run(ip, "%chat_tools add")
    assert "add" in out and "add" in ip.user_ns["nbagent_agent"].tools
    result, _, _ = run(ip, "%%chat\nPlease add 2 + 3")
    assert "**5**" in result.result  # the demo model called add(2, 3)
    result, out, _ = run(ip, "%chat_tools nothing_here")
    assert "no function named 'nothing_here'" in one_line(out)


def test_chat_system_sets_the_system_prompt_the_model_gets(ip):
    provider = scripted_bot(ip, text_call("one"), text_call("two"))
    _, out, _ = run(ip, "%chat_system -a bot You are a pirate. Answer in one line.")
    assert "You are a pirate. Answer in one line." in out
    run(ip, "%%chat -a bot\nhi")
    assert provider.requests[-1].system == "You are a pirate. Answer in one line."


def test_chat_usage_and_history_are_dataframes(ip):
    pytest.importorskip("pandas")
    run(ip, "%%chat -m demo --new\nOne")
    run(ip, "%%chat\nTwo")
    usage, _, _ = run(ip, "%chat_usage")
    history, _, _ = run(ip, "%chat_history")
    assert len(usage.result) == 2 and list(usage.result["prompt"]) == ["One", "Two"]
    assert len(history.result) == len(ip.user_ns["nbagent_agent"].conversation.history) >= 6
    result, out, _ = run(ip, "%chat_usage -a nobody")
    assert "no agent named 'nobody'" in one_line(out)


def test_save_reset_load_continue(ip, tmp_path):
    provider = scripted_bot(ip, text_call("one"), text_call("two"), text_call("three"))
    ip.user_ns["bot"].tools.update({})  # no tools; the scripted answers come in order
    run(ip, "%chat_system -a bot Be brief.")
    run(ip, "%%chat -a bot\nfirst")
    run(ip, "%%chat -a bot\nsecond")
    path = tmp_path / "session.json"
    _, out, _ = run(ip, f"%chat_save -a bot {path}")
    assert "saved 2 turns" in out and json.loads(path.read_text())["turns"]
    run(ip, "%chat_reset -a bot")
    bot = ip.user_ns["bot"]
    assert bot.conversation.turn_count == 0 and bot.conversation.history == []
    assert bot.conversation.connection.chat_session.system == "Be brief."  # kept by the reset
    _, out, _ = run(ip, f"%chat_load -a bot {path}")
    assert "continues 2 turns" in out
    loaded = ip.user_ns["bot"]
    assert loaded.conversation.turn_count == 2 and loaded.provider is provider  # same model
    run(ip, "%%chat -a bot\nthird")
    sent = [m.text for m in provider.requests[-1].messages]
    assert sent == ["first", "one", "second", "two", "third"]  # the saved turns went with it
    result, out, _ = run(ip, f"%chat_load -a bot {tmp_path / 'missing.json'}")
    assert isinstance(result.error_in_exec, NbagentError) and "missing.json" in one_line(out)


def test_chat_reset_forgets_what_the_model_saw(ip):
    provider = scripted_bot(ip, text_call("one"), text_call("two"))
    run(ip, "%%chat -a bot\nfirst")
    run(ip, "%chat_reset -a bot")
    run(ip, "%%chat -a bot\nsecond")
    assert [m.text for m in provider.requests[-1].messages] == ["second"]


def test_chat_export_writes_escaped_markdown_and_html(ip, tmp_path):
    scripted_bot(ip, text_call("Use <script>alert('x')</script> and **bold**"))
    run(ip, "%%chat -a bot\nWhat <b>now</b>?")
    _, out, _ = run(ip, f"%chat_export -a bot {tmp_path / 't.md'}")
    assert "exported 1 turn" in out
    md = (tmp_path / "t.md").read_text()
    assert "**bold**" in md and "What &lt;b>now&lt;/b>?" in md and "<script" not in md
    run(ip, f"%chat_export -a bot {tmp_path / 't.html'}")
    page = (tmp_path / "t.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<strong>bold</strong>" in page
    assert "&lt;script&gt;alert" in page and "<script" not in page
    result, out, _ = run(ip, f"%chat_export -a bot {tmp_path / 't.pdf'}")
    assert "neither .md nor .html" in one_line(out)


def test_chat_export_on_a_full_disk_keeps_the_previous_export(ip, tmp_path):
    scripted_bot(ip, text_call("first answer"), text_call("second answer " * 2000))
    run(ip, "%%chat -a bot\none")
    with small_disk(tmp_path / "disk", size_kb=128) as disk:
        run(ip, f"%chat_export -a bot {disk / 't.md'}")
        before = (disk / "t.md").read_text()
        assert "first answer" in before
        fill(disk)
        run(ip, "%%chat -a bot\ntwo")
        _, out, _ = run(ip, f"%chat_export -a bot {disk / 't.md'}")
        line = one_line(out)
        assert "[io]" in line and "t.md" in line and "No space left" in line
        assert (disk / "t.md").read_text() == before
        assert sorted(p.name for p in disk.iterdir()) == ["filler", "t.md"]
