"""nbagent.class_summary and the class view's kernel side, on sessions saved by real agents
(the demo model, and an OpenAI-compatible model on a closed loopback port for failed turns)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

import nbagent
from nbagent import Agent, ConfigError
from nbagent.analysis.class_summary import ClassFolder
from nbagent.core.session_file import read_session_head
from nbagent.core.steps import TurnStatus
from nbagent.notebook.class_view import ClassView
from nbagent.notebook.protocol import Open, RowsRequest

from support.widget_messages import deliver

pytest.importorskip("pandas")

PRICES = {"demo": {"input": 100.0, "output": 100.0}}  # dollars per million tokens: the demo is free otherwise


def student(folder: Path, user: str, *prompts: str) -> Agent:
    agent = Agent(model="demo", delay=0, save_to=folder, user=user)
    for p in prompts:
        agent.ask(p)
    return agent


def failing(folder: Path, user: str, n: int) -> Agent:
    """An agent whose server is not there: each turn fails (and is saved as failed)."""
    agent = Agent(model="openai:gpt-4.1-mini", base_url="http://127.0.0.1:9/v1", api_key="sk-test", save_to=folder,
                  user=user, max_retries=0)
    for _ in range(n):
        with pytest.raises(nbagent.NbagentError):
            agent.ask("Why does my loop not stop?")
    return agent


@pytest.fixture(scope="module")
def klass(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("class")
    student(folder, "ana", "What is 12 * 7?", "@teacher my plot is empty")
    student(folder, "ben", "Explain a for loop")
    student(folder, "ben", "What is 3 + 4?", "And 5 + 6?")
    student(folder, "cy", "Hello")
    time.sleep(0.01)  # cy's failing session is the later one
    failing(folder, "cy", 2)
    return folder


@pytest.fixture(scope="module")
def made_at(klass) -> float:
    """When the class folder's last turn started: the "now" of the budget tests, so that a run going past
    midnight (or Monday's) between building the module's folder and a test does not start a new period."""
    return nbagent.load_sessions(klass)["started"].max().timestamp()


def by_user(df) -> dict:
    return {r["user"]: r for r in df.to_dict("records")}


def test_one_row_per_student_with_their_sessions_turns_tokens_and_cost(klass):
    df = nbagent.class_summary(klass, pricing=PRICES)
    assert list(df["user"]) == ["ana", "ben", "cy"]
    rows = by_user(df)
    assert (rows["ana"]["sessions"], rows["ben"]["sessions"], rows["cy"]["sessions"]) == (1, 2, 2)
    assert (rows["ana"]["turns"], rows["ben"]["turns"], rows["cy"]["turns"]) == (2, 3, 3)
    usage = nbagent.load_sessions(klass, pricing=PRICES)  # the same turns, one row each
    for user, row in rows.items():
        mine = usage[usage["user"] == user]
        assert row["input_tokens"] == mine["input_tokens"].sum() > 0
        assert row["output_tokens"] == mine["output_tokens"].sum()
        assert row["cost_usd"] == pytest.approx(mine["cost_usd"].fillna(0).sum())
        assert row["last_active"] >= mine["started"].max()
    assert rows["ana"]["cost_usd"] > 0
    assert rows["ana"]["last_prompt"] == "@teacher my plot is empty"
    assert rows["ana"]["model"] == "demo:demo"
    assert str(df["last_active"].dtype) == "datetime64[ns, UTC]"
    assert df.attrs["skipped"] == {}


def test_errors_in_a_row_counts_the_failed_turns_ending_the_latest_session(klass):
    rows = by_user(nbagent.class_summary(klass))
    assert rows["cy"]["errors_in_a_row"] == 2  # the latest session: two failed turns
    assert rows["ana"]["errors_in_a_row"] == rows["ben"]["errors_in_a_row"] == 0
    latest = read_session_head(rows["cy"]["latest_session"])  # the file and its autosave journal
    assert [t.status for t in latest.turns] == [TurnStatus.ERROR, TurnStatus.ERROR]


def test_a_student_asks_for_help_with_help_or_at_teacher_and_the_flag_clears_with_the_next_prompt(tmp_path):
    ana = student(tmp_path, "ana", "@teacher my plot is empty")
    student(tmp_path, "ben", "/help I am stuck")
    student(tmp_path, "cy", "Can you help me with pandas?")  # asking the model for help is not asking the teacher
    rows = by_user(nbagent.class_summary(tmp_path))
    assert (rows["ana"]["asked_for_help"], rows["ben"]["asked_for_help"], rows["cy"]["asked_for_help"]) == (True, True, False)
    ana.ask("Never mind, it works now")
    assert not by_user(nbagent.class_summary(tmp_path))["ana"]["asked_for_help"]
    rows = by_user(nbagent.class_summary(tmp_path, help_pattern=r"\bhelp\b"))
    assert rows["cy"]["asked_for_help"]
    with pytest.raises(ConfigError, match="help_pattern"):
        nbagent.class_summary(tmp_path, help_pattern="(")


def test_over_budget_counts_the_spend_of_the_current_day_or_week(klass, made_at):
    rows = by_user(nbagent.class_summary(klass, pricing=PRICES))
    budget = (rows["ana"]["cost_usd"] + rows["ben"]["cost_usd"]) / 2  # between the two
    assert rows["ana"]["cost_usd"] != rows["ben"]["cost_usd"]
    over = by_user(nbagent.class_summary(klass, pricing=PRICES, budget_usd=budget, now=made_at))
    spent_more = max(("ana", "ben"), key=lambda u: rows[u]["cost_usd"])
    assert {u for u, r in over.items() if r["over_budget"]} == {spent_more}
    assert over[spent_more]["period_cost_usd"] == pytest.approx(rows[spent_more]["cost_usd"])
    later = made_at + 8 * 86400  # a week and a day on: both periods have started again
    for period in ("day", "week"):
        fresh = by_user(nbagent.class_summary(klass, pricing=PRICES, budget_usd=budget, period=period, now=later))
        assert not any(r["over_budget"] for r in fresh.values())
        assert all(r["period_cost_usd"] == 0 for r in fresh.values())
    assert not any(r["over_budget"] for r in rows.values())  # no budget: never over
    with pytest.raises(ConfigError, match="period"):
        nbagent.class_summary(klass, budget_usd=1.0, period="month")
    with pytest.raises(ConfigError, match="budget_usd"):
        nbagent.class_summary(klass, budget_usd=-1)


def test_the_course_policy_over_the_folder_sets_the_budget_and_period(klass, made_at, tmp_path, monkeypatch):
    monkeypatch.delenv("NBAGENT_CONFIG", raising=False)
    rows = by_user(nbagent.class_summary(klass, pricing=PRICES))
    budget = (rows["ana"]["cost_usd"] + rows["ben"]["cost_usd"]) / 2
    spent_more = max(("ana", "ben"), key=lambda u: rows[u]["cost_usd"])
    sessions = tmp_path / "course" / "sessions"
    shutil.copytree(klass, sessions)
    (tmp_path / "course" / "nbagent.toml").write_text(
        f'[policy]\nbudget_usd = {budget}\nbudget_period = "week"\nsave_to = "sessions"\n')
    over = by_user(nbagent.class_summary(sessions, pricing=PRICES, now=made_at))
    assert {u for u, r in over.items() if r["over_budget"]} == {spent_more}
    next_week = made_at + 7 * 86400 + 1
    assert not any(r["over_budget"] for r in by_user(
        nbagent.class_summary(sessions, pricing=PRICES, now=next_week)).values())
    view = ClassView(sessions, interval=3600)  # the test polls by hand
    try:
        assert (view.budget_usd, view.period) == (pytest.approx(budget), "week")
        policy = tmp_path / "course" / "nbagent.toml"
        policy.write_text('[policy]\nbudget_usd = 25.0\nbudget_period = "day"\nsave_to = "sessions"\n')
        view.poll()  # the teacher's edit applies at the next poll
        assert (view.budget_usd, view.period) == (25.0, "day") and view.summary.budget_usd == 25.0
        assert not any(r["over_budget"] for r in view.rows)  # nobody spent $25
        policy.write_text("[policy]\nbudget_usd = ")  # saved half-written: the last budget holds
        view.poll()
        assert (view.budget_usd, view.period) == (25.0, "day")
    finally:
        view.close()
    given = ClassView(sessions, interval=3600, budget_usd=1.0)
    try:
        policy.write_text('[policy]\nbudget_usd = 3.0\nsave_to = "sessions"\n')
        given.poll()
        assert given.budget_usd == 1.0  # a budget given to the view is its own
    finally:
        given.close()
    assert not any(r["over_budget"] for r in by_user(nbagent.class_summary(klass, pricing=PRICES)).values())


def test_half_written_and_corrupt_files_are_skipped_with_a_note(klass, tmp_path):
    folder = tmp_path / "class"
    shutil.copytree(klass, folder)
    ana = Path(by_user(nbagent.class_summary(folder))["ana"]["latest_session"])
    text = ana.read_text()
    (folder / "half.json").write_text(text[: len(text) // 2])  # a copy cut short while it was written
    (folder / "notes.json").write_text('{"not": "a session"}')
    (folder / "garbage.json").write_bytes(b"\xff\xfe\x00garbage")
    df = nbagent.class_summary(folder)
    assert list(df["user"]) == ["ana", "ben", "cy"]
    assert by_user(df)["ana"]["sessions"] == 1
    assert sorted(Path(p).name for p in df.attrs["skipped"]) == ["garbage.json", "half.json", "notes.json"]
    assert "cut short" in df.attrs["skipped"][os.fspath(folder / "half.json")]


def test_a_scan_reads_only_the_files_that_changed(tmp_path):
    ana = student(tmp_path, "ana", "Hello")
    student(tmp_path, "ben", "Hello")
    folder = ClassFolder(tmp_path)
    assert folder.scan() and folder.reads == 2
    assert not folder.scan() and folder.reads == 2  # nothing changed: nothing read
    ana.ask("What is 2 + 2?")
    assert folder.scan() and folder.reads == 3  # ana's file only
    assert {s.user: s.turns for s in folder.students()} == {"ana": 2, "ben": 1}
    Path(ana.session_path).unlink()
    assert folder.scan() and [s.user for s in folder.students()] == ["ben"]


def test_a_new_period_clears_over_budget_without_any_file_changing(tmp_path):
    student(tmp_path, "ana", "Hello")
    folder = ClassFolder(tmp_path, budget_usd=0.0, pricing=PRICES)
    folder.scan()
    now = nbagent.load_sessions(tmp_path)["started"].max().timestamp()  # the turn's own day, even past midnight
    assert folder.students(now)[0].over_budget
    assert not folder.scan()
    assert not folder.students(now + 86400 + 1)[0].over_budget  # the next day: nothing spent in it yet
    assert folder.students(now)[0].over_budget


def test_the_class_view_sends_only_changed_rows_and_opens_a_students_latest_session(tmp_path):
    ana = student(tmp_path, "ana", "Hello")
    student(tmp_path, "ben", "What is 3 + 4?")
    view = ClassView(tmp_path, interval=3600)  # the test polls by hand
    sent: list = []
    view.send = lambda content, buffers=None: sent.append(json.loads(json.dumps(content)))
    try:
        assert view.handlers.missing() == []
        deliver(view, RowsRequest(id="r1"))
        assert [r["user"] for r in sent[-1]["rows"]] == ["ana", "ben"] and sent[-1]["ok"]
        assert view.poll() is None  # nothing saved since
        ana.ask("What is 2 + 2?")
        change = view.poll()
        assert change is not None and [r["user"] for r in change.rows] == ["ana"] and change.rows[0]["turns"] == 2
        assert change.removed == []
        assert sent[-1] == {"type": "changed", "rows": change.rows, "removed": [], "notice": ""}  # what the view got
        latest = change.rows[0]["latest_session"]
        deliver(view, Open(id="o1", path=latest))
        opened = sent[-1]
        assert opened["ok"] and len(opened["turns"]) == 2 and len(opened["usage"]) == 2
        assert "What is 2 + 2?" in json.dumps(opened["turns"])
        deliver(view, Open(id="o2", path=os.fspath(tmp_path / ".." / "elsewhere.json")))
        assert not sent[-1]["ok"] and "not a session this view lists" in sent[-1]["error"]
        (tmp_path / "broken.json").write_text("{")
        change = view.poll()
        assert change is not None and change.rows == [] and "broken.json" in change.notice
    finally:
        view.close()


def test_the_opened_session_costs_what_the_row_says(tmp_path):
    """#48 rough edges: the class view priced the row with the view's prices (the demo at 100 $/M here)
    and the opened session with none, so the detail said $0 beside the row's $0.149."""
    student(tmp_path, "ana", "What is 12 * 7?", "Explain a for loop")
    view = ClassView(tmp_path, interval=3600, pricing=PRICES)
    sent: list = []
    view.send = lambda content, buffers=None: sent.append(json.loads(json.dumps(content)))
    try:
        (row,) = view.rows
        assert row["cost_usd"] > 0
        deliver(view, Open(id="o1", path=row["latest_session"]))
        opened = sent[-1]
        assert opened["ok"]
        assert sum(u["cost"] for u in opened["usage"]) == pytest.approx(row["cost_usd"])  # the detail line
        assert sum(t["record"]["cost"] for t in opened["turns"]) == pytest.approx(row["cost_usd"])  # each turn's footer
    finally:
        view.close()
