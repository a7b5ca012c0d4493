"""ChatWidget in a real browser: JupyterLab + Playwright + Debian chromium.

One JupyterLab server and one Chromium page for the module; each test opens its own notebook in a
temporary root. The kernel imports nbagent from this checkout and the scripted connections from
tests/support/streams.py.

Run:  .venv/bin/python -m pytest -q tests/test_widget_browser.py
Env:  CHROMIUM=/usr/bin/chromium   NBAGENT_SHOTS=docs/images (also write the screenshots there)
      NBAGENT_BROWSER_TIMINGS=<file.json> (write the measured timings there, for bench/)
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, ROOT, reload_and_open
from support.streams import words

pytestmark = pytest.mark.browser

TIMINGS: dict = {}

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")

CALC = (
    "from nbagent import Agent, Conversation, tool\n"
    "@tool\n"
    "def calculator(expression: str) -> str:\n"
    "    \"\"\"Evaluate an arithmetic expression.\"\"\"\n"
    "    return str(eval(expression, {'__builtins__': {}}))\n"
)


NOTEBOOKS = {
    "firsthour.ipynb": [
        "import nbagent\nfrom nbagent import Agent\nfrom support.scripted import Pause, ScriptedProvider, text_call, tool_call\n"
        "pause = Pause()\nbad = 'def half(x):\\n    return 1 / x\\n\\nhalf(0)'\n"
        "first = ScriptedProvider([tool_call(('c1', 'run_python', {'code': bad})),\n"
        "    text_call('It failed.\\n\\n```python\\nhalf(2)\\n```\\n\\nThat works.'), [pause] + text_call('Done waiting.')])\n"
        "agent = Agent(model=first, tools=nbagent.notebook_tools(approve_code=False))\nagent",
        "ev = pause.released\nev._loop.call_soon_threadsafe(ev.set)  # on the loop the stream waits on",
        "second = ScriptedProvider([text_call('Hello from the second model.')])\nsecond.model = 'scripted-2'\n"
        "agent.set_model(second)"],
    "demo.ipynb": [CALC + "agent = Agent(model='demo', tools=[calculator])\nagent",
                   "r = await agent.chat_to_completion('Say hello from another cell')"],
    "approve.ipynb": [CALC + "agent = Agent(model='demo', tools=[calculator], policy='ask')\nagent"],
    "stop.ipynb": ["from support.streams import StreamConnection, words\nfrom nbagent import Conversation\n"
                   "conv = Conversation(StreamConnection(words(20_000), thinking=['Thinking ', 'slowly.'], pace=0.02, batch=2))\n"
                   "conv.widget()"],
    "stream.ipynb": [
        "import json, time\nfrom support.streams import StreamConnection, words\nfrom nbagent import Conversation\n"
        "conn = StreamConnection(words(20_000), pace=0.003, batch=10)\nconv = Conversation(conn)\nw = conv.widget()\n"
        "sends = []\n_orig = w._send\n"
        "def _rec(msg, buffers=None):\n    kind = msg['content'].get('type') if msg['method'] == 'custom' else msg['method']\n    sends.append((time.time(), kind, len(json.dumps(msg))))\n    _orig(msg, buffers)\n"
        "w._send = _rec\nw",
        "t0 = time.time()\nawait conv.chat_to_completion('stream please')\nimport asyncio\nawait asyncio.sleep(0.3)\n"
        "json.dump({'t0': t0, 'sends': sends, 'last_delta': conn.sent_at['last_delta'], 'stats': w.stats},"
        " open('stream_result.json', 'w'))"],
    "xss.ipynb": [
        "from support.streams import StreamConnection\nfrom nbagent import Conversation\n"
        "payload = ['Look: <img src=x onerror=\"window.__pwned=1\"> and ', '<script>window.__pwned=1</script>',"
        " '\\n\\n', '<iframe src=\"javascript:window.__pwned=1\"></iframe>', ' and [a link](javascript:window.__pwned=1) end.',"
        " ' Math: $\\\\href{javascript:window.__pwned=1}{x}$ $<img src=x onerror=\"window.__pwned=1\">$']\n"
        "conv = Conversation(StreamConnection(payload, thinking=['<img src=x onerror=\"window.__pwned=1\">']))\n"
        "conv.widget()"],
    "errors.ipynb": [
        "from nbagent import Conversation, MockConnection, NbagentError\n"
        "from nbagent.core.steps import CompactionStats, Step, StepType, StepSource, StepTarget, StepStatus\n"
        "u = Step(step_index=0, type=StepType.TEXT_RESPONSE, source=StepSource.USER, target=StepTarget.UNSPECIFIED, status=StepStatus.DONE, content='hi')\n"
        "c = Step(step_index=1, type=StepType.COMPACTION, source=StepSource.SYSTEM, target=StepTarget.ENVIRONMENT, status=StepStatus.DONE,"
        " content='history compacted', compaction=CompactionStats(12000, 3000, 10000))\n"
        "m = Step(step_index=2, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL, target=StepTarget.USER, content='Partial answ', content_delta='Partial answ')\n"
        "err = NbagentError('rate limited: slow down', kind='rate_limit', http_code=429)\n"
        "conv = Conversation(MockConnection([[u, c, m, err]]))\nconv.widget()"],
    # ~16 s of streaming: the page reload (a few seconds, more on a loaded machine) lands mid-stream
    "midstream.ipynb": ["from support.streams import StreamConnection, words\nfrom nbagent import Conversation\n"
                        "conv = Conversation(StreamConnection(words(4_000), pace=0.02, batch=5))\nconv.widget()"],
    "reload.ipynb": [CALC + "agent = Agent(model='demo', tools=[calculator])\nagent",
                     "r = await agent.chat_to_completion('What is 3 + 4?')"],
    "math.ipynb": [
        "from support.streams import StreamConnection\nfrom nbagent import Conversation\n"
        "answer = [r'Euler: $e^{i\\pi}+1=0$, it costs $5 and $10.', '\\n\\n', r'$$\\int_0^1 x\\,dx = \\tfrac12$$', '\\n\\n',"
        " r'Code `$x$` stays code and \\(a<b\\) is math.', '\\n\\n', r'\\[ \\sum_{k=1}^n k \\]']\n"
        "conv = Conversation(StreamConnection(answer, thinking=['Let ', r'$a^2+b^2=c^2$', ' hold.']))\nconv.widget()"],
    # highlight.js is not in widget.js: these blocks show plain, then highlighted (static/grammars.js)
    "grammars.ipynb": [
        "from support.streams import StreamConnection\nfrom nbagent import Conversation\n"
        "answer = ['```sql\\nSELECT name', ' FROM users\\n```', '\\n\\n', '```yaml\\nkey: 1\\n```', '\\n\\nDone.']\n"
        "conv = Conversation(StreamConnection(answer))\nconv.widget()"],
    "failing.ipynb": [
        "from nbagent import Agent, NbagentError\nfrom nbagent.providers.base import TextDelta\n"
        "from support.scripted import ScriptedProvider\n"
        "err = NbagentError('[network openai] could not reach api.openai.com (after 3 attempts)', kind='network')\n"
        "agent = Agent(model=ScriptedProvider([[TextDelta('Partial '), err]]))\nagent"],
    "rich.ipynb": ["from support.streams import rich_agent\nagent = rich_agent()\nagent"],
    "restart.ipynb": [CALC + "agent = Agent(model='demo', tools=[calculator])\nagent"],
    "saved.ipynb": [CALC + "agent = Agent(model='demo', tools=[calculator], api_key='sk-SECRET-never-saved-123')\nagent"],
    "keys.ipynb": [CALC + "agent = Agent(model='demo', tools=[calculator])\nagent",
                   # busy until the test says so: never a race between a sleep and the widget's 8 s hint
                   "import pathlib, time\nwhile not pathlib.Path('release-busy-cell').exists():\n    time.sleep(0.05)",
                   # runs after the messages queued behind the busy cell: waits for the queued turn to end
                   "import asyncio\nwhile not agent.conversation.is_idle():\n    await asyncio.sleep(0.05)\n"
                   "print('turns:', agent.conversation.turn_count)"],
    "mathsaved.ipynb": [
        "from support.streams import StreamConnection\nfrom nbagent import Conversation\n"
        "answer = [r'Euler: $e^{i\\pi}+1=0$, it costs $5 and $10.', '\\n\\n', r'$$\\int_0^1 x\\,dx = \\tfrac12$$', '\\n\\n',"
        " r'So $x<y$ and \\(a<b\\) are math.', '\\n\\n', r'\\[ \\sum_{k=1}^n k \\]', '\\n\\n',"
        " 'Links: $\\\\href{java\\tscript:alert(1)}{bad}$ and $\\\\url{javascript:alert(2)}$.']\n"
        "conv = Conversation(StreamConnection(answer))\nconv.widget()"],
    "a11y.ipynb": [CALC + "agent = Agent(model='demo', tools=[calculator], policy='ask')\nagent"],
    "shutdown.ipynb": [CALC + "agent = Agent(model='demo', tools=[calculator])\nagent"],
    "midscroll.ipynb": ["from support.streams import StreamConnection, words\nfrom nbagent import Conversation\n"
                        "conv = Conversation(StreamConnection(words(20_000), pace=0.02, batch=3))\nconv.widget()"],
    "wheelrace.ipynb": ["from support.streams import StreamConnection, words\nfrom nbagent import Conversation\n"
                        "conv = Conversation(StreamConnection(words(20_000), pace=0.02, batch=3))\nconv.widget()"],
    "follow.ipynb": ["from nbagent import Agent\nagent = Agent(model='demo')\nagent"],
    "echo.ipynb": ["from nbagent import Agent\nfrom support.scripted import ScriptedProvider, text_call\n"
                   "agent = Agent(model=ScriptedProvider([text_call('Answered after the wait.')]))\nagent",
                   # busy until the test says so: the kernel reads the chat's messages only after it
                   "import pathlib, time\nwhile not pathlib.Path('release-echo-cell').exists():\n    time.sleep(0.05)"],
    "thoughts.ipynb": ["from nbagent import Agent\nagent = Agent(model='demo')\nagent"],
}


# --- processes (see support/jupyter.py) -----------------------------------------------------------

def run_cell(page, index):
    page.evaluate("""(i) => { const app = window.jupyterapp, nb = app.shell.currentWidget.content;
        nb.activeCellIndex = i; nb.deselectAll();
        window.__run = app.commands.execute('notebook:run-cell'); }""", index)


def wait_run(page, timeout_ms=60_000):
    ok = page.evaluate("""async (t) => await Promise.race([window.__run.then(() => true),
                                                          new Promise(r => setTimeout(() => r(false), t))])""", timeout_ms)
    assert ok, "cell did not finish executing"


def show_widget(page, nb):
    run_cell(page, 0)
    wait_run(page)
    page.wait_for_selector(f"{nb} .nba-chat")
    return f"{nb} .nba-chat"


def send_prompt(page, chat, text):
    page.fill(f"{chat} .nba-input", text)
    page.press(f"{chat} .nba-input", "Enter")


def wait_turn_done(page, chat, n, timeout=60_000):
    """Wait until the widget shows n finished turns (a footer each)."""
    page.wait_for_function("""([sel, n]) => { const c = document.querySelector(sel);
        return c && [...c.querySelectorAll('.nba-turn')].filter(t => !t.classList.contains('nba-running')).length >= n
          && !c.classList.contains('nba-is-running'); }""", arg=[chat, n], timeout=timeout, polling=50)


def text_of(page, selector):
    return page.evaluate("(s) => document.querySelector(s)?.textContent ?? ''", selector)


def no_errors(page):
    errs = [e for e in page.errors if "nba" in e or "nbagent" in e or "widget" in e.lower()]
    assert not errs, errs


def _shot(page, chat, name, tmp_path):
    target = Path(os.environ.get("NBAGENT_SHOTS", "")) if os.environ.get("NBAGENT_SHOTS") else None
    page.evaluate("(s) => document.querySelector(s).scrollIntoView({block: 'center'})", chat)
    page.wait_for_timeout(300)
    path = (ROOT / target / name) if target else tmp_path / name
    page.locator(chat).screenshot(path=str(path))
    return path


# --- tests ------------------------------------------------------------------------------------

def test_demo_turn_renders_thought_tool_card_and_markdown(lab, notebook, tmp_path):
    nb = notebook("demo.ipynb")
    chat = show_widget(lab, nb)
    assert lab.is_disabled(f"{chat} .nba-stop") and not lab.is_disabled(f"{chat} .nba-input")
    lab.fill(f"{chat} .nba-input", "line one")
    lab.press(f"{chat} .nba-input", "Shift+Enter")  # a new line, not a send
    assert lab.input_value(f"{chat} .nba-input") == "line one\n" and lab.locator(chat).locator(".nba-turn").count() == 0
    t0 = time.monotonic()
    send_prompt(lab, chat, "What is 12 * 7?")
    lab.wait_for_selector(f"{chat} .nba-input:disabled", timeout=10_000)  # disabled while it runs
    wait_turn_done(lab, chat, 1)
    TIMINGS["demo_turn_s"] = round(time.monotonic() - t0, 2)
    turn = f"{chat} .nba-turn >> nth=0"
    assert lab.inner_text(f"{turn} >> .nba-prompt") == "What is 12 * 7?"
    thinking = lab.locator(turn).locator(".nba-thinking").first
    assert not thinking.evaluate("d => d.open")  # collapsed when done
    assert re.search(r"Thought · \d+ tokens", thinking.locator("summary").inner_text())
    card = lab.locator(turn).locator(".nba-tool").first
    assert card.locator(".nba-tool-name").inner_text() == "calculator"
    assert card.get_attribute("data-status") == "done"
    assert '"expression": "12 * 7"' in card.locator(".nba-tool-args").inner_text()
    assert card.locator(".nba-tool-out").inner_text() == "84"
    assert lab.locator(turn).locator(".nba-md strong", has_text="84").count() == 1
    footer = lab.inner_text(f"{turn} >> .nba-footer")
    assert "in " in footer and "out " in footer and "TTFT" in footer and "tok/s" in footer
    # a code block from a plain answer: highlighted (once static/grammars.js is here), with a copy button
    send_prompt(lab, chat, "Hello there")
    wait_turn_done(lab, chat, 2)
    second = lab.locator(chat).locator(".nba-turn").nth(1)
    second.locator(".nba-code code.hljs:not(.nba-hl-pending)").first.wait_for()
    assert second.locator(".nba-code .hljs-keyword").count() >= 1
    assert second.locator(".nba-copy").count() == 1
    # a turn run from another cell streams into the displayed widget
    run_cell(lab, 1)
    wait_run(lab)
    wait_turn_done(lab, chat, 3)
    assert "Say hello from another cell" in lab.inner_text(f"{chat} .nba-turn >> nth=2 >> .nba-prompt")
    # its saved transcript is that cell's output (a headless run keeps it), hidden beside the live chat
    asked = lab.locator(f"{nb} .jp-Cell >> nth=1 >> .nbagent-transcript")
    asked.wait_for(state="attached")
    assert "Say hello from another cell" in asked.text_content() and not asked.is_visible()
    widget_cell = lab.locator(f"{nb} .jp-Cell >> nth=0 >> .nbagent-transcript").all_text_contents()
    assert widget_cell and not any("Say hello from another cell" in t for t in widget_cell)  # saved once
    lab.evaluate("() => document.activeElement && document.activeElement.blur()")
    lab.locator(chat).screenshot(path=str(tmp_path / "widget-all-turns.png"))
    # screenshots of the finished turn (its first thought opened), light and dark
    lab.evaluate("""(s) => { const c = document.querySelector(s);
        c.querySelectorAll('.nba-turn').forEach((t, i) => { if (i) t.style.display = 'none'; });
        c.querySelector('.nba-thinking').open = true; }""", chat)
    _shot(lab, chat, "widget-light.png", tmp_path)
    lab.evaluate("async () => { await window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'}); }")
    lab.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
    _shot(lab, chat, "widget-dark.png", tmp_path)
    lab.evaluate("async () => { await window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'}); }")
    lab.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'")
    lab.evaluate("(s) => document.querySelectorAll(s + ' .nba-turn').forEach(t => { t.style.display = ''; })", chat)
    no_errors(lab)


def test_approve_and_deny_drive_a_tool_call(lab, notebook):
    nb = notebook("approve.ipynb")
    chat = show_widget(lab, nb)
    send_prompt(lab, chat, "What is 6 * 7?")
    lab.wait_for_selector(f"{chat} .nba-tool[data-status='waiting'] .nba-approve")
    assert lab.is_enabled(f"{chat} .nba-stop")
    lab.click(f"{chat} .nba-tool[data-status='waiting'] .nba-approve")
    wait_turn_done(lab, chat, 1)
    first = lab.locator(chat).locator(".nba-turn").nth(0)
    assert first.locator(".nba-tool").get_attribute("data-status") == "done"
    assert first.locator(".nba-tool-out").inner_text() == "42"
    assert first.locator(".nba-md strong", has_text="42").count() == 1
    send_prompt(lab, chat, "What is 5 + 5?")
    lab.wait_for_selector(f"{chat} .nba-turn >> nth=1 >> .nba-tool[data-status='waiting'] .nba-deny")
    lab.click(f"{chat} .nba-turn >> nth=1 >> .nba-deny")
    wait_turn_done(lab, chat, 2)
    second = lab.locator(chat).locator(".nba-turn").nth(1)
    assert second.locator(".nba-tool").get_attribute("data-status") == "denied"
    assert "denied" in second.locator(".nba-tool-result").inner_text().lower()
    assert second.locator(".nba-tool-actions").is_hidden()
    no_errors(lab)


def test_stop_mid_stream_keeps_partial_text(lab, notebook):
    nb = notebook("stop.ipynb")
    chat = show_widget(lab, nb)
    send_prompt(lab, chat, "Write a lot")
    lab.wait_for_function("(s) => (document.querySelector(s + ' .nba-md')?.textContent || '').includes('w00030')",
                          arg=chat, polling=50)
    assert lab.locator(chat).locator(".nba-thinking").first.evaluate("d => d.open") is False
    lab.click(f"{chat} .nba-stop")
    wait_turn_done(lab, chat, 1, timeout=20_000)
    partial = text_of(lab, f"{chat} .nba-md")
    assert "w00030" in partial and "w19999" not in partial
    assert lab.locator(chat).locator(".nba-stopped").count() == 1
    assert lab.locator(chat).locator(".nba-stopped svg").count() == 1  # a drawn mark, not a font glyph
    footer = lab.inner_text(f"{chat} .nba-footer")
    assert "stopped" in footer and "tokens not reported" in footer and "in 0" not in footer
    assert lab.is_enabled(f"{chat} .nba-input")  # ready for the next prompt
    lab.wait_for_timeout(300)
    assert text_of(lab, f"{chat} .nba-md") == partial  # nothing arrives after the stop
    no_errors(lab)


def test_twenty_thousand_token_stream_complete_in_order_rate_limited(lab, notebook, jupyter_server):
    nb = notebook("stream.ipynb")
    chat = show_widget(lab, nb)
    lab.evaluate("""(s) => { window.nbagentDebug = {}; window.__lastSeen = null;
        const el = document.querySelector(s);
        const poll = () => { const md = el.querySelector('.nba-md');
          if (md && md.textContent.includes('w19999')) { window.__lastSeen = performance.timeOrigin + performance.now(); return; }
          requestAnimationFrame(poll); };
        requestAnimationFrame(poll); }""", chat)
    run_cell(lab, 1)
    wait_run(lab, 120_000)
    wait_turn_done(lab, chat, 1)
    res = json.loads((jupyter_server["root"] / "stream_result.json").read_text())
    expected = " ".join("".join(words(20_000)).split())
    shown = " ".join(text_of(lab, f"{chat} .nba-md").split())
    assert shown == expected  # complete and in order
    sends = res["sends"]
    stamps = [t for t, _, _ in sends]
    per_s = max(sum(1 for s in stamps if t <= s < t + 1.0) for t in stamps)
    trace = lab.evaluate("() => window.nbagentDebug.deltas")  # the widget's documented debug switch
    b_stamps = [t / 1000 for t, _ in trace]
    b_per_s = max(sum(1 for s in b_stamps if t <= s < t + 1.0) for t in b_stamps)
    last_seen = lab.evaluate("() => window.__lastSeen") / 1000
    custom_sends = [t for t, m, _ in sends if m == "deltas"]
    lat = sorted((b - k) * 1000 for b, k in zip(b_stamps, custom_sends))
    gen_s = res["last_delta"] - res["t0"]
    TIMINGS.update(stream_tokens=20_000, stream_gen_s=round(gen_s, 2), stream_msgs=len(sends),
                   stream_bytes=sum(n for _, _, n in sends), stream_text_bytes=len("".join(words(20_000))),
                   kernel_max_msgs_per_s=per_s, browser_delta_msgs=len(trace), browser_max_msgs_per_s=b_per_s,
                   msg_latency_p50_ms=round(lat[len(lat) // 2], 1), msg_latency_p95_ms=round(lat[int(0.95 * (len(lat) - 1))], 1),
                   msg_latency_max_ms=round(lat[-1], 1),
                   last_token_latency_ms=round((last_seen - res["last_delta"]) * 1000, 1))
    # the kernel's side is the widget's doing; how the browser bunches arrivals, and how long the last
    # token takes to show (rendering a 20,000-token answer on a loaded machine), depend on the machine's
    # load, so they are recorded (TIMINGS, bench/bench_widget.py) rather than asserted
    assert per_s <= 30
    assert len(trace) == sum(1 for _, m, _ in sends if m == "deltas")
    no_errors(lab)


def test_model_output_html_runs_nothing_and_shows_as_text(lab, notebook):
    nb = notebook("xss.ipynb")
    lab.evaluate("() => { delete window.__pwned; }")
    chat = show_widget(lab, nb)
    send_prompt(lab, chat, "<img src=x onerror=\"window.__pwned=1\"> show me")
    wait_turn_done(lab, chat, 1)
    lab.wait_for_timeout(500)
    assert lab.evaluate("() => window.__pwned") is None
    md = text_of(lab, f"{chat} .nba-md")
    assert '<img src=x onerror="window.__pwned=1">' in md and "<script>window.__pwned=1</script>" in md
    assert '<iframe src="javascript:window.__pwned=1"></iframe>' in md
    assert lab.locator(chat).locator("img, script, iframe").count() == 0
    assert lab.locator(chat).locator("a[href^='javascript']").count() == 0
    assert '<img src=x onerror="window.__pwned=1">' in text_of(lab, f"{chat} .nba-prompt")
    lab.locator(chat).locator(".nba-thinking summary").click()
    assert '<img src=x onerror="window.__pwned=1">' in text_of(lab, f"{chat} .nba-thinking-body")
    lab.locator(chat).locator(".nba-md", has_text="a link").click()
    assert lab.evaluate("() => window.__pwned") is None
    no_errors(lab)


def test_error_card_with_http_code_and_compaction_marker(lab, notebook):
    nb = notebook("errors.ipynb")
    chat = show_widget(lab, nb)
    send_prompt(lab, chat, "hi")
    wait_turn_done(lab, chat, 1)
    card = lab.locator(chat).locator(".nba-error")
    assert card.count() == 1
    assert card.locator(".nba-error-title").inner_text() == "Error · HTTP 429"
    assert "rate limited: slow down" in card.inner_text()
    assert "History compacted · 12,000 → 3,000 tokens" in lab.inner_text(f"{chat} .nba-compaction")
    assert "Partial answ" in text_of(lab, f"{chat} .nba-md")  # partial text kept
    assert lab.locator(chat).locator(".nba-step.nba-active").count() == 0
    assert lab.is_enabled(f"{chat} .nba-input")
    no_errors(lab)


def test_a_failed_model_call_shows_one_error_card(lab, notebook):
    """The model step, the turn's FINISH and its record all carry the error: it is shown once."""
    nb = notebook("failing.ipynb")
    chat = show_widget(lab, nb)
    send_prompt(lab, chat, "hi")
    wait_turn_done(lab, chat, 1)
    assert lab.locator(chat).locator(".nba-error").count() == 1
    assert text_of(lab, chat).count("could not reach api.openai.com") == 1
    assert "Partial" in text_of(lab, f"{chat} .nba-md")
    assert "in 0" not in lab.inner_text(f"{chat} .nba-footer")
    no_errors(lab)


