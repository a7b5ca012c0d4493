"""Model text with links to schemes the widget never links (data:, file:, vbscript:), and a saved
notebook of it converted by the real ``jupyter nbconvert --to html`` (issue #31, item 11)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["SCHEME_LINKS", "nbconvert_page"]

# the widget allows http(s), mailto, #name and relative addresses only; the last line holds those
SCHEME_LINKS = [
    "[open](data:text/html;base64,PHNjcmlwdD5hbGVydCgneHNzJyk8L3NjcmlwdD4=)",
    "[up](DATA:text/html,<script>alert('xss')</script>) [sp]( data:text/html,x) [br](<data:text/html,x>)",
    "[esc](data\\:text/html,x) [ent](d&#x61;ta:text/html,x) [col](data&#58;text/html,x) [tab](da&#9;ta:x)",
    "![pic](data:image/svg+xml,<svg/onload=alert('xss')>) [f](file:///etc/passwd) [v](vbscript:msgbox)",
    "[r]: data:text/html,x\n\n[go][r] and [s][] \n\n[s]: <data:text/html,y>",
    "[ok](https://example.org/a) [mail](mailto:a@b.c) [rel](notes/page.md) [top](#top) [q](./a:b)",
]


def nbconvert_page(folder: Path) -> Path:
    """A notebook whose transcript output (as the widget saves it) holds ``SCHEME_LINKS`` as a model's
    answers, converted by ``jupyter nbconvert --to html``: the HTML file's path."""
    import nbformat

    from nbagent import Agent
    from nbagent.notebook.transcript import transcript_markdown

    from .scripted import ScriptedProvider, text_call

    agent = Agent(model=ScriptedProvider([text_call(source) for source in SCHEME_LINKS]))
    for i in range(len(SCHEME_LINKS)):
        agent.ask(f"links {i}")
    md = f'<div class="nbagent-transcript">\n\n{transcript_markdown(agent.conversation.history)}\n\n</div>'
    path = folder / "links.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("agent", outputs=[
        nbformat.v4.new_output("display_data", data={"text/markdown": md, "text/plain": "transcript"})])]), path)
    jupyter = Path(sys.executable).with_name("jupyter")
    subprocess.run([str(jupyter), "nbconvert", "--to", "html", str(path)], check=True, capture_output=True,
                   timeout=120)
    return path.with_suffix(".html")
