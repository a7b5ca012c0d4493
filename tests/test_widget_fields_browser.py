"""Kernel -> DOM for the fields a step shows, in real Chromium.

- In JupyterLab: a provider's retry notice ("… retrying in 3 s, 2 of 3") shows on the live model step
  while it waits, and the model's refusal (OpenAI's recorded refusal stream) is drawn once it arrives.
- For every Step field declared ``shown`` (core/steps.py): the messages a real ChatWidget sent while
  that field changed on a live step (tests/support/step_fields.py), fed to the built widget.js in a
  page, change what the step's turn draws.

Run under the shared lock: flock /tmp/nbagent-browser.lock .venv/bin/python -m pytest -q tests/test_widget_fields_browser.py
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, ROOT, run_cell

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")
pytest.importorskip("anywidget")

from nbagent.core.steps import field_roles  # noqa: E402
from support.step_fields import EXAMPLES, INDEX, record_change  # noqa: E402

STATIC = ROOT / "nbagent" / "notebook" / "static"
REFUSAL_SSE = ROOT / "tests" / "fixtures" / "openai" / "refusal.sse"
NOTEBOOKS = {
    "retry.ipynb": [
        "from pathlib import Path\nfrom nbagent import Agent\n"
        "from support.fault_server import FaultServer, reply, sse\nfrom support.wires import OPENAI_WIRE\n"
        "server = FaultServer().start()\n"
        "server.push(reply(503, OPENAI_WIRE.error_body(503, 'Service temporarily unavailable')),\n"
        f"            sse(Path({str(REFUSAL_SSE)!r}).read_bytes()))\n"
        "provider = OPENAI_WIRE.make_provider(server.url, api_key='sk-fault-test-key-0123456789abcdef',\n"
        "                                     retry_base_delay=3.0, max_retries=2)\n"
        "agent = Agent(model=provider)\nagent"],
}


def test_a_retry_notice_and_a_refusal_reach_the_live_widget(lab, notebook):
    nb = notebook("retry.ipynb")
    run_cell(lab, 0)
    chat = f"{nb} .nba-chat"
    lab.wait_for_selector(chat)
    lab.fill(f"{chat} .nba-input", "Tell me something you must refuse")
    lab.press(f"{chat} .nba-input", "Enter")
    notice = lab.locator(f"{chat} .nba-step-notice")
    # shown only during the 3 s wait before the second attempt: its text is read in the same poll that sees
    # it (read after the wait returned, a stalled machine could find it gone, the answer come)
    text = lab.wait_for_function("""(s) => { const n = document.querySelector(s + ' .nba-step-notice');
        return n && n.getClientRects().length > 0 && n.innerText; }""", arg=chat, polling=50, timeout=30_000).json_value()
    assert "Service temporarily unavailable" in text or "503" in text
    assert "retrying in" in text and "2 of 3" in text
    refusal = lab.locator(f"{chat} .nba-refusal")
    refusal.wait_for(state="visible", timeout=30_000)
    assert refusal.inner_text() == "The model declined: I'm sorry, I can't assist with that request."
    lab.wait_for_function("(s) => !document.querySelector(s).classList.contains('nba-is-running')", arg=chat)
    assert not notice.is_visible()  # the answer came: the notice is gone
    assert lab.locator(f"{chat} .nba-md").count() == 0  # a refusal is never answer text


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def static_page(lab):
    """A second page of the module's Chromium on a loopback server of the built bundles (nbagent/notebook/static/)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(STATIC)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    page = lab.context.new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    try:
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/")
        yield page
    finally:
        page.close()
        server.shutdown()


# The built widget.js with a stand-in anywidget model: the recorded messages are applied in order
# (traits as change events, custom messages as msg:custom; a flush's `state` the widget sets itself); at each mark, after two frames (the
# markdown renders on the next frame), the running turn's HTML.
DRAW = """async ([messages, marks]) => {
  const mod = await import("/widget.js");
  const traits = { _key: "k" + Math.random(), current: null, running: false, notice: "", finished: 0, gauge: {},
    placeholder: "", conversation_key: "c", switchable: false, step_waiting: false, session_ui: "", turns: null };
  const on = {};
  const fire = (ev, arg) => (on[ev] || []).forEach((fn) => fn(arg));
  const model = { get: (k) => traits[k], set: (k, v) => { traits[k] = v; fire(`change:${k}`); },
    on: (ev, fn) => { (on[ev] ||= []).push(fn); }, off() {}, send() {}, widget_manager: {} };
  const el = document.createElement("div");
  document.body.replaceChildren(el);
  mod.default.initialize({ model });
  mod.default.render({ model, el });
  const frames = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const out = [];
  for (let i = 0; i < messages.length; i++) {
    const [kind, body] = messages[i];
    if (kind === "update") for (const [k, v] of Object.entries(body)) { traits[k] = v; fire(`change:${k}`); }
    else fire("msg:custom", body);
    for (const m of marks) if (m === i + 1) {
      await frames();
      const turns = el.querySelectorAll(".nba-turn");
      out.push(turns.length ? turns[turns.length - 1].outerHTML : "");
    }
  }
  return out;
}"""


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_a_shown_field_changed_on_a_live_step_is_drawn(static_page, name):
    assert field_roles()[name].shown
    with ThreadPoolExecutor(1) as pool:  # its own event loop: Playwright's sync API holds this thread's
        rec = pool.submit(asyncio.run, record_change(name)).result(timeout=120)
    before, after = static_page.evaluate(DRAW, [rec.messages, list(rec.marks)])
    assert f'data-step="{INDEX}"' in before, "the live step is not drawn"
    assert before != after, f"changing {name} on a live step changed nothing the widget draws"
    assert not [e for e in static_page.errors if "nba" in e or "widget" in e.lower()], static_page.errors