def test_reloading_the_page_rebuilds_the_transcript(lab, notebook, jupyter_server):
    nb = notebook("reload.ipynb")
    chat = show_widget(lab, nb)
    run_cell(lab, 1)
    wait_run(lab)
    wait_turn_done(lab, chat, 1)
    before = text_of(lab, f"{chat} .nba-turns")
    lab.evaluate("async () => { await window.jupyterapp.shell.currentWidget.context.save(); }")
    chat = _reload_and_open(lab, "reload.ipynb")
    lab.wait_for_selector(f"{chat} .nba-turn .nba-footer")
    after = text_of(lab, f"{chat} .nba-turns")
    assert after == before and "7" in after and "calculator" in after
    # the reloaded view is live: a new turn streams into it
    send_prompt(lab, chat, "What is 1 + 1?")
    wait_turn_done(lab, chat, 2)
    assert lab.locator(chat).locator(".nba-tool-out").nth(1).inner_text() == "2"
    no_errors(lab)


def _reload_and_open(page, path):
    page.add_init_script("globalThis.nbagentDebug = {}")  # the widget's debug switch, on from the start
    return reload_and_open(page, path) + " .nba-chat"


def test_reloading_mid_stream_catches_up(lab, notebook):
    """The reloaded view starts from the widget's whole state (every turn with its text so far,
    widget.py get_state; a view that still misses text asks for a resync), the deltas continue
    from there, and it ends with the complete text."""
    nb = notebook("midstream.ipynb")
    chat = show_widget(lab, nb)
    send_prompt(lab, chat, "stream")
    lab.wait_for_function("(s) => (document.querySelector(s + ' .nba-md')?.textContent || '').includes('w00300')",
                          arg=chat, polling=50)
    lab.evaluate("async () => { await window.jupyterapp.shell.currentWidget.context.save(); }")
    chat = _reload_and_open(lab, "midstream.ipynb")
    lab.wait_for_selector(f"{chat} .nba-turn")
    assert lab.locator(chat).locator(".nba-turn.nba-running").count() == 1  # still streaming
    wait_turn_done(lab, chat, 1, timeout=60_000)
    expected = " ".join("".join(words(4_000)).split())
    assert " ".join(text_of(lab, f"{chat} .nba-md").split()) == expected
    no_errors(lab)


