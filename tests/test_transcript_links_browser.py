"""A saved chat's transcript, converted by ``jupyter nbconvert --to html``, opened in Chromium: the
page's links, as the browser parses them, go only where the widget's would (issue #31, item 11).

Run:  flock /tmp/nbagent-browser.lock .venv/bin/python -m pytest -q tests/test_transcript_links_browser.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, CHROMIUM_ARGS
from support.link_payloads import nbconvert_page

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("nbformat")


def test_the_nbconvert_page_of_a_saved_chat_links_only_the_widgets_schemes(tmp_path):
    html = nbconvert_page(tmp_path).read_text(encoding="utf-8")

    def serve(route):  # the page itself; nothing else is fetched (no network)
        if route.request.url == "http://nbagent.test/links.html":
            return route.fulfill(body=html, content_type="text/html")
        return route.fulfill(status=404, body="")

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.route("**/*", serve)
            page.goto("http://nbagent.test/links.html")
            page.wait_for_selector(".nbagent-transcript")
            links = page.evaluate("() => [...document.querySelectorAll('.nbagent-transcript a[href]')]"
                                  ".map(a => [a.textContent, a.protocol, a.href])")
        finally:
            browser.close()
    by_text = {text: (protocol, href) for text, protocol, href in links}
    assert {protocol for protocol, _ in by_text.values()} <= {"http:", "https:", "mailto:"}, links
    assert by_text["ok"] == ("https:", "https://example.org/a") and by_text["mail"][0] == "mailto:"
    assert by_text["rel"][1] == "http://nbagent.test/notes/page.md"  # relative links still work
    for refused in ("open", "up", "sp", "br", "esc", "ent", "col", "tab", "f", "v", "go", "s"):
        assert refused not in by_text, (refused, by_text.get(refused))
