"""A course in a folder: a teacher's ``nbagent.toml`` (and ``AGENTS.md``) that every Agent made under
it obeys — real Agent objects with the demo model, in a temporary course folder, found from the
working folder or ``$NBAGENT_CONFIG``; time comes from a fake clock, never from sleeping."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pytest

from nbagent import Agent, NbagentError, notebook_tools, tool
from nbagent.core.course_policy import BudgetPeriod, find_policy, load_policy
from nbagent.core.errors import BudgetExceeded, ConfigError
from nbagent.core.session_file import read_session_head
from nbagent.providers.base import Provider
from nbagent.providers.demo import DemoProvider
from nbagent.core.conversation_state import plumbing_of

MONDAY_10 = datetime(2026, 12, 7, 10, 0)  # a Monday, in lesson hours


class RecordingDemo(DemoProvider):
    """The demo model, keeping the system prompt of every request it was sent."""

    def __init__(self, **kwargs):
        super().__init__(delay=0, **kwargs)
        self.systems: list[str | None] = []

    async def stream(self, request):
        self.systems.append(request.system)
        async for event in super().stream(request):
            yield event


@pytest.fixture
def course(tmp_path, monkeypatch):
    """A course folder with a student's notebook folder below it (the working folder); returns a
    function writing the policy's ``[policy]`` lines."""
    monkeypatch.delenv("NBAGENT_CONFIG", raising=False)
    monkeypatch.delenv("NBAGENT_MODEL", raising=False)
    monkeypatch.setenv("JUPYTERHUB_USER", "")  # "" says no one; restored after the test (``as_student`` sets it)
    root = tmp_path / "course"
    student = root / "week1"
    student.mkdir(parents=True)
    monkeypatch.chdir(student)

    def write(body: str) -> Path:
        path = root / "nbagent.toml"
        path.write_text("[policy]\n" + body, encoding="utf-8")
        return path
    write.root = root  # type: ignore[attr-defined]
    return write


def as_student(name: str) -> None:
    """Chat as ``name`` from now on: under a policy the person is ``$JUPYTERHUB_USER``, not an argument
    (the ``course`` fixture restores the variable)."""
    os.environ["JUPYTERHUB_USER"] = name


def at(agent: Agent, when: datetime) -> None:
    agent.course.limits.clock = lambda: when


def priced_session(user: str, started: datetime, prompt_tokens: int = 1_000_000) -> Path:
    """A saved session of ``user`` under the course: one turn answered by openai:gpt-4.1-mini
    (priced by the shared price data: $0.40 a million input tokens), started at ``started``."""
    as_student(user)
    agent = Agent(model="demo", delay=0)
    at(agent, started)
    agent.ask("an earlier lesson")
    record = agent.conversation.turns[0]
    record.model, record.provider, record.started_at = "gpt-4.1-mini", "openai", started.timestamp()
    record.usage.prompt_token_count = prompt_tokens
    return agent.save()


# --- the file ------------------------------------------------------------------------------


@pytest.mark.parametrize("body, key", [
    ('models = "demo"\n', "models"),
    ("run_code = 1\n", "run_code"),
    ("budget_usd = -2\n", "budget_usd"),
    ('budget_usd = "two"\n', "budget_usd"),
    ('budget_period = "month"\n', "budget_period"),
    ('hours = ["9-12"]\n', "hours"),
    ('hours = ["12:00-09:00"]\n', "hours"),
    ('hours = ["25:00-26:00"]\n', "hours"),
    ('hours = ["Mon-Fro 09:00-12:00"]\n', "hours"),
    ('hours = ["Monday 09:00-12:00"]\n', "hours"),
    ("save_to = 3\n", "save_to"),
    ('user = ""\n', "user"),
    ('modles = ["demo"]\n', "modles"),
])
def test_a_bad_key_is_a_config_error_naming_the_file_and_the_key(course, body, key):
    path = course(body)
    with pytest.raises(ConfigError) as err:
        Agent(model="demo")
    assert str(path) in err.value.message and repr(key) in err.value.message