def test_math_renders_as_mathml_without_fetching_anything(lab, notebook, tmp_path):
    nb = notebook("math.ipynb")
    chat = show_widget(lab, nb)
    requests = []
    record = lambda r: requests.append(r.url)  # noqa: E731
    lab.on("request", record)
    send_prompt(lab, chat, "Some math please")
    wait_turn_done(lab, chat, 1)
    lab.wait_for_function("(s) => document.querySelectorAll(s + ' .nba-md math').length >= 4", arg=chat, polling=50)
    md = lab.locator(chat).locator(".nba-md")
    assert md.locator("math[display='block']").count() == 2  # $$...$$ and \[...\]
    assert "costs $5 and $10." in md.inner_text()  # money is not math
    code = md.locator("code", has_text="$x$")
    assert code.count() == 1 and code.locator("math").count() == 0  # code is never math
    first = md.locator("math").first.text_content()  # MathML elements have no innerText
    assert "e" in first and "π" in first
    thinking = lab.locator(chat).locator(".nba-thinking").first
    thinking.locator("summary").click()
    assert thinking.locator("math").count() == 1 and "hold." in thinking.inner_text()
    _shot(lab, chat, "widget-math.png", tmp_path)
    lab.wait_for_timeout(300)
    lab.remove_listener("request", record)
    fetched = [u for u in requests if not u.startswith(("http://127.0.0.1", "blob:", "data:"))
               or u.endswith((".woff", ".woff2", ".ttf", ".otf"))]
    assert not fetched, fetched  # no remote fetch, no font download
    no_errors(lab)


