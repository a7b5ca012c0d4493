"""The session browser and the chat widget's New chat / History / Next, without a browser: what
the kernel answers to each request, and what the widgets' traits hold afterwards."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

pytest.importorskip("anywidget")

import nbagent  # noqa: E402
from nbagent import Agent, list_sessions, tool  # noqa: E402
from nbagent.notebook.session_browser import SessionBrowser  # noqa: E402
from support.widget_messages import deliver, deliver_raw  # noqa: E402
from support.waiting import until  # noqa: E402
from nbagent.notebook.protocol import BrowserAsset, Export, HistoryRequest, NewChat, NextStep, Open, OpenSession, Refresh, ReplayChoiceRequest, Restore, Resume, Search, Send, Trash  # noqa: E402
from nbagent.notebook.widget import ChatWidget  # noqa: E402
from nbagent.session_folder import TRASH  # noqa: E402

STATIC = Path(nbagent.__file__).parent / "notebook" / "static"


class Outbox:
    """The custom messages a widget sends (its comm is not connected in these tests)."""

    def __init__(self, widget):
        self.sent: list[dict] = []
        widget.send = lambda content, buffers=None: self.sent.append(json.loads(json.dumps(content)))

    def reply(self, rid: str) -> dict:
        return next(m for m in self.sent if m.get("id") == rid)


def two_chats(folder: Path) -> tuple[Path, Path]:
    a = Agent(model="demo", delay=0, save_to=folder, user="ann")
    a.ask("Plot the <b>sales</b> data")
    b = Agent(model="demo", delay=0, save_to=folder, user="ben")
    b.ask("Second chat")
    b.ask("More please")
    return a.session_path, b.session_path


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return str(eval(expression, {"__builtins__": {}}))  # noqa: S307 - test tool


def finished(w: ChatWidget) -> list:
    return w.finished_turns()


def ask(browser: SessionBrowser, box: Outbox, request) -> dict:
    deliver(browser, request)
    return box.reply(request.id)


def ask_raw(browser: SessionBrowser, box: Outbox, content: dict) -> dict:
    deliver_raw(browser, content)
    return box.reply(content["id"])


def test_the_browser_lists_sessions_and_a_damaged_file_as_unreadable(tmp_path):
    first, second = two_chats(tmp_path)
    (tmp_path / "broken.json").write_text("{not json")
    browser = nbagent.session_browser(tmp_path)
    rows = {Path(r["path"]).name: r for r in browser.sessions}
    assert rows[second.name]["title"] == "Second chat" and rows[second.name]["turns"] == 2
    assert rows[first.name]["user"] == "ann" and "demo" in rows[first.name]["models"]
    assert rows[first.name]["updated"].startswith("20") and rows[first.name]["error"] == ""
    assert rows["broken.json"]["error"] and rows["broken.json"]["title"] == ""
    assert [r["path"] for r in browser.sessions][:2] == [str(second), str(first)]  # newest first
    json.dumps(browser.sessions)  # the trait is plain JSON


def test_open_answers_the_chat_widgets_turns_and_usage_and_refuses_unlisted_paths(tmp_path):
    first, second = two_chats(tmp_path)
    browser = nbagent.session_browser(tmp_path)
    box = Outbox(browser)
    reply = ask(browser, box, Open(id="r1", path=str(second)))
    assert reply["ok"] and reply["type"] == "reply"
    assert [t["record"]["prompt"] for t in reply["turns"]] == ["Second chat", "More please"]
    assert [u["turn"] for u in reply["usage"]] == [0, 1] and all(u["output_tokens"] > 0 for u in reply["usage"])
    live = Agent(model="demo", delay=0)
    live.ask("Second chat")
    shown = ChatWidget(live)
    assert set(reply["turns"][0]) == set(finished(shown)[0])  # the same turn dicts as the chat widget's
    outside = tmp_path.parent / "elsewhere.json"
    outside.write_text(first.read_text())
    refused = ask(browser, box, Open(id="r2", path=str(outside)))
    assert not refused["ok"] and "not a session this browser lists" in refused["error"]
    assert not ask(browser, box, Export(id="r3", path=str(outside), fmt="md"))["ok"]
    assert not outside.with_suffix(".md").exists()


def test_a_shown_session_gets_the_grammars_and_math_modules_and_nothing_else(tmp_path):
    browser = nbagent.session_browser(tmp_path)
    box = Outbox(browser)
    assert "export" in ask(browser, box, BrowserAsset(id="a1", name="grammars"))["code"]
    assert "MathML" in ask(browser, box, BrowserAsset(id="a2", name="math"))["code"]
    refused = ask(browser, box, BrowserAsset(id="a3", name="../widget.js"))
    assert refused["ok"] is False and "code" not in refused


def test_search_export_trash_and_refresh(tmp_path):
    first, second = two_chats(tmp_path)
    browser = nbagent.session_browser(tmp_path)
    box = Outbox(browser)
    answer = first.read_text()
    assert ask(browser, box, Search(id="s1", text="sales"))["paths"] == [str(first)]  # the prompt's text
    assert ask(browser, box, Search(id="s2", text=""))["paths"] == []
    md = ask(browser, box, Export(id="e1", path=str(second), fmt="md"))
    assert md["ok"] and Path(md["written"]).read_text().count("More please") >= 1
    html = ask(browser, box, Export(id="e2", path=str(second), fmt="html"))
    assert Path(html["written"]).read_text().startswith("<!DOCTYPE html>")
    assert not ask(browser, box, Export(id="e3", path=str(second), fmt="pdf"))["ok"]
    moved = ask(browser, box, Trash(id="t1", path=str(first)))
    assert moved["ok"] and Path(moved["moved"]).parent == tmp_path / TRASH and not first.exists()
    assert Path(moved["moved"]).read_text() == answer  # moved, not deleted
    assert [r["path"] for r in browser.sessions] == [str(second)]  # the list was refreshed
    Agent(model="demo", delay=0, save_to=tmp_path).ask("Third")
    assert ask(browser, box, Refresh(id="f1"))["ok"] and len(browser.sessions) == 2
    assert not ask_raw(browser, box, {"type": "bogus", "id": "x1", "path": str(second)})["ok"]


def test_export_refuses_a_planted_link_and_never_writes_through_it(tmp_path):
    _, second = two_chats(tmp_path)
    victim = tmp_path.parent / f"{tmp_path.name}-victim.txt"
    victim.write_text("keep me")
    link = second.with_suffix(".md")
    link.symlink_to(victim)  # planted where Export md writes
    browser = nbagent.session_browser(tmp_path)
    box = Outbox(browser)
    refused = ask(browser, box, Export(id="l1", path=str(second), fmt="md"))
    assert not refused["ok"] and "is a symbolic link" in refused["error"] and str(link) in refused["error"]
    assert victim.read_text() == "keep me" and link.is_symlink()  # neither written through nor replaced
    html = ask(browser, box, Export(id="l2", path=str(second), fmt="html"))  # no link there: written
    assert html["ok"] and Path(html["written"]).read_text().startswith("<!DOCTYPE html>")
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_export_on_a_full_disk_keeps_the_previous_export(tmp_path):
    from support.small_disk import fill, small_disk

    with small_disk(tmp_path / "disk", size_kb=256) as disk:
        agent = Agent(model="demo", delay=0, save_to=disk)
        agent.ask("Explain the export")
        browser = nbagent.session_browser(disk)
        box = Outbox(browser)
        first = ask(browser, box, Export(id="d1", path=str(agent.session_path), fmt="md"))
        before = Path(first["written"]).read_text()
        agent.ask("A second, longer question " + "with many words " * 200)
        browser.refresh()
        fill(disk)
        full = ask(browser, box, Export(id="d2", path=str(agent.session_path), fmt="md"))
        assert not full["ok"] and "No space left on device" in full["error"]
        assert Path(first["written"]).read_text() == before  # the previous export is whole
        assert not [p.name for p in disk.iterdir() if p.name.endswith(".tmp")]


def test_a_deleted_session_can_be_restored_with_undo(tmp_path):
    first, second = two_chats(tmp_path)
    browser = nbagent.session_browser(tmp_path)
    box = Outbox(browser)
    text = first.read_text()
    moved = ask(browser, box, Trash(id="t1", path=str(first)))
    assert moved["ok"] and not first.exists() and str(first) not in [r["path"] for r in browser.sessions]
    assert moved["undo"] == moved["moved"]  # what the view's Undo sends back
    back = ask(browser, box, Restore(id="u1", path=moved["undo"]))
    assert back["ok"] and back["restored"] == str(first) and first.read_text() == text
    assert str(first) in [r["path"] for r in browser.sessions]  # listed again
    again = ask(browser, box, Restore(id="u2", path=moved["undo"]))  # only once
    assert not again["ok"]
    other = tmp_path / TRASH / "planted.json"  # a file in the trash this browser did not move there
    other.write_text(text)
    refused = ask(browser, box, Restore(id="u3", path=str(other)))
    assert not refused["ok"] and "not a session this browser moved to the trash" in refused["error"]
    assert other.exists() and not (tmp_path / "planted.json").exists()


async def test_resume_shows_a_live_chat_that_saves_to_the_same_file(tmp_path):
    _, second = two_chats(tmp_path)
    browser = nbagent.session_browser(tmp_path, delay=0)
    box = Outbox(browser)
    assert ask(browser, box, Resume(id="u1", path=str(second)))["ok"]
    chat = browser.chat_widget
    assert browser.chat == f"anywidget:{chat.model_id}" and browser.agent.session_path == second
    assert [t["record"]["prompt"] for t in finished(chat)] == ["Second chat", "More please"]
    assert chat.switchable  # the resumed agent saves to the folder: New chat and History show
    deliver(chat, Send(prompt="And a third"))
    await chat.prompts.task
    assert list_sessions(tmp_path).set_index("path").loc[str(second), "turns"] == 3
    assert len(list(tmp_path.glob("*.json"))) == 2  # no new file
    assert next(r for r in browser.sessions if r["path"] == str(second))["turns"] == 3  # the list follows


def test_a_folder_that_does_not_exist_yet_lists_nothing_and_says_so(tmp_path):
    folder = tmp_path / "later"
    browser = nbagent.session_browser(folder)
    assert browser.sessions == [] and "no folder" in browser.notice
    Agent(model="demo", delay=0, save_to=folder).ask("Now it exists")
    box = Outbox(browser)
    assert ask(browser, box, Refresh(id="f"))["ok"]
    assert [r["title"] for r in browser.sessions] == ["Now it exists"] and browser.notice == ""


def test_the_folder_widgets_code_is_sent_only_to_them_not_in_the_chats_bundle(tmp_path):
    from nbagent.notebook.class_view import ClassView

    folders = (STATIC / "folders.js").read_text(encoding="utf-8")
    assert nbagent.session_browser(tmp_path)._ui == folders
    view = ClassView(tmp_path, interval=3600)
    try:
        assert view._ui == folders
    finally:
        view.close()
    assert "_ui" not in Agent(model="demo", delay=0).widget().trait_names()
    widget_js = (STATIC / "widget.js").read_text(encoding="utf-8")
    for shown in ("Search titles…", "List the folder again"):  # the browser's search box, its Refresh button
        assert shown in folders and shown not in widget_js


def test_the_session_bar_is_sent_only_to_widgets_that_show_it(tmp_path):
    plain = Agent(model="demo", delay=0).widget()
    assert not plain.switchable and plain.session_ui == ""
    saving = Agent(model="demo", delay=0, save_to=tmp_path).widget()
    assert saving.switchable and saving.session_ui == (STATIC / "session_bar.js").read_text(encoding="utf-8")
    bar_title = "Open a saved conversation of this agent's folder"  # the History button's tooltip
    assert bar_title in saving.session_ui and bar_title not in (STATIC / "widget.js").read_text(encoding="utf-8")


async def test_new_chat_rebinds_the_widget_and_the_old_conversation_stays_saved(tmp_path):
    agent = Agent(model="demo", delay=0, save_to=tmp_path)
    w = agent.widget()
    deliver(w, Send(prompt="First question"))
    await w.prompts.task
    old_conv, old_key, first = agent.conversation, w.conversation_key, agent.session_path
    assert len(finished(w)) == 1
    deliver(w, NewChat())
    assert agent.conversation is not old_conv and w.conversation is agent.conversation
    assert finished(w) == [] and w.current is None and w.conversation_key != old_key
    assert agent.widget() is w  # displaying the agent again shows the same widget
    old_conv.ask("A turn on the old conversation")  # no longer listened to
    assert finished(w) == []
    deliver(w, Send(prompt="Fresh start"))
    await w.prompts.task
    assert [t["record"]["prompt"] for t in finished(w)] == ["Fresh start"]
    assert agent.session_path != first and len(list(tmp_path.glob("*.json"))) == 2


async def test_history_lists_the_folder_and_opening_one_rebinds(tmp_path):
    first, second = two_chats(tmp_path)
    agent = Agent(model="demo", delay=0, save_to=tmp_path)
    w = agent.widget()
    box = Outbox(w)
    deliver(w, HistoryRequest(id="h1"))
    listed = box.reply("h1")
    assert listed["type"] == "history" and [s["path"] for s in listed["sessions"]] == [str(second), str(first)]
    assert listed["sessions"][0]["title"] == "Second chat" and listed["current"] == ""
    deliver(w, OpenSession(path=str(second)))
    assert agent.session_path == second and w.conversation is agent.conversation
    assert [t["record"]["prompt"] for t in finished(w)] == ["Second chat", "More please"]
    deliver(w, Send(prompt="Continue"))
    await w.prompts.task
    assert list_sessions(tmp_path).set_index("path").loc[str(second), "turns"] == 3
    elsewhere = tmp_path / "sub"
    elsewhere.mkdir()
    stray = elsewhere / first.name
    stray.write_text(first.read_text())
    deliver(w, OpenSession(path=str(stray)))
    assert "is not a session of" in w.notice and agent.session_path == second  # refused, nothing changed


def test_new_chat_and_history_need_an_agent_with_save_to():
    w = Agent(model="demo", delay=0).widget()
    conv = w.conversation
    deliver(w, NewChat())
    assert "save_to" in w.notice and w.conversation is conv


async def test_next_plays_a_stepping_replay_one_model_call_at_a_time(tmp_path):
    recorder = Agent(model="demo", delay=0, save_to=tmp_path, tools=[calculator])
    recorded = recorder.ask("What is 12 * 7?").text
    replay = Agent(model=f"replay:{recorder.session_path}", speed=None, step=True)
    w = replay.widget()
    assert w.session_ui and not w.switchable  # the bar shows Next only
    deliver(w, Send(prompt="What is 12 * 7?"))
    calls = len(replay.provider.recording.turns[0].calls)
    assert calls == 2  # the tool call, then the answer
    for _ in range(calls):
        await until(lambda: w.step_waiting or w.prompts.task.done(), "the replay waiting for Next")
        assert w.step_waiting and not w.prompts.task.done()
        deliver(w, NextStep())
        assert not w.step_waiting
    await asyncio.wait_for(w.prompts.task, 10)
    assert not w.step_waiting and "84" in recorded
    assert replay.conversation.last_response == recorder.conversation.last_response
    plain = Agent(model="demo", delay=0).widget()
    deliver(plain, NextStep())
    assert "step=True" in plain.notice


async def test_the_replay_trait_carries_the_counter_and_the_mismatch_notice(tmp_path):
    recorder = Agent(model="demo", delay=0, save_to=tmp_path, tools=[calculator])
    recorder.ask("What is 12 * 7?")
    replay = Agent(model=f"replay:{recorder.session_path}", speed=None, step=True)
    w = replay.widget()
    assert w.replay == {"type": "replay", "step": 0, "steps": 2, "waiting": False, "mismatch": False, "recorded_prompt": "",
                        "prompt": "", "live": "", "live_unavailable": "", "live_turn": False,
                        "stepping": True, "waits": 0}  # before any prompt
    deliver(w, Send(prompt="What is 6 * 7?"))
    await until(lambda: w.replay["mismatch"], "the notice")
    assert (w.replay["recorded_prompt"], w.replay["prompt"]) == ("What is 12 * 7?", "What is 6 * 7?")
    assert "live=" in w.replay["live_unavailable"] and not w.step_waiting
    deliver(w, ReplayChoiceRequest(choice="live"))
    assert "cannot answer live" in w.notice and w.replay["mismatch"]  # said, and still asking
    deliver(w, ReplayChoiceRequest(choice="continue"))
    assert not w.replay["mismatch"]
    for k in range(2):
        await until(lambda: w.replay["waiting"], "waiting for Next")
        assert w.replay["step"] == k and w.replay["waits"] == k + 1 and w.step_waiting
        deliver(w, NextStep())
    await asyncio.wait_for(w.prompts.task, 10)
    await until(lambda: w.replay["step"] == 2 and not w.replay["waiting"], "the last step counted")
    unstepped = Agent(model=f"replay:{recorder.session_path}", speed=None).widget()
    assert unstepped.session_ui and unstepped.replay["stepping"] is False  # the counter and notice, no Next
    plain = Agent(model="demo", delay=0).widget()
    assert plain.replay == {} and not plain.session_ui
    deliver(plain, ReplayChoiceRequest(choice="continue"))
    assert "replay" in plain.notice
