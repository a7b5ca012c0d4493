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
    embed_minimal_html(path, views=[widget], drop_defaults=False, title="nbagent")
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
