"""A 200-turn chat in a real browser (JupyterLab + Playwright + Debian chromium).

The widget renders a long chat's latest turns and keeps the earlier ones behind "Show earlier
turns" (js/src/render/view.js); these tests check what a reader sees: every turn is reachable,
the view stays where the reader is when earlier turns appear, and a new answer still streams in
and is followed at turn 200. Speed is measured in bench/bench_browser.py, not here.

Run:  flock /tmp/nbagent-browser.lock .venv/bin/python -m pytest -q tests/test_long_chat_browser.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, lab_page, lab_with_notebooks, notebook_opener

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")

LONG = ("from nbagent import Agent\nfrom nbagent.providers.demo import DemoProvider\n"
        "demo = DemoProvider(delay=0)\nagent = Agent(model=demo)\n"
        "for i in range(200):\n    await agent.chat_to_completion(f'Question {i}: tell me about topic {i}')\n"
        "demo.delay = 0.01\nagent")
NOTEBOOKS = {"long.ipynb": [LONG], "stream.ipynb": [LONG]}

PROMPTS = "(s) => [...document.querySelectorAll(s + ' .nba-turn .nba-prompt-text')].map(p => p.textContent)"
GAP = "(s) => { const l = document.querySelector(s + ' .nba-turns'); return l.scrollHeight - l.scrollTop - l.clientHeight; }"


@pytest.fixture(scope="module")
def lab(tmp_path_factory, request):
    with lab_with_notebooks(tmp_path_factory, request, NOTEBOOKS) as srv, lab_page(srv) as page:
        yield page


@pytest.fixture
def notebook(lab):
    yield from notebook_opener(lab)


def show_chat(page, nb: str) -> str:
    ok = page.evaluate("""async () => await Promise.race([
        window.jupyterapp.commands.execute('notebook:run-all-cells').then(() => true),
        new Promise(r => setTimeout(() => r(false), 120000))])""")
    assert ok, "the cell did not finish"
    chat = f"{nb} .nba-chat"
    page.wait_for_function(f"(s) => ({PROMPTS})(s).includes('Question 199: tell me about topic 199')", arg=chat, polling=100)
    return chat


def test_earlier_turns_of_a_200_turn_chat_are_one_click_away_each(lab, notebook):
    """The chat opens at its latest turns; "Show earlier turns" brings the earlier ones, above the
    turn the reader is looking at, which stays in view; pressing it until it goes shows turn 1."""
    chat = show_chat(lab, notebook("long.ipynb"))
    prompts = lab.evaluate(PROMPTS, chat)
    assert prompts[-1] == "Question 199: tell me about topic 199"
    assert "Question 0: tell me about topic 0" not in prompts and len(prompts) < 200
    button = f"{chat} .nba-earlier"
    assert "earlier turns" in lab.inner_text(button)
    assert lab.evaluate(GAP, chat) < 40  # the view is at the latest answer
    # the reader scrolls (wheel) to the top of what is shown and asks for more
    lab.hover(f"{chat} .nba-turns")
    for _ in range(40):
        if lab.evaluate("(s) => document.querySelector(s + ' .nba-turns').scrollTop", chat) == 0:
            break
        lab.mouse.wheel(0, -5000)
        lab.wait_for_timeout(50)
    assert lab.evaluate("(s) => document.querySelector(s + ' .nba-turns').scrollTop", chat) == 0
    first = prompts[0]
    lab.click(button)
    lab.wait_for_function(f"([s, n]) => ({PROMPTS})(s).length > n", arg=[chat, len(prompts)], polling=50)
    more = lab.evaluate(PROMPTS, chat)
    assert more[-len(prompts):] == prompts and more.index(first) > 0  # earlier turns went above
    in_view = lab.evaluate("""([s, text]) => { const l = document.querySelector(s + ' .nba-turns');
        const p = [...l.querySelectorAll('.nba-prompt-text')].find(e => e.textContent === text).getBoundingClientRect();
        const box = l.getBoundingClientRect(); return p.bottom > box.top && p.top < box.bottom; }""", [chat, first])
    assert in_view, "the turn the reader was looking at moved out of view"
    for _ in range(10):
        if not lab.is_visible(button):
            break
        lab.click(button)
    lab.wait_for_function(f"(s) => ({PROMPTS})(s).length === 200", arg=chat, polling=50)
    assert not lab.is_visible(button)
    turn1 = lab.locator(f"{chat} .nba-turn").first
    turn1.scroll_into_view_if_needed()
    # rendered (innerText is what is laid out on screen) once in view: the prompt and its answer
    lab.wait_for_function("""(s) => { const t = document.querySelector(s + ' .nba-turn');
        return t.querySelector('.nba-prompt-text').innerText === 'Question 0: tell me about topic 0'
          && t.querySelector('.nba-md').innerText.includes('Question 0: tell me about topic 0'); }""", arg=chat, polling=50)
    assert turn1.is_visible()


def test_an_answer_streams_in_at_turn_201_and_the_view_follows_it(lab, notebook):
    chat = show_chat(lab, notebook("stream.ipynb"))
    shown = len(lab.evaluate(PROMPTS, chat))
    lab.fill(f"{chat} .nba-input", "And turn 201, please")
    lab.press(f"{chat} .nba-input", "Enter")
    # mid-stream: part of the answer is there while the turn still runs
    lab.wait_for_function("""(s) => { const c = document.querySelector(s), t = [...c.querySelectorAll('.nba-turn')].pop();
        return c.classList.contains('nba-is-running') && t.querySelector('.nba-prompt-text').textContent === 'And turn 201, please'
          && (t.querySelector('.nba-md')?.textContent || '').length > 0; }""", arg=chat, polling=20)
    lab.wait_for_function("""(s) => { const c = document.querySelector(s), t = [...c.querySelectorAll('.nba-turn')].pop();
        return !c.classList.contains('nba-is-running') && t.querySelector('.nba-footer').textContent; }""", arg=chat, polling=50)
    last = lab.locator(f"{chat} .nba-turn").last
    assert "And turn 201, please" in last.locator(".nba-md").inner_text()  # the demo model quotes the prompt
    assert lab.evaluate(GAP, chat) < 40  # followed to the end
    assert len(lab.evaluate(PROMPTS, chat)) == shown + 1  # the earlier turns stay folded away