def test_a_file_that_is_not_toml_or_has_no_policy_table_is_a_config_error_naming_it(course):
    path = course("models = [demo\n")
    with pytest.raises(ConfigError, match="not valid TOML") as err:
        load_policy(path)
    assert str(path) in err.value.message
    path.write_text("[other]\nx = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"has no \[policy\] table"):
        find_policy()


def test_the_policy_is_found_walking_up_or_named_by_the_environment(course, tmp_path, monkeypatch):
    path = course('models = ["demo"]\nbudget_usd = 2\nbudget_period = "day"\n')
    policy = find_policy()
    assert policy is not None and policy.path == path and policy.budget_period is BudgetPeriod.DAY
    assert policy.content_hash.startswith("sha256:")
    monkeypatch.chdir(tmp_path)
    assert find_policy() is None
    monkeypatch.setenv("NBAGENT_CONFIG", str(path))
    assert find_policy() == policy
    monkeypatch.setenv("NBAGENT_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match="missing.toml"):
        find_policy()


# --- models --------------------------------------------------------------------------------


def test_a_model_outside_the_list_is_refused_naming_the_policy_file(course):
    path = course('models = ["demo", "openai:*"]\n')
    with pytest.raises(NbagentError) as err:
        Agent(model="anthropic:claude-sonnet-4-5", api_key="sk-ant-test-key-000000")
    assert err.value.kind == "config" and str(path) in err.value.message and "openai:*" in err.value.message
    assert Agent(model="openai:gpt-4.1-mini", api_key="sk-test-key-0000000000").model == "openai:gpt-4.1-mini"
    agent = Agent(model="demo")
    with pytest.raises(ConfigError, match="not allowed by the course policy"):
        agent.set_model("anthropic:claude-sonnet-4-5", api_key="sk-ant-test-key-000000")
    assert agent.model == "demo:demo"  # unchanged: the next turn still goes to the demo model
    assert Agent().model == "demo:demo"  # no model given: the first one the policy names


def test_a_provider_object_calling_itself_demo_is_not_the_demo_model(course):
    course('models = ["demo"]\n')

    class Anything(RecordingDemo):  # a subclass may send anything anywhere
        pass

    class Lookalike(Provider):
        name, model = "demo", "demo"

        async def stream(self, request):
            yield None

    for impostor in (Anything(), Lookalike()):
        with pytest.raises(ConfigError, match="not allowed by the course policy"):
            Agent(model=impostor)
    assert Agent(model=DemoProvider(delay=0)).ask("hi").text  # the demo model itself


# --- a final policy --------------------------------------------------------------------------


def test_a_final_teacher_policy_wins_over_a_students_own_file_below_it_and_nbagent_config(course, monkeypatch):
    course('models = ["demo"]\nbudget_usd = 1.0\n')
    mine = Path("nbagent.toml")  # the student's own, in the notebook's folder
    mine.write_text("[policy]\nbudget_usd = 100.0\n", encoding="utf-8")
    assert Agent(model="openai:gpt-4.1-mini", api_key="sk-test-key-0000000000").conversation.budget.usd == 100
    teacher = course('models = ["demo"]\nbudget_usd = 1.0\nfinal = true\n')
    agent = Agent(model="demo")
    assert agent.course.policy.path == teacher and agent.conversation.budget.usd == 1.0
    with pytest.raises(ConfigError, match="not allowed by the course policy"):
        Agent(model="openai:gpt-4.1-mini", api_key="sk-test-key-0000000000")
    monkeypatch.setenv("NBAGENT_CONFIG", str(mine.resolve()))
    assert find_policy().path == teacher
    mine.write_text("[policy]\nbudget_usd = \n", encoding="utf-8")  # the student's own, broken: never read
    assert find_policy().path == teacher


# --- run_code ------------------------------------------------------------------------------


def test_run_code_false_leaves_out_every_tool_that_runs_code_or_edits_cells(course):
    course("run_code = false\n")

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    with pytest.warns(RuntimeWarning, match="run_code = false: run_python"):
        agent = Agent(model="demo", tools=[add, *notebook_tools({"x": 1})])
    assert "add" in agent.tools and "list_variables" in agent.tools and "read_notebook" in agent.tools
    assert not {"run_python", "run_cell", "edit_cell", "insert_cell"} & set(agent.tools)


def test_run_code_false_refuses_a_code_tool_added_later_in_the_loop(course):
    course("run_code = false\n")
    agent = Agent(model=RecordingDemo())
    run_python = next(t for t in notebook_tools({}, approve_code=False) if t.name == "run_python")
    agent.tools["run_python"] = run_python  # as %chat_tools does
    agent.ask('run_python "print(6 * 7)"')
    steps = [s for s in agent.conversation.history if s.is_tool_run]
    assert steps and steps[0].tool_calls[0].name == "run_python"
    assert "turned off by the course policy" in steps[0].content and "42" not in steps[0].content


# --- budget per period ---------------------------------------------------------------------


def test_arguments_never_loosen_the_budget(course):
    course("budget_usd = 2\n")
    assert Agent(model="demo", budget_usd=100).conversation.budget.usd == 2.0
    assert Agent(model="demo", budget_usd=0.5).conversation.budget.usd == 0.5
    assert Agent(model="demo").conversation.budget.usd == 2.0


def test_over_the_period_budget_the_turn_is_refused_before_any_request_until_the_reset(course):
    path = course('budget_usd = 1.0\nbudget_period = "week"\nsave_to = "sessions"\n')
    priced_session("ann", datetime(2026, 12, 1, 10, 0), prompt_tokens=5_000_000)  # last week: $2, not counted
    priced_session("bob", MONDAY_10, prompt_tokens=5_000_000)  # another student
    priced_session("ann", MONDAY_10, prompt_tokens=1_500_000)  # this week: $0.60
    provider = RecordingDemo()
    as_student("ann")
    agent = Agent(model=provider, pricing={"gpt-4.1-mini": {"input": 0, "output": 0}})
    at(agent, MONDAY_10)
    agent.ask("within the budget")  # $0.60 of $1.00 spent
    priced_session("ann", datetime(2026, 12, 9, 11, 0), prompt_tokens=1_000_000)  # Wednesday: $0.40 more
    at(agent, datetime(2026, 12, 9, 12, 0))
    calls = len(provider.systems)
    agent.conversation.budget.allow_over_once()  # the conversation's escape hatch does not lift the course's
    with pytest.raises(BudgetExceeded) as err:
        agent.ask("over it now")
    assert len(provider.systems) == calls and agent.conversation.turn_count == 1  # nothing sent, no turn
    message = err.value.message
    assert "$1.00 of $1.00 this week" in message and str(path) in message and "00:00 on Mon 14 Dec" in message
    at(agent, datetime(2026, 12, 14, 9, 0))  # the next week
    assert agent.ask("a new week").text
    as_student("bob")
    bob = Agent(model="demo")
    at(bob, MONDAY_10)
    with pytest.raises(BudgetExceeded, match=r"\$2\.00 of \$1\.00"):
        bob.ask("bob spent his")


def test_the_live_conversation_counts_once_though_it_is_saved_too(course):
    course('budget_usd = 1.0\nsave_to = "sessions"\n')
    as_student("ann")
    agent = Agent(model="demo", delay=0)
    at(agent, MONDAY_10)
    agent.ask("first")
    record = agent.conversation.turns[0]
    record.model, record.provider, record.started_at = "gpt-4.1-mini", "openai", MONDAY_10.timestamp()
    record.usage.prompt_token_count = 1_500_000  # $0.60
    agent.save()
    status = agent.course.limits.status(agent.conversation.turns, agent.conversation.conversation_id)
    assert status.spent_usd == pytest.approx(0.6, abs=0.001)  # not $1.20
    assert agent.ask("second").text  # $0.60 + $0.60 would be over: it is not


# --- hours ---------------------------------------------------------------------------------


def test_out_of_lesson_hours_the_turn_is_refused_and_says_when_it_opens(course):
    course('hours = ["09:00-12:00", "13:00-15:30"]\n')
    provider = RecordingDemo()
    agent = Agent(model=provider)
    at(agent, datetime(2026, 12, 7, 12, 30))
    with pytest.raises(BudgetExceeded, match=r"closed: outside the lesson hours \(09:00-12:00, 13:00-15:30\).*"
                                             r"opens again at 13:00 on Mon 07 Dec"):
        agent.ask("lunch break")
    at(agent, datetime(2026, 12, 7, 18, 0))
    with pytest.raises(BudgetExceeded, match="opens again at 09:00 on Tue 08 Dec"):
        agent.ask("evening")
    assert provider.systems == []
    at(agent, datetime(2026, 12, 8, 9, 0))
    assert agent.ask("in class").text and len(provider.systems) == 1


def test_an_edit_of_the_hours_or_budget_applies_to_a_running_agent_and_a_broken_edit_keeps_the_last(course):
    path = course('hours = ["09:00-12:00"]\nsave_to = "sessions"\n')
    as_student("ann")
    agent = Agent(model="demo", delay=0)
    at(agent, datetime(2026, 12, 7, 12, 30))
    with pytest.raises(BudgetExceeded, match="closed"):
        agent.ask("after class")
    course('hours = ["09:00-13:30"]\nsave_to = "sessions"\n')  # another 90 minutes (a new size: no mtime tick)
    assert agent.ask("after class").text
    assert str(agent.course.policy.hours[0]) == "09:00-13:30"
    assert read_session_head(agent.save()).settings.policy_hash == load_policy(path).content_hash
    path.write_text("[policy]\nhours = [", encoding="utf-8")  # saved half-written
    assert agent.ask("still open").text  # the last policy read holds
    course('budget_usd = 0.5\nsave_to = "sessions"\n')  # a budget, and no hours now
    record = agent.conversation.turns[0]
    record.model, record.provider = "gpt-4.1-mini", "openai"
    record.started_at = datetime(2026, 12, 7, 12, 30).timestamp()
    record.usage.prompt_token_count = 1_500_000  # $0.60
    at(agent, datetime(2026, 12, 7, 20, 0))
    with pytest.raises(BudgetExceeded, match=r"spent \$0\.600 of \$0\.500 this week"):
        agent.ask("evening")


def test_lesson_hours_on_named_days_are_open_only_then_and_say_the_day_they_open(course):
    path = course('hours = ["Mon-Wed, Fri 09:00-12:00", "tue,thu 13:00-15:30", "Sat-Mon 20:00-21:00"]\n')
    policy = load_policy(path)
    assert [str(h) for h in policy.hours] == ["Mon-Wed,Fri 09:00-12:00", "Tue,Thu 13:00-15:30", "Sat-Mon 20:00-21:00"]
    thursday_10, thursday_14 = datetime(2026, 12, 10, 10, 0), datetime(2026, 12, 10, 14, 0)
    assert not policy.is_open(thursday_10) and policy.is_open(thursday_14)
    assert policy.next_opening(thursday_10) == thursday_14.replace(hour=13)
    assert policy.next_opening(datetime(2026, 12, 12, 10, 0)) == datetime(2026, 12, 12, 20, 0)  # Saturday
    assert policy.next_opening(datetime(2026, 12, 7, 21, 0)) == datetime(2026, 12, 8, 9, 0)  # Monday night
    assert policy.next_opening(datetime(2026, 12, 9, 12, 30)) == datetime(2026, 12, 10, 13, 0)  # Wednesday
    provider = RecordingDemo()
    agent = Agent(model=provider)
    at(agent, datetime(2026, 12, 11, 12, 30))  # Friday, after the morning
    with pytest.raises(BudgetExceeded, match=r"\(Mon-Wed,Fri 09:00-12:00, Tue,Thu 13:00-15:30, Sat-Mon "
                                             r"20:00-21:00\).*opens again at 20:00 on Sat 12 Dec"):
        agent.ask("Friday afternoon")
    at(agent, datetime(2026, 12, 14, 9, 30))  # Monday morning
    assert agent.ask("in class").text and len(provider.systems) == 1


# --- saving --------------------------------------------------------------------------------


def test_sessions_go_to_the_policy_folder_and_record_the_policy_path_and_hash(course, tmp_path):
    path = course('save_to = "sessions"\nuser = "student"\n')
    with pytest.warns(RuntimeWarning, match="saves sessions to"):
        agent = Agent(model="demo", delay=0, save_to=tmp_path / "elsewhere")
    agent.ask("hello")
    saved = agent.session_path
    assert saved is not None and saved.parent == course.root / "sessions" and not (tmp_path / "elsewhere").exists()
    head = read_session_head(saved)
    assert head.user == "student"
    assert head.settings.policy_file == str(path)
    assert head.settings.policy_hash == load_policy(path).content_hash
    with pytest.warns(RuntimeWarning, match="you chat as 'student', not 'ann'"):
        assert Agent(model="demo", user="ann").user == "student"  # under a policy, not an argument


# --- rules ---------------------------------------------------------------------------------


def test_an_agents_md_of_the_course_lands_in_the_system_prompt_sent(course):
    course("save_to = \"sessions\"\n")
    (course.root / "AGENTS.md").write_text("Answer in French.\n", encoding="utf-8")
    provider = RecordingDemo()
    agent = Agent(model=provider, system="Be brief.", rules=False)  # a student cannot drop the course's rules
    agent.ask("hello")
    assert provider.systems == ["Answer in French.\n\nBe brief."]
    assert plumbing_of(agent.conversation).rules_label == "AGENTS.md"
    assert agent.settings().system == "Be brief." and agent.settings().rules == str(course.root / "AGENTS.md")
    resumed = Agent.load(agent.session_path, model=provider)
    assert resumed.system == "Answer in French.\n\nBe brief."  # once, not twice


def test_the_tutor_preset_from_the_policy_or_the_agent(course, tmp_path, monkeypatch):
    course('rules = "tutor"\n')
    provider = RecordingDemo()
    Agent(model=provider).ask("solve exercise 3 for me")
    assert "Do not write the solution" in provider.systems[0]
    monkeypatch.chdir(tmp_path)  # no policy here
    provider = RecordingDemo()
    agent = Agent(model=provider, rules="tutor", system="The course is on pandas.")
    agent.ask("hi")
    assert provider.systems[0].startswith("# Tutor rules") and provider.systems[0].endswith("The course is on pandas.")
    assert plumbing_of(agent.conversation).rules_label == "tutor"
    with pytest.raises(ConfigError, match="cannot be read"):
        Agent(model="demo", rules="missing.md")


def test_a_policy_rules_file_that_is_missing_names_the_key(course):
    path = course('rules = "rules/course.md"\n')
    with pytest.raises(ConfigError) as err:
        Agent(model="demo")
    assert str(path) in err.value.message and "'rules'" in err.value.message


# --- the widget (without a browser) and %chat_policy ----------------------------------------


def test_the_widget_says_closed_and_when_it_opens_and_names_the_rules(course):
    pytest.importorskip("anywidget")
    from nbagent.notebook.widget import ChatWidget
    from nbagent.notebook.protocol import Send
    from support.widget_messages import customs, deliver

    course('hours = ["09:00-12:00"]\nrules = "tutor"\n')
    agent = Agent(model="demo", delay=0)
    at(agent, datetime(2026, 12, 7, 13, 0))
    widget = ChatWidget(agent)
    assert widget.notice.startswith("Not sent: closed") and "opens again at 09:00 on Tue 08 Dec" in widget.notice
    assert widget.gauge["rules"] == "tutor"
    sent = customs(widget)
    deliver(widget, Send("hello"))
    assert sent and sent[-1]["type"] == "refused" and "opens again" in sent[-1]["text"]
    assert widget.prompts.task is None and agent.conversation.turn_count == 0


def test_chat_policy_magic_shows_the_policy_in_force(course):
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    path = course('models = ["demo"]\nrun_code = false\nbudget_usd = 2\nbudget_period = "day"\n'
                  'hours = ["00:00-23:59"]\nrules = "tutor"\n')
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "nbagent")
    ip.user_ns.pop("nbagent_agent", None)
    with capture_output() as cap:
        ip.run_line_magic("chat_policy", "")
    out = cap.stdout
    assert f"course policy: {path}" in out and "models: demo" in out and "run_code: no" in out
    assert "budget: $2.00 left of $2.00 this day" in out and "starts afresh at 00:00" in out
    assert "hours: 00:00-23:59" in out and "rules: tutor" in out
    json.dumps(out)  # plain text


def test_a_damaged_file_in_the_sessions_folder_spends_nothing(course):
    course('budget_usd = 1.0\nsave_to = "sessions"\n')
    priced_session("ann", MONDAY_10, prompt_tokens=1_000_000)  # $0.40
    folder = course.root / "sessions"
    (folder / "broken.json").write_text('{"version": 3, "turns": [', encoding="utf-8")
    (folder / "notes.json").write_text('["not a session"]', encoding="utf-8")
    as_student("ann")
    agent = Agent(model="demo", delay=0)
    at(agent, MONDAY_10)
    assert agent.course.limits.status().spent_usd == pytest.approx(0.4, abs=0.001)
    assert agent.ask("still fine").text


def test_a_session_resumes_with_its_rules_and_still_loads_when_the_file_is_gone(tmp_path, monkeypatch):
    monkeypatch.delenv("NBAGENT_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)  # no policy here
    tutored = Agent(model="demo", delay=0, rules="tutor", save_to=tmp_path / "chats")
    tutored.ask("hi")
    assert Agent.load(tutored.session_path).course.rules.label == "tutor"
    own = tmp_path / "mine.md"
    own.write_text("Always answer in haiku.\n", encoding="utf-8")
    agent = Agent(model="demo", delay=0, rules=own, save_to=tmp_path / "chats")
    agent.ask("hi")
    assert Agent.load(agent.session_path).system == "Always answer in haiku."
    own.unlink()
    resumed = Agent.load(agent.session_path)  # nothing lost: the saved prompt goes on without the file
    assert resumed.course.rules is None and resumed.conversation.turn_count == 1


def test_the_docs_policy_example_is_a_valid_policy(tmp_path):
    """The full nbagent.toml example of the run-a-class tutorial parses to what its comments say."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "tutorials" / "run-a-class.md").read_text(encoding="utf-8")
    start = page.index("```toml\n")
    block = page[start + len("```toml\n"):page.index("```", start + 7)]
    path = tmp_path / "nbagent.toml"
    path.write_text("\n".join(line.removeprefix("  ") for line in block.splitlines()), encoding="utf-8")
    policy = load_policy(path)
    assert policy.models == ("demo", "openai:gpt-4.1-mini") and not policy.run_code
    assert policy.budget_usd == 2.0 and len(policy.hours) == 2 and policy.save_to == tmp_path / "sessions"
    assert policy.rules == "tutor" and policy.user == "student"


def test_chat_policy_with_an_agent_counts_its_live_spend_and_without_a_policy_says_so(course, tmp_path, monkeypatch):
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    course('budget_usd = 1.0\nsave_to = "sessions"\n')
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "nbagent")
    as_student("ann")
    agent = ip.user_ns["bot"] = Agent(model="demo", delay=0)
    agent.ask("first")
    record = agent.conversation.turns[0]
    record.model, record.provider = "gpt-4.1-mini", "openai"
    record.usage.prompt_token_count = 1_000_000  # $0.40, not saved yet
    with capture_output() as cap:
        ip.run_line_magic("chat_policy", "-a bot")
    assert "budget: $0.600 left of $1.00" in cap.stdout and "(spent $0.400)" in cap.stdout
    monkeypatch.chdir(tmp_path)
    with capture_output() as cap:
        ip.run_line_magic("chat_policy", "")
    assert cap.stdout.startswith("no course policy")
    ip.user_ns.pop("bot", None)