def check_rich_turn(page, chat):
    """A DataFrame and a figure in their tool cards, math in the answer, every XSS payload inert."""
    page.evaluate("() => { delete window.__pwned; }")
    page.fill(f"{chat} .nba-input", "Show me prices and a chart")
    page.press(f"{chat} .nba-input", "Enter")
    page.wait_for_function("""(s) => { const c = document.querySelector(s);
        return c && c.querySelector('.nba-turn:not(.nba-running) .nba-footer') && !c.classList.contains('nba-is-running')
          && c.querySelectorAll('.nba-md math').length >= 2; }""", arg=chat, polling=50)
    table = page.locator(chat).locator(".nba-tool[data-call-id='c1'] .nba-tool-table table")
    assert table.count() == 1 and "price" in table.locator("th").all_inner_texts()
    assert "tea" in table.inner_text() and '<img src=x onerror="window.__pwned=1">' in table.inner_text()
    img = page.locator(chat).locator(".nba-tool[data-call-id='c2'] img.nba-tool-image")
    assert img.count() == 1
    page.wait_for_function("(s) => document.querySelector(s + ' img.nba-tool-image').naturalWidth > 100", arg=chat, polling=50)
    assert img.get_attribute("src").startswith("data:image/png;base64,")
    text = page.locator(chat).locator(".nba-tool[data-call-id='c1'] .nba-tool-text")
    assert "DataFrame: 2 rows x 2 columns" in text.text_content()  # what the model got, folded away
    assert page.locator(chat).locator(".nba-md math[display='block']").count() == 1
    page.wait_for_timeout(300)
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator(chat).locator(".nba-md img, script, iframe, a[href^='javascript']").count() == 0
    assert page.locator(chat).locator("img").count() == 1  # the chart, nothing else
    assert "<script>window.__pwned=1</script>" in page.locator(chat).locator(".nba-md").inner_text()


def test_rich_tool_results_math_and_xss_in_one_turn(lab, notebook, tmp_path):
    nb = notebook("rich.ipynb")
    chat = show_widget(lab, nb)
    check_rich_turn(lab, chat)
    _shot(lab, chat, "widget-rich.png", tmp_path)
    no_errors(lab)


def _kernel_restart(page):
    page.evaluate("""async () => { const w = window.jupyterapp.shell.currentWidget;
        await w.sessionContext.session.kernel.restart(); }""")
    page.wait_for_function("""() => window.jupyterapp.shell.currentWidget.sessionContext.session?.kernel?.status === 'idle'""",
                           polling=50)


def test_kernel_restart_says_rerun_and_locks_nothing(lab, notebook):
    nb = notebook("restart.ipynb")
    chat = show_widget(lab, nb)
    send_prompt(lab, chat, "What is 2 + 3?")
    wait_turn_done(lab, chat, 1)
    answer = text_of(lab, f"{chat} .nba-turns")
    _kernel_restart(lab)
    lab.wait_for_function("(s) => document.querySelector(s + ' .nba-notice')?.textContent.includes('re-run this cell')",
                          arg=chat, polling=50)
    assert "Kernel restarted" in lab.inner_text(f"{chat} .nba-notice")
    assert text_of(lab, f"{chat} .nba-turns") == answer  # the transcript stays readable
    send_prompt(lab, chat, "Are you there?")
    lab.wait_for_timeout(500)
    assert lab.locator(chat).locator(".nba-turn").count() == 1  # nothing was sent, nothing hangs
    assert "re-run this cell" in text_of(lab, f"{chat} .nba-hint")
    assert not lab.locator(chat).evaluate("c => c.classList.contains('nba-is-running')")
    assert lab.is_enabled(f"{chat} .nba-input") and lab.is_enabled(f"{chat} .nba-send")
    assert lab.input_value(f"{chat} .nba-input") == "Are you there?"  # the draft is kept
    # re-running the cell gives a live widget again (a new one, in the new kernel)
    run_cell(lab, 0)
    wait_run(lab)
    lab.wait_for_function("(s) => { const c = document.querySelector(s); return c && !c.classList.contains('nba-dead'); }",
                          arg=chat, polling=50)
    send_prompt(lab, chat, "What is 1 + 1?")
    wait_turn_done(lab, chat, 1)
    assert lab.locator(chat).locator(".nba-tool-out").first.inner_text() == "2"
    no_errors(lab)


