"""The chat widget in a page of the standard HTML widget manager (``ipywidgets.embed``), without
JupyterLab's CSS: the saved-transcript output displayed right after the widget (as in VS Code or
Colab, where only JupyterLab's stylesheet used to hide it) is hidden by the widget itself: the head
and each finished turn's output after it.

The page's scripts (require.js, the HTML manager, anywidget's AMD module) come from js/node_modules
and the installed anywidget, served in place of their CDN addresses: no network."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, CHROMIUM_ARGS, ROOT

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
anywidget = pytest.importorskip("anywidget")

MODULES = ROOT / "js" / "node_modules"
SCRIPTS = {  # a part of the CDN address -> the local file
    "require.min.js": MODULES / "requirejs" / "require.js",
    "embed-amd.js": MODULES / "@jupyter-widgets" / "html-manager" / "dist" / "embed-amd.js",
    "anywidget": Path(anywidget.__file__).parent / "nbextension" / "index.js",
}


def own_state(widget) -> dict:
    """The embed state of ``widget`` and of the widgets its traits hold (its ``layout``), nothing else."""
    from ipywidgets import Widget

    found, todo = {}, [widget]
    while todo:
        w = todo.pop()
        if w.model_id not in found:
            found[w.model_id] = w
            todo += [v for name in w.keys if isinstance(v := getattr(w, name, None), Widget)]
    return Widget.get_manager_state(drop_defaults=False, widgets=list(found.values()))["state"]


def static_page(tmp_path: Path) -> str:
    """embed_minimal_html of a chat with one finished turn, its transcript outputs displayed after it:
    the head, shown before the turn, then the turn's."""
    from ipywidgets.embed import embed_minimal_html
    from nbagent import Conversation
    from support.streams import StreamConnection

    conv = Conversation(StreamConnection(["The answer is 42."]))
    conv.ask("What is the answer?")
    widget = conv.widget()
    path = tmp_path / "page.html"
    # the state of this widget and its layout alone: without state= every widget still alive in this
    # process (earlier tests' too) is embedded, and the page fails to initialize their models
    embed_minimal_html(path, views=[widget], state=own_state(widget), drop_defaults=False, title="nbagent")
    html = path.read_text()
    html = re.sub(r' integrity="[^"]*"', "", html)  # the local require.js is not the CDN's build
    from nbagent.notebook.transcript_output import transcript_piece

    head = transcript_piece([], head=True)["text/markdown"].replace("\n\n", "<br>")
    turn = transcript_piece(conv.history)["text/markdown"].replace("\n\n", "<br>")
    # each output in its own box, the transcript's right after the widget's, as a notebook front end shows them
    return re.sub(r'(<script type="application/vnd.jupyter.widget-view\+json">.*?</script>)',
                  lambda m: f'<div class="output">{m.group(1)}</div><div class="output">{head}</div>'
                            f'<div class="output">{turn}</div>',
                  html, count=1, flags=re.S)


def embedded_models(html: str) -> set[str]:
    """The model ids of the widget state a page embeds."""
    import json

    found = re.search(r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>', html, re.S)
    assert found, "the page embeds no widget state"
    return set(json.loads(found.group(1))["state"])


def test_the_page_embeds_the_shown_widget_only_not_the_others_alive(tmp_path):
    from nbagent import Conversation
    from support.streams import StreamConnection

    other = Conversation(StreamConnection(["left over"])).widget()  # as an earlier test leaves one behind
    html = static_page(tmp_path)
    models = embedded_models(html)
    view = re.search(r'"model_id": "([0-9a-f]+)"', html)
    assert view and view.group(1) in models and not {other.model_id, other.layout.model_id} & models
    assert len(models) == 2, models  # the chat's model and its layout's


def test_the_live_widget_hides_the_transcript_output_beside_it_without_jupyterlab_css(tmp_path):
    for name, file in SCRIPTS.items():
        assert file.exists(), f"{file} is missing (for {name}): run npm ci in js/"
    html = static_page(tmp_path)
    assert "nbagent-transcript" in html and "jp-OutputArea-child" not in html.replace("jp-OutputArea-child:has", "")

    def serve(route):
        url = route.request.url
        for part, file in SCRIPTS.items():
            if part in url:
                return route.fulfill(path=str(file), content_type="text/javascript")
        if url == "http://nbagent.test/index.html":
            return route.fulfill(body=html, content_type="text/html")
        return route.fulfill(status=404, body="")

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.route("**/*", serve)
            page.goto("http://nbagent.test/index.html")
            chat = page.locator(".nba-chat")
            chat.wait_for(timeout=30_000)
            assert "The answer is 42." in chat.inner_text()  # the chat shows the conversation
            transcript = page.locator(".nbagent-transcript")
            assert transcript.count() == 2
            for i in range(2):
                sync_api.expect(transcript.nth(i)).to_be_hidden(timeout=10_000)
            assert "The answer is 42." in transcript.nth(1).text_content()  # it is the saved copy, hidden
            assert errors == []
        finally:
            browser.close()
