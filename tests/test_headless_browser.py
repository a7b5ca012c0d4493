"""A notebook run headless keeps its chat: ``jupyter nbconvert --execute`` (nbclient, as papermill
and docs builds run notebooks) of data_analysis.ipynb and teaching.ipynb saves every turn in the
outputs, whichever cell asked for it, and the exported HTML shows every turn's text in Chromium,
with the page's widget manager running the widget from the saved widget state: the chat, which
has no turns and no kernel there, steps aside ("No messages yet." and "Not connected to a kernel"
never show) and the transcript outputs stay visible. The standard HTML widget manager page
(``embed_minimal_html`` with the state of just this widget) shows every turn in the chat itself.

The pages' scripts (require.js, the HTML manager, anywidget's AMD module) come from js/node_modules
and the installed anywidget, served in place of their CDN addresses: no network."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, CHROMIUM_ARGS, ROOT, isolated_env

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
anywidget = pytest.importorskip("anywidget")
pytest.importorskip("nbconvert")

MODULES = ROOT / "js" / "node_modules"
SCRIPTS = {  # a part of the CDN address -> the local file
    "require.min.js": MODULES / "requirejs" / "require.js",
    "embed-amd.js": MODULES / "@jupyter-widgets" / "html-manager" / "dist" / "embed-amd.js",
    "anywidget": Path(anywidget.__file__).parent / "nbextension" / "index.js",
}
# the chat widget's turns in each notebook (each prompt, and a piece of each answer)
TURNS = {
    "data_analysis": [("look at sales and plot revenue by month", "Let me see which variables your notebook has")],
    "teaching": [("What is 12 * 7?", "calculator"), ("Please solve_quadratic with a=1, b=-5, c=6", "solve_quadratic"),
                 ("Hello! Who are you?", "demo model")],
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory) -> dict[str, tuple[dict, str]]:
    """Each notebook executed headless (``--to notebook``) and exported (``--to html``)."""
    tmp = tmp_path_factory.mktemp("headless")
    env = isolated_env(tmp)
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        env.pop(key, None)
    out = {}
    for name in TURNS:
        shutil.copy(ROOT / "notebooks" / f"{name}.ipynb", tmp / f"{name}.ipynb")
        jupyter = [sys.executable, "-m", "jupyter", "nbconvert"]
        subprocess.run([*jupyter, "--execute", "--to", "notebook", "--output", f"{name}.run", f"{name}.ipynb"],
                       cwd=tmp, env=env, check=True, capture_output=True, timeout=300)
        subprocess.run([*jupyter, "--to", "html", f"{name}.run.ipynb"], cwd=tmp, env=env, check=True,
                       capture_output=True, timeout=120)
        html = re.sub(r' integrity="[^"]*"', "", (tmp / f"{name}.run.html").read_text())
        out[name] = (json.loads((tmp / f"{name}.run.ipynb").read_text()), html)
    return out


def output_text(nb: dict) -> str:
    """Every markdown and text output of the notebook's cells."""
    parts = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            for mime in ("text/markdown", "text/plain"):
                value = data.get(mime, "")
                parts.append("".join(value) if isinstance(value, list) else value)
            parts.append("".join(out.get("text", "")))
    return "\n".join(parts)


def serve(html: str):
    def handle(route):
        url = route.request.url
        for part, file in SCRIPTS.items():
            if part in url:
                return route.fulfill(path=str(file), content_type="text/javascript")
        if url == "http://nbagent.test/index.html":
            return route.fulfill(body=html, content_type="text/html")
        return route.fulfill(status=404, body="")  # MathJax, fonts: not needed to read the chat
    return handle


def open_page(p, html: str):
    browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.route("**/*", serve(html))
    page.goto("http://nbagent.test/index.html")
    return browser, page, errors


@pytest.mark.parametrize("name", list(TURNS))
def test_a_headless_run_saves_every_turn_in_the_outputs(executed, name):
    nb, _ = executed[name]
    saved = output_text(nb)
    for prompt, answer in TURNS[name]:
        assert prompt in saved and answer in saved, (name, prompt)


@pytest.mark.parametrize("name", list(TURNS))
def test_the_exported_html_shows_every_turn_and_no_empty_chat(executed, name):
    for file in SCRIPTS.values():
        assert file.exists(), f"{file} is missing: run npm ci in js/"
    nb, html = executed[name]
    assert "application/vnd.jupyter.widget-state+json" in json.dumps(nb["metadata"])  # nbclient saved the state
    with sync_api.sync_playwright() as p:
        browser, page, errors = open_page(p, html)
        try:
            chat = page.locator(".nba-chat")
            chat.first.wait_for(state="attached", timeout=30_000)  # the page's widget manager ran the widget
            sync_api.expect(chat.first).to_have_class(re.compile("nba-aside"), timeout=10_000)
            sync_api.expect(chat.first).to_be_hidden()
            outputs = page.locator(".jp-OutputArea-output")
            for prompt, answer in TURNS[name]:
                shown = outputs.filter(has_text=prompt).filter(has_text=answer)
                sync_api.expect(shown.first).to_be_visible(timeout=10_000)
            for text in ("No messages yet.", "Not connected to a kernel"):
                assert not page.get_by_text(text).filter(visible=True).count(), text
            transcripts = page.locator(".nbagent-transcript")
            assert transcripts.count() >= 2
            for i in range(transcripts.count()):
                sync_api.expect(transcripts.nth(i)).to_be_visible()
            assert errors == []
        finally:
            browser.close()


def test_the_html_widget_manager_page_shows_every_turn_in_the_chat(tmp_path):
    from ipywidgets.embed import dependency_state, embed_minimal_html
    from nbagent import Conversation
    from support.streams import StreamConnection

    answers = {"What is the answer?": "The answer is 42.", "Capital of France?": "Paris is the capital of France.",
               "Days in a week?": "Seven days make a week."}
    conv = Conversation(StreamConnection(lambda prompt: [answers[prompt]]))
    for prompt in answers:
        conv.ask(prompt)
    widget = conv.widget()
    path = tmp_path / "page.html"
    embed_minimal_html(path, views=[widget], state=dependency_state([widget], drop_defaults=False), title="nbagent")
    html = re.sub(r' integrity="[^"]*"', "", path.read_text())
    with sync_api.sync_playwright() as p:
        browser, page, errors = open_page(p, html)
        try:
            chat = page.locator(".nba-chat")
            chat.wait_for(timeout=30_000)
            for text in [*answers, *answers.values()]:
                sync_api.expect(chat.get_by_text(text)).to_be_visible(timeout=10_000)
            sync_api.expect(chat.get_by_text("No messages yet.")).to_be_hidden()
            assert "nba-aside" not in (chat.get_attribute("class") or "")
            assert errors == []
        finally:
            browser.close()