def _transcript_kept(page, outputs: int) -> None:
    """Wait until the current notebook's model holds ``outputs`` transcript outputs (the head, then one a
    finished turn): the kernel sends a turn's transcript beside the turn's end, and a save made before
    it lands would miss it (a fixed pause was a guess at how long that takes)."""
    page.wait_for_function("""(n) => { const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
        let k = 0; for (let i = 0; i < cells.length; i++) for (const o of (cells.get(i).outputs?.toJSON() || []))
          if ([].concat((o.data || {})['text/markdown'] || []).join('').includes('nbagent-transcript')) k++;
        return k >= n; }""", arg=outputs, polling=50, timeout=30_000)


def _transcript_outputs(page, nb):
    """The visible transcript outputs (the fallback shown beside the widget) in the notebook."""
    return page.evaluate("""(nb) => [...document.querySelectorAll(nb + ' .nbagent-transcript')]
        .filter(e => e.offsetParent !== null).map(e => e.innerText)""", nb)


def test_saved_notebook_shows_the_conversation_without_its_kernel(lab, notebook, jupyter_server, tmp_path):
    nb = notebook("saved.ipynb")
    chat = show_widget(lab, nb)
    assert _transcript_outputs(lab, nb) == []  # hidden next to the live chat
    send_prompt(lab, chat, "What is 12 * 7?")
    wait_turn_done(lab, chat, 1)
    send_prompt(lab, chat, "Hello there")
    wait_turn_done(lab, chat, 2)
    _transcript_kept(lab, 3)  # the head and the two turns
    lab.evaluate("async () => { await window.jupyterapp.shell.currentWidget.context.save(); }")
    saved = json.loads((jupyter_server["root"] / "saved.ipynb").read_text())
    outputs = saved["cells"][0]["outputs"]
    md = "".join("".join(o["data"]["text/markdown"]) for o in outputs if "text/markdown" in o.get("data", {}))
    assert "What is 12 * 7?" in md and "84" in md and "Hello there" in md
    assert len([o for o in outputs if "nbagent-transcript" in "".join(o.get("data", {}).get("text/markdown", ""))]) == 3
    assert "sk-SECRET" not in json.dumps(outputs)
    # close it, its kernel gone; reopen it (a fresh kernel, no cell run): the transcript alone shows,
    # the widget's output finds the blank model the widget saved instead of a "model not found" box
    lab.evaluate("""async () => { const w = window.jupyterapp.shell.currentWidget;
        await w.sessionContext.shutdown(); w.dispose(); }""")
    nb = notebook("saved.ipynb")
    lab.wait_for_selector(f"{nb} .nbagent-transcript")
    lab.wait_for_function("""(nb) => { const a = document.querySelectorAll(nb + ' .jp-Cell')[0].querySelector('.jp-OutputArea');
        return !a.textContent.includes('Loading widget')
          && (a.textContent.includes('Error displaying') || !!a.querySelector('.jp-OutputArea-output > .lm-Widget')); }""",
                          arg=nb, polling=100)
    shown = _transcript_outputs(lab, nb)  # the head, then one output per turn, in order
    assert len(shown) == 3 and "saved transcript" in shown[0]
    assert "What is 12 * 7?" in shown[1] and "84" in shown[1] and "Hello there" in shown[2]
    outputs_text = lab.inner_text(f"{nb} .jp-Cell >> nth=0 >> .jp-OutputArea")
    assert "Error displaying widget" not in outputs_text and "model not found" not in outputs_text
    assert "[1]:" not in outputs_text and "nbagent chat widget" not in outputs_text  # no prompt, no stray line
    _shot(lab, f"{nb} .jp-Cell", "saved-reopened.png", tmp_path)
    widgets_md = json.loads((jupyter_server["root"] / "saved.ipynb").read_text())["metadata"]["widgets"]
    assert len(json.dumps(widgets_md)) < 1000 and "sk-SECRET" not in json.dumps(widgets_md)  # a stub, not the chat
    # nbconvert (as nbviewer does) shows the transcript only
    import subprocess, sys
    out = subprocess.run([str(Path(sys.executable).with_name("jupyter")), "nbconvert", "--to", "html", "--stdout",
                          str(jupyter_server["root"] / "saved.ipynb")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Hello there" in out.stdout and "What is 12 * 7?" in out.stdout
    assert "nbagent chat widget" not in out.stdout and "Out[1]" not in out.stdout
    no_errors(lab)


def test_sql_and_yaml_blocks_are_highlighted_once_the_grammars_arrive(lab, notebook):
    nb = notebook("grammars.ipynb")
    chat = show_widget(lab, nb)
    send_prompt(lab, chat, "Some SQL please")
    wait_turn_done(lab, chat, 1)
    lab.wait_for_function("(s) => document.querySelectorAll(s + ' .nba-md code.hljs .hljs-keyword').length >= 2"
                          " && !document.querySelector(s + ' .nba-md .nba-hl-pending')", arg=chat, polling=50)
    md = lab.locator(chat).locator(".nba-md")
    sql = md.locator("code.language-sql")
    assert sql.count() == 1 and sql.inner_text().strip() == "SELECT name FROM users"  # once, text intact
    assert sql.locator(".hljs-keyword", has_text="SELECT").count() == 1
    assert md.locator("code.language-yaml .hljs-attr").count() == 1
    assert "Done." in md.inner_text()
    no_errors(lab)


def test_math_in_the_reopened_notebook_is_the_widgets_math(lab, notebook, jupyter_server):
    """The saved transcript, rendered by JupyterLab's MathJax: the same formulas as the live widget,
    no error for "<", money as money."""
    nb = notebook("mathsaved.ipynb")
    chat = show_widget(lab, nb)
    send_prompt(lab, chat, "Some math please")
    wait_turn_done(lab, chat, 1)
    _transcript_kept(lab, 2)  # the head and the turn
    lab.evaluate("async () => { await window.jupyterapp.shell.currentWidget.context.save(); }")
    lab.evaluate("""async () => { const w = window.jupyterapp.shell.currentWidget;
        await w.sessionContext.shutdown(); w.dispose(); }""")
    nb = notebook("mathsaved.ipynb")
    lab.wait_for_function("(nb) => document.querySelectorAll(nb + ' .nbagent-transcript mjx-container').length >= 7",
                          arg=nb, polling=100)
    md = lab.locator(nb).locator(".nbagent-transcript").last  # the turn's output (the head comes first)
    assert md.locator("mjx-container").count() == 7  # e^{iπ}, ∫, x<y, a<b, ∑, two disarmed links: nothing else
    # a model's \href / \url to javascript: is never a link under MathJax (only http(s), mailto, #name)
    hrefs = lab.evaluate("(nb) => [...document.querySelectorAll(nb + ' .nbagent-transcript a')]"
                         ".map(a => a.getAttribute('href') || '')", nb)
    assert not [h for h in hrefs if not h.startswith(("http://", "https://", "mailto:", "#"))], hrefs
    assert md.locator("mjx-container[display='true']").count() == 2
    assert md.locator("mjx-merror").count() == 0 and "&lt;" not in md.inner_text()
    assert "it costs $5 and $10." in md.inner_text()
    no_errors(lab)


def test_keys_other_than_enter_shift_enter_escape_reach_the_notebook(lab, notebook, jupyter_server):
    nb = notebook("keys.ipynb")
    chat = show_widget(lab, nb)
    cells = lambda: lab.locator(nb).locator(".jp-Cell").count()  # noqa: E731
    n = cells()
    lab.click(f"{chat} .nba-input")
    lab.keyboard.type("abd")  # letters are text here, not "insert cell above/below", "delete cell"
    lab.keyboard.press("d")
    assert lab.input_value(f"{chat} .nba-input") == "abdd" and cells() == n
    assert lab.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty")
    lab.keyboard.press("Control+s")  # the notebook saves, from the chat box
    lab.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", polling=50)
    assert lab.input_value(f"{chat} .nba-input") == "abdd"
    lab.keyboard.press("Shift+Enter")  # a new line in the box, no cell run
    assert lab.input_value(f"{chat} .nba-input") == "abdd\n" and cells() == n
    lab.fill(f"{chat} .nba-input", "")
    lab.press(f"{chat} .nba-input", "Enter")  # an empty prompt says why nothing happened
    assert "empty" in text_of(lab, f"{chat} .nba-hint") or "type a message" in text_of(lab, f"{chat} .nba-hint")
    send_prompt(lab, chat, "What is 2 * 4?")
    wait_turn_done(lab, chat, 1)
    assert lab.evaluate("(s) => document.activeElement === document.querySelector(s + ' .nba-input')", chat)
    lab.keyboard.press("Escape")  # leaves the box for the notebook
    assert not lab.evaluate("(s) => document.querySelector(s).contains(document.activeElement)", chat)
    lab.evaluate("() => { window.jupyterapp.shell.currentWidget.context.model.dirty = true; }")
    lab.keyboard.press("Control+s")
    lab.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", polling=50)
    no_errors(lab)


def chat_beside_busy_cell(lab, notebook, jupyter_server, name: str, release: str) -> tuple[str, str, Path]:
    """Open notebook ``name``, show its chat, run its second cell (it waits until the file ``release``
    appears in the server's root) and wait for the kernel to be busy: (notebook, chat, release file)."""
    release_file = jupyter_server["root"] / release
    release_file.unlink(missing_ok=True)
    nb = notebook(name)
    chat = show_widget(lab, nb)
    run_cell(lab, 1)
    lab.wait_for_function("() => window.jupyterapp.shell.currentWidget.sessionContext.session?.kernel?.status === 'busy'",
                          polling=50)
    return nb, chat, release_file


def test_a_busy_kernel_locks_nothing_and_long_prompts_collapse(lab, notebook, jupyter_server):
    # Two races made this test flaky under load, both in the test: (1) the busy cell slept 12 s,
    # and the widget's "no answer" hint comes 8 s after a send, so a send that started more than
    # ~4 s into the sleep (a loaded machine) never saw the hint; (2) after the cell ended, the
    # queued prompt and the queued Stop reach the kernel together: the prompt's turn is dropped
    # or runs and is stopped (asyncio decides), and "not running" held at once (Stop had unlocked
    # the view), so the long prompt could be sent while that turn ran (refused) and the turn count
    # expected after it (2) was 1 when the queued turn had been dropped. Now the busy cell waits
    # for the test, and a probe cell, queued behind those messages, waits for the turn to end and
    # says how many turns there are.
    # a prompt sent while a cell keeps the kernel busy: the widget says so and Stop gives the box back
    nb, chat, release = chat_beside_busy_cell(lab, notebook, jupyter_server, "keys.ipynb", "release-busy-cell")
    send_prompt(lab, chat, "What is 3 * 3?")
    lab.wait_for_function("(s) => document.querySelector(s + ' .nba-hint').textContent.includes('No answer from the kernel')",
                          arg=chat, polling=100, timeout=20_000)
    assert lab.is_enabled(f"{chat} .nba-stop")
    lab.click(f"{chat} .nba-stop")
    assert lab.is_enabled(f"{chat} .nba-input") and lab.is_enabled(f"{chat} .nba-send")
    release.write_text("")
    wait_run(lab)  # the cell ends; the kernel then takes the queued prompt and the queued Stop
    run_cell(lab, 2)
    wait_run(lab)
    probe = lab.locator(nb).locator(".jp-Cell").nth(2).locator(".jp-OutputArea-output").inner_text()
    turns = int(re.search(r"turns: (\d+)", probe).group(1))
    assert turns in (0, 1)  # dropped before it began, or begun and stopped / finished
    lab.wait_for_function("(s) => !document.querySelector(s).classList.contains('nba-is-running')", arg=chat, polling=50)
    # a long prompt is shown collapsed, with "Show all"
    long = "\n".join(f"line {i}: " + "x" * 60 for i in range(50))
    send_prompt(lab, chat, long)
    lab.wait_for_function("(s) => document.querySelector(s).querySelectorAll('.nba-prompt.nba-collapsed').length === 1",
                          arg=chat, polling=50)
    wait_turn_done(lab, chat, turns + 1)
    prompt = lab.locator(chat).locator(".nba-prompt.nba-long")
    assert prompt.evaluate("p => p.getBoundingClientRect().height") < 300
    more = prompt.locator(".nba-more")
    assert more.inner_text() == f"Show all ({len(long):,} characters)"
    more.click()
    assert "nba-collapsed" not in prompt.get_attribute("class") and more.inner_text() == "Show less"
    assert prompt.evaluate("p => p.getBoundingClientRect().height") > 600
    no_errors(lab)


def test_the_prompt_shows_at_once_before_the_kernel_answers(lab, notebook, jupyter_server):
    """The view shows the prompt it sends (and Stop) itself: with the kernel busy in another cell, so
    that it reads nothing yet, the prompt is there; the kernel's turn then takes its place, shown once."""
    _, chat, release = chat_beside_busy_cell(lab, notebook, jupyter_server, "echo.ipynb", "release-echo-cell")
    send_prompt(lab, chat, "Shown before any answer")
    lab.wait_for_selector(f"{chat} .nba-echo .nba-prompt-text")
    assert text_of(lab, f"{chat} .nba-echo .nba-prompt-text") == "Shown before any answer"
    assert lab.is_enabled(f"{chat} .nba-stop") and lab.is_disabled(f"{chat} .nba-input")
    assert lab.locator(chat).locator(".nba-turn").count() == 1 and lab.locator(chat).locator(".nba-empty").is_hidden()
    release.write_text("")
    wait_run(lab)
    wait_turn_done(lab, chat, 1)
    assert lab.locator(chat).locator(".nba-prompt-text").all_text_contents() == ["Shown before any answer"]
    assert lab.locator(chat).locator(".nba-echo").count() == 0
    assert "Answered after the wait." in text_of(lab, f"{chat} .nba-turn")
    no_errors(lab)


IN_VIEW = """([chat, sel]) => { const list = document.querySelector(chat + ' .nba-turns');
    const el = list.querySelectorAll(sel); const last = el[el.length - 1];
    const a = list.getBoundingClientRect(), b = last.getBoundingClientRect();
    return b.top >= a.top - 1 && b.bottom <= a.bottom + 1; }"""


def _in_view(page, chat, selector):
    """Whether the element ``selector`` (inside the chat) lies within the transcript's visible area."""
    return page.evaluate(IN_VIEW, [chat, selector])


def _comes_into_view(page, chat, selector, what: str) -> None:
    """Wait until ``selector`` lies within the transcript's visible area (the scroll follows the last render
    by a frame or more: on a loaded machine, more than a fixed pause); fail saying ``what`` if it never does."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(IN_VIEW, arg=[chat, selector], polling=50, timeout=10_000)
    except PlaywrightTimeout:
        raise AssertionError(what) from None


def test_the_transcript_follows_the_stream_turn_after_turn(lab, notebook, tmp_path):
    """Prompts sent with Enter, no mouse: each answer lands in view (it stopped following after two)."""
    nb = notebook("follow.ipynb")
    chat = show_widget(lab, nb)
    for i in range(6):
        send_prompt(lab, chat, f"Tell me about topic number {i}")
        wait_turn_done(lab, chat, i + 1)
        _comes_into_view(lab, chat, ".nba-turn:last-child .nba-footer", f"turn {i + 1}'s end is out of view")
    assert lab.locator(chat).locator(".nba-new").is_hidden()  # following: no "new messages" button
    _shot(lab, chat, "widget-follow.png", tmp_path)
    # the user scrolls up: a "new messages" button appears and brings the view back down
    lab.locator(f"{chat} .nba-turns").hover()
    lab.mouse.wheel(0, -400)
    lab.wait_for_function("(s) => document.querySelector(s + ' .nba-turns').scrollTop > 0", arg=chat, polling=50)
    lab.wait_for_selector(f"{chat} .nba-new", state="visible")
    assert not _in_view(lab, chat, ".nba-turn:last-child .nba-footer")
    _shot(lab, chat, "widget-scrolled-up.png", tmp_path)
    lab.click(f"{chat} .nba-new")
    _comes_into_view(lab, chat, ".nba-turn:last-child .nba-footer", "the new-messages button did not scroll down")
    assert lab.locator(chat).locator(".nba-new").is_hidden()
    no_errors(lab)


def test_a_scroll_up_mid_stream_is_respected_until_the_button(lab, notebook):
    """The user scrolls up while an answer streams: the view stays where they put it while text
    keeps arriving; "↓ new messages" brings it back and following resumes."""
    nb = notebook("midscroll.ipynb")
    chat = show_widget(lab, nb)
    send_prompt(lab, chat, "Write a lot")
    has = "([s, w]) => (document.querySelector(s + ' .nba-md')?.textContent || '').includes(w)"
    lab.wait_for_function(has, arg=[chat, "w00600"], polling=50)
    gap = "(s) => { const l = document.querySelector(s + ' .nba-turns'); return l.scrollHeight - l.scrollTop - l.clientHeight; }"
    assert lab.evaluate(gap, chat) < 40  # following
    lab.locator(f"{chat} .nba-turns").hover()
    lab.mouse.wheel(0, -300)
    lab.wait_for_function(f"(s) => ({gap})(s) > 200", arg=chat, polling=50)
    top = lab.evaluate("(s) => document.querySelector(s + ' .nba-turns').scrollTop", chat)
    lab.wait_for_function(has, arg=[chat, "w00900"], polling=50)  # more text arrived meanwhile
    assert lab.evaluate("(s) => document.querySelector(s + ' .nba-turns').scrollTop", chat) == top
    lab.wait_for_selector(f"{chat} .nba-new", state="visible")
    assert lab.inner_text(f"{chat} .nba-new") == "↓ new messages"
    lab.click(f"{chat} .nba-new")
    lab.wait_for_function(has, arg=[chat, "w01200"], polling=50)
    lab.wait_for_function(f"(s) => ({gap})(s) < 40", arg=chat, polling=50)  # following again
    assert lab.locator(chat).locator(".nba-new").is_hidden()
    lab.click(f"{chat} .nba-stop")
    wait_turn_done(lab, chat, 1, timeout=20_000)
    no_errors(lab)


def test_a_wheel_up_while_the_follow_scroll_is_pending_stops_following(lab, notebook):
    """A wheel up that comes between the follow's own scroll to the end and that scroll's event
    (queued to the next frame) stops following: the stale event does not pull the view back."""
    nb = notebook("wheelrace.ipynb")
    chat = show_widget(lab, nb)
    send_prompt(lab, chat, "Write a lot")
    has = "([s, w]) => (document.querySelector(s + ' .nba-md')?.textContent || '').includes(w)"
    lab.wait_for_function(has, arg=[chat, "w00600"], polling=50)
    lab.evaluate("""async (s) => { const l = document.querySelector(s + ' .nba-turns');
        const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
        l.scrollTop = l.scrollHeight - l.clientHeight - 10; await frame(); await frame();  // near the end: following
        l.scrollTop = l.scrollHeight;  // a scroll to the end; its scroll event waits for the next frame
        l.dispatchEvent(new WheelEvent('wheel', { deltaY: -300, bubbles: true }));  // the user's wheel comes first
        await frame();
        l.scrollTop -= 300; await frame(); }""", chat)  # then the wheel's scroll lands
    gap = "(s) => { const l = document.querySelector(s + ' .nba-turns'); return l.scrollHeight - l.scrollTop - l.clientHeight; }"
    top = lab.evaluate("(s) => document.querySelector(s + ' .nba-turns').scrollTop", chat)
    lab.wait_for_function(has, arg=[chat, "w00900"], polling=50)  # more text arrived meanwhile
    assert lab.evaluate("(s) => document.querySelector(s + ' .nba-turns').scrollTop", chat) == top
    assert lab.evaluate(gap, chat) > 200
    lab.wait_for_selector(f"{chat} .nba-new", state="visible")
    lab.click(f"{chat} .nba-stop")
    wait_turn_done(lab, chat, 1, timeout=20_000)
    no_errors(lab)


def test_each_turn_shows_only_its_own_thought(lab, notebook):
    """Prompts from the widget's box: no turn gains a block with the next turn's thought."""
    nb = notebook("thoughts.ipynb")
    chat = show_widget(lab, nb)
    prompts = ["First question here", "Second question here", "Third question here"]
    for i, p in enumerate(prompts):
        send_prompt(lab, chat, p)
        wait_turn_done(lab, chat, i + 1)
    thoughts = lab.evaluate("""(s) => [...document.querySelectorAll(s + ' .nba-turn')].map(t =>
        [...t.querySelectorAll('.nba-thinking')].map(d => d.querySelector('.nba-thinking-body').textContent))""", chat)
    assert len(thoughts) == 3
    for p, blocks in zip(prompts, thoughts):
        assert len(blocks) == 1, blocks
        assert blocks[0].startswith(f"The user asked: \u201c{p}"), blocks
    no_errors(lab)


CONTRAST_JS = """([sel]) => {
    const cv = document.createElement('canvas').getContext('2d', { willReadFrequently: true });
    const rgba = (c) => { cv.clearRect(0, 0, 1, 1); cv.fillStyle = '#000'; cv.fillStyle = c; cv.fillRect(0, 0, 1, 1);
        const d = cv.getImageData(0, 0, 1, 1).data; return [d[0], d[1], d[2], d[3] / 255]; };
    const bgOf = (el) => { for (let e = el; e; e = e.parentElement) { const c = rgba(getComputedStyle(e).backgroundColor);
        if (getComputedStyle(e).backgroundColor !== 'rgba(0, 0, 0, 0)' && c[3] > 0.5) return c; } return [255, 255, 255, 1]; };
    const lum = ([r, g, b]) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
        return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
    const el = document.querySelector(sel); const bg = bgOf(el); const fg = rgba(getComputedStyle(el).color);
    const over = fg.slice(0, 3).map((v, i) => v * fg[3] + bg[i] * (1 - fg[3]));
    const a = lum(over), b = lum(bg); return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05); }"""


AXE = ROOT / "js" / "node_modules" / "axe-core" / "axe.min.js"  # axe-core, a js/ dev dependency (offline)


def _axe(page, chat):
    """axe-core's WCAG 2 A/AA rules on the chat: [(rule id, impact, how many nodes)]."""
    assert AXE.exists(), "axe-core is missing: run `npm ci` in js/ (scripts/test.sh does)"
    if not page.evaluate("() => !!window.axe"):
        page.add_script_tag(path=str(AXE))
    return page.evaluate("""async (s) => { const r = await window.axe.run(document.querySelector(s),
        { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
        return r.violations.map(v => [v.id, v.impact, v.nodes.length, v.nodes.slice(0, 2).map(n => n.failureSummary)]); }""", chat)


def _theme(page, name):
    page.evaluate("async (t) => { await window.jupyterapp.commands.execute('apputils:change-theme', {theme: t}); }", name)
    page.wait_for_function("(light) => document.body.dataset.jpThemeLight === light", arg=str(name.endswith("Light")).lower())
    page.wait_for_timeout(300)


def test_keyboard_and_screen_reader(lab, notebook):
    """Approve gets the keyboard when a call waits, focus rings show, the answers are a log (the
    gauge is not live), and small text in status colours has 4.5:1 contrast in light and dark."""
    nb = notebook("a11y.ipynb")
    chat = show_widget(lab, nb)
    assert lab.get_attribute(f"{chat} .nba-turns", "role") == "log"
    assert lab.get_attribute(f"{chat} .nba-gauge", "role") is None
    assert lab.get_attribute(f"{chat} .nba-gauge", "aria-live") == "off"
    send_prompt(lab, chat, "What is 6 * 7?")
    lab.wait_for_selector(f"{chat} .nba-tool[data-status='waiting'] .nba-approve")
    lab.wait_for_function("(s) => document.activeElement === document.querySelector(s + ' .nba-approve')", arg=chat,
                          polling=50, timeout=5_000)
    ring = lab.evaluate("""(s) => { const b = document.querySelector(s + ' .nba-approve'), st = getComputedStyle(b);
        return [b.matches(':focus-visible'), st.outlineStyle, st.outlineColor, st.backgroundColor]; }""", chat)
    assert ring[0] and ring[1] != "none" and ring[2] != ring[3], ring  # visible, not the button's own blue
    contrast = {}
    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        _theme(lab, theme)
        contrast[f"{theme} approve"] = lab.evaluate(CONTRAST_JS, [f"{chat} .nba-approve"])
        contrast[f"{theme} waiting badge"] = lab.evaluate(CONTRAST_JS, [f"{chat} .nba-badge"])
    lab.keyboard.press("Enter")  # approves
    wait_turn_done(lab, chat, 1)
    assert lab.locator(chat).locator(".nba-tool").get_attribute("data-status") == "done"
    send_prompt(lab, chat, "Hello there")  # an answer with a code block (Copy) and a failing tool call
    wait_turn_done(lab, chat, 2)
    lab.evaluate("""(s) => { const c = document.querySelector(s + ' .nba-badge');
        for (const st of ['done', 'error', 'waiting', 'running', 'denied']) {
          const b = c.cloneNode(); b.className = 'nba-badge nba-st-' + st; b.textContent = st; b.id = 'probe-' + st;
          c.parentElement.append(b); } }""", chat)
    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        _theme(lab, theme)
        contrast[f"{theme} copy"] = lab.evaluate(CONTRAST_JS, [f"{chat} .nba-copy"])
        for st in ("done", "error", "waiting", "running", "denied"):
            contrast[f"{theme} {st} badge"] = lab.evaluate(CONTRAST_JS, [f"#probe-{st}"])
    violations = {}
    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        _theme(lab, theme)
        violations[theme] = _axe(lab, chat)
    _theme(lab, "JupyterLab Light")
    assert not any(violations.values()), violations
    TIMINGS["contrast"] = {k: round(v, 2) for k, v in contrast.items()}
    low = {k: round(v, 2) for k, v in contrast.items() if v < 4.5}
    assert not low, low
    no_errors(lab)


ALL_TEXT_CONTRAST_JS = """(sel) => {
    const cv = document.createElement('canvas').getContext('2d', { willReadFrequently: true });
    const rgba = (c) => { cv.clearRect(0, 0, 1, 1); cv.fillStyle = '#000'; cv.fillStyle = c; cv.fillRect(0, 0, 1, 1);
        const d = cv.getImageData(0, 0, 1, 1).data; return [d[0], d[1], d[2], d[3] / 255]; };
    const bgOf = (el) => { for (let e = el; e; e = e.parentElement) { const c = rgba(getComputedStyle(e).backgroundColor);
        if (getComputedStyle(e).backgroundColor !== 'rgba(0, 0, 0, 0)' && c[3] > 0.5) return c; } return [255, 255, 255, 1]; };
    const lum = ([r, g, b]) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
        return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
    const out = [];
    for (const el of document.querySelector(sel).querySelectorAll('*')) {
      const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
      if (!own || !el.getClientRects().length || getComputedStyle(el).visibility === 'hidden') continue;
      if (el.closest('button:disabled, .nba-btn:disabled')) continue;  // WCAG: disabled controls are exempt
      const bg = bgOf(el), fg = rgba(getComputedStyle(el).color);
      const over = fg.slice(0, 3).map((v, i) => v * fg[3] + bg[i] * (1 - fg[3]));
      const a = lum(over), b = lum(bg), ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
      out.push([el.className || el.tagName, el.textContent.trim().slice(0, 30), Math.round(ratio * 100) / 100,
                getComputedStyle(el).fontSize]);
    }
    return out; }"""


def test_first_hour_edges_model_switch_focus_traceback_and_contrast(lab, notebook):
    """The footer names the model the next message goes to, right after a switch, and the turn after
    it says so; while a turn streams the keyboard is on Stop, not the page; a failing run_python card
    opens the whole traceback; every text in the chat has 4.5:1 contrast, light and dark."""
    nb = notebook("firsthour.ipynb")
    chat = show_widget(lab, nb)
    model = lab.locator(chat).locator(".nba-gauge .nba-model")
    sync_api.expect(model).to_have_text("scripted:scripted-1")
    send_prompt(lab, chat, "Run something")
    wait_turn_done(lab, chat, 1)
    lab.wait_for_function("(s) => document.activeElement === document.querySelector(s + ' .nba-input')", arg=chat,
                          polling=50, timeout=10_000)  # the box has the keyboard back after the turn
    card = lab.locator(chat).locator(".nba-tool").first
    assert card.get_attribute("data-status") == "error"
    assert card.locator(".nba-tool-error").inner_text() == "ZeroDivisionError: division by zero"  # the last line
    full = card.locator(".nba-traceback")
    full.locator("summary").click()
    sync_api.expect(full.locator("pre")).to_be_visible()
    tb = full.locator("pre").inner_text()
    assert "Traceback" in tb and "return 1 / x" in tb and "half(0)" in tb, tb  # what the model got
    # a turn streaming: the box is locked and the keyboard is on Stop
    send_prompt(lab, chat, "Wait for it")
    lab.wait_for_selector(f"{chat} .nba-input:disabled")
    lab.wait_for_function("(s) => document.activeElement === document.querySelector(s + ' .nba-stop')", arg=chat,
                          polling=50, timeout=10_000)
    run_cell(lab, 1)  # releases the model
    wait_run(lab)
    wait_turn_done(lab, chat, 2)
    assert lab.locator(chat).locator(".nba-switch").filter(visible=True).count() == 0
    run_cell(lab, 2)  # agent.set_model(...)
    wait_run(lab)
    sync_api.expect(model).to_have_text("scripted:scripted-2")  # before any turn of the new model
    send_prompt(lab, chat, "Who are you?")
    wait_turn_done(lab, chat, 3)
    switch = lab.locator(chat).locator(".nba-turn").nth(2).locator(".nba-switch")
    sync_api.expect(switch).to_have_text("Model switched: scripted:scripted-1 → scripted:scripted-2")
    lab.evaluate("(s) => document.querySelector(s + ' .nba-turn .nba-thinking')?.setAttribute('open', '')", chat)
    low = {}
    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        _theme(lab, theme)
        measured = lab.evaluate(ALL_TEXT_CONTRAST_JS, chat)
        labels = {m[0] for m in measured}
        assert {"nba-model", "nba-gauge-text", "nba-switch", "nba-footer"} <= labels, labels
        assert any("nba-code-head" in str(m[0]) or m[1] == "python" for m in measured), measured
        low[theme] = [m for m in measured if m[2] < 4.5]
    _theme(lab, "JupyterLab Light")
    assert not any(low.values()), low
    no_errors(lab)


def test_shut_down_kernel_says_so_and_send_looks_unusable(lab, notebook):
    nb = notebook("shutdown.ipynb")
    chat = show_widget(lab, nb)
    before = lab.evaluate("(s) => getComputedStyle(document.querySelector(s + ' .nba-send')).backgroundColor", chat)
    lab.evaluate("async () => { await window.jupyterapp.shell.currentWidget.sessionContext.shutdown(); }")
    lab.wait_for_function("(s) => document.querySelector(s + ' .nba-notice')?.textContent.includes('re-run this cell')",
                          arg=chat, polling=50)
    notice = lab.inner_text(f"{chat} .nba-notice")
    assert "shut down" in notice and "restarted" not in notice, notice
    after = lab.evaluate("(s) => getComputedStyle(document.querySelector(s + ' .nba-send')).backgroundColor", chat)
    assert after != before  # no longer the bright "ready" button
    no_errors(lab)


def teardown_module(module):
    print("\nTIMINGS", json.dumps(TIMINGS))
    out = os.environ.get("NBAGENT_BROWSER_TIMINGS")
    if out:
        Path(out).write_text(json.dumps(TIMINGS, indent=1))
