"""The chat widget in marimo (headless ``marimo run`` and Chromium): marimo renders anywidgets inside a
shadow root, where the page's stylesheets don't reach and ``document.querySelectorAll`` doesn't
search. A scripted answer with math and a bullet list must show typeset and with its bullets."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, CHROMIUM_ARGS, marimo_server

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("marimo", reason="marimo is not installed")

APP = textwrap.dedent('''
    import marimo

    app = marimo.App()


    @app.cell
    def _():
        import marimo as mo
        from nbagent import Conversation
        from support.streams import StreamConnection

        answer = ["The area is $\\\\pi r^2$, and\\n\\n", "- first point\\n", "- second point\\n"]
        conv = Conversation(StreamConnection(answer, pace=0.01))
        chat = mo.ui.anywidget(conv.widget())
        chat
        return


    if __name__ == "__main__":
        app.run()
''')


@pytest.fixture(scope="module")
def marimo_app(tmp_path_factory):
    """``marimo run app.py`` on a free loopback port, no token; its process group is killed at the end."""
    with marimo_server(tmp_path_factory.mktemp("marimo"), APP) as url:
        yield url


def test_marimo_answer_shows_typeset_math_and_bullets(marimo_app):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(marimo_app)
            box = page.locator(".nba-input")  # Playwright's CSS locators pierce open shadow roots
            box.wait_for(timeout=60_000)
            assert page.locator(".nba-chat").first.evaluate("e => e.getRootNode() !== document"), \
                "marimo no longer renders the widget in a shadow root: this test checks nothing special"
            box.fill("What is the area of a circle?")
            box.press("Enter")
            items = page.locator(".nba-md li")
            items.nth(1).wait_for(timeout=30_000)
            # the math placeholder was on the page before the Temml module arrived from the kernel
            page.locator(".nba-md .nba-math math").first.wait_for(timeout=30_000)
            assert page.locator(".nba-md .nba-math:not(.nba-math-done)").count() == 0
            assert items.all_inner_texts() == ["first point", "second point"]
            for li in items.all():
                style = li.evaluate("e => [getComputedStyle(e).display, getComputedStyle(e).listStyleType]")
                assert style[0] == "list-item" and style[1] not in ("none", ""), style
            assert errors == []
        finally:
            browser.close()
