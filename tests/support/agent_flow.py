"""The notebook agent as a user meets it, in a real browser (tests/test_notebook_agent_browser.py
runs it in JupyterLab and in Notebook 7): the real notebook tools and the offline demo model.

A cell makes ``sales`` (month, region, revenue) and shows ``Agent(model="demo", notebook=True)``.
In the chat box the user types ``look at @sa``, picks ``sales`` from the @ list with Enter, types
``and plot revenue by month`` and presses Enter. The prompt carries ``sales``' description (a
chip in the bubble, "📎 sales · DataFrame 6×3", opens it); the
demo model asks to run a group-by and a bar chart: the ``run_python`` card shows the code
highlighted with Approve. Approving runs it in the kernel; its figure shows in the card, then the
answer. *Insert as cell below* puts the code in a new cell under the chat's cell, marked "written
by the agent, turn 1" (its metadata records the action; the cell is selected, in view, its editor
focused), and ``%chat_code -a agent`` run as a cell
replaces itself with that code under a ``%%chat_run`` line (running it again runs nothing). The
kernel holds the prompt with the attached variable.
"""

from __future__ import annotations

import re

from playwright.sync_api import expect

from support.jupyter import run_cell, shot

NOTEBOOK = "agent.ipynb"
AGENT_CELL = (
    "import pandas as pd\n"
    "from nbagent import Agent\n"
    "sales = pd.DataFrame({'month': ['jan', 'feb', 'mar'] * 2, 'region': ['north'] * 3 + ['south'] * 3,\n"
    "                      'revenue': [120, 135, 150, 80, 95, 110]})\n"
    "agent = Agent(model=\"demo\", notebook=True)\n"
    "agent"
)
PROMPT_CELL = "print(agent.conversation.turns[-1].prompt)"
MAGIC_CELL = "%chat_code -a agent"
CELLS = [AGENT_CELL, PROMPT_CELL, "%load_ext nbagent", MAGIC_CELL]
PROMPT = "look at @sales and plot revenue by month"
# the demo model's code for that prompt (providers/demo_notebook.py fits it to sales' columns)
CODE = ("by_month = sales.groupby('month', sort=False)['revenue'].sum()\n"
        "by_month.plot(kind=\"bar\", title='revenue by month')\n"
        "by_month")
LONG = 120_000  # ms: the machine is a loaded 2-core box; a turn's steps can take a while


def cell(page, nb, index):
    return page.locator(f"{nb} .jp-Notebook .jp-Cell").nth(index)


def ask_with_mention(page, chat):
    """Type the prompt as a user does, picking ``sales`` from the @ list with Enter."""
    box = page.locator(f"{chat} .nba-input")
    box.click()
    box.press_sequentially("look at @sa")
    names = page.locator(f"{chat} [role=listbox] [role=option] .nba-mention-name")
    expect(names).to_have_text(["sales"])
    expect(page.locator(f"{chat} [role=listbox] [role=option] .nba-mention-type")).to_have_text(["DataFrame"])
    box.press("Enter")  # picks the name, does not send
    expect(box).to_have_value("look at @sales ")
    expect(page.locator(f"{chat} [role=listbox]")).to_be_hidden()
    box.press_sequentially("and plot revenue by month")
    expect(box).to_have_value(PROMPT)
    box.press("Enter")
    prompt = page.locator(f"{chat} .nba-turn .nba-prompt-text").first
    expect(prompt).to_have_text(PROMPT)  # what the user typed; the attached description is a chip
    chip = page.locator(f"{chat} .nba-turn .nba-attachment").first
    expect(chip.locator("summary")).to_have_text("📎 sales · DataFrame 6×3")
    description = chip.locator("pre")
    expect(description).to_be_hidden()
    chip.locator("summary").click()  # opens what the model got about sales
    expect(description).to_be_visible()
    expect(description).to_contain_text("- revenue: int64, 6 of 6 non-null")
    chip.locator("summary").click()
    expect(description).to_be_hidden()


def approve_code(page, chat):
    """The card shows the code, highlighted, with Approve; approving shows the figure, then the answer."""
    card = page.locator(f"{chat} .nba-tool").filter(has=page.locator(".nba-tool-name", has_text="run_python"))
    expect(card).to_have_attribute("data-status", "waiting")
    expect(card.locator(".nba-tool-code code")).to_have_text(CODE)
    expect(card.locator(".nba-tool-code .hljs-string").first).to_be_visible()  # highlighted, not plain text
    expect(card.locator(".nba-tool-result img")).to_have_count(0)  # nothing ran yet
    card.locator(".nba-approve").click()
    expect(card).to_have_attribute("data-status", "done")
    image = card.locator(".nba-tool-result img")
    expect(image).to_have_count(1)
    expect(image).to_be_visible()
    # the figure (a data: URL) loads and decodes after it is in the page: waited for, not read at once
    page.wait_for_function("(i) => i.complete && i.naturalWidth > 100", arg=image.element_handle(), polling=50,
                           timeout=30_000)
    answer = page.locator(f"{chat} .nba-md", has_text="The code ran in your kernel")
    expect(answer).to_be_visible()
    # the chat follows the turn to its end: the answer is in the chat's view once the figure has loaded
    page.wait_for_function("""(s) => { const list = document.querySelector(s + ' .nba-turns');
        const mds = [...list.querySelectorAll('.nba-md')].filter(m => m.textContent.includes('The code ran in your kernel'));
        const a = mds[0].getBoundingClientRect(), l = list.getBoundingClientRect();
        return a.top >= l.top - 1 && a.bottom <= l.bottom + 1; }""", arg=chat, polling=200, timeout=LONG)
    expect(page.locator(chat)).not_to_have_class(re.compile(r"\bnba-is-running\b"))
    return card


def insert_below(page, nb, card):
    """*Insert as cell below* puts the code in a new cell right under the chat's cell, marked as the agent's."""
    count = page.locator(f"{nb} .jp-Notebook .jp-Cell").count()
    card.locator(".nba-insert").click()
    expect(page.locator(f"{nb} .jp-Notebook .jp-Cell")).to_have_count(count + 1)
    expect(cell(page, nb, 1).locator(".cm-content")).to_have_text(CODE, use_inner_text=True)
    expect(cell(page, nb, 2).locator(".cm-content")).to_have_text(PROMPT_CELL, use_inner_text=True)
    # the new cell is selected, in view, and has the keyboard (its editor: Shift+Enter runs it)
    new = cell(page, nb, 1)
    expect(new).to_have_class(re.compile(r"\bjp-mod-active\b"))
    expect(new).to_be_in_viewport()
    page.wait_for_function("(s) => document.querySelectorAll(s + ' .jp-Notebook .jp-Cell')[1].contains(document.activeElement)",
                           arg=nb, polling=100, timeout=10_000)
    expect(cell(page, nb, 1)).to_have_attribute("data-nba-agent", "written by the agent, turn 1")
    actions = page.evaluate("""() => window.jupyterapp.shell.currentWidget.content.model.cells.get(1)
        .sharedModel.getMetadata().nbagent.actions""")
    assert [(a["action"], a["turn"], a["approved_by"]) for a in actions] == [("inserted", 0, "user")]
    assert actions[0]["call_id"] == card.get_attribute("data-call-id") and actions[0]["model"] == "demo"


def kernel_holds_the_prompt(page, nb, index):
    run_cell(page, index)
    out = cell(page, nb, index).locator(".jp-OutputArea-output")
    expect(out).to_contain_text(PROMPT)
    expect(out).to_contain_text("[Attached notebook variables: @sales]")
    expect(out).to_contain_text("- revenue: int64, 6 of 6 non-null")  # describe_variable(sales) went along


def chat_code_replaces_its_cell(page, nb, index):
    """``%chat_code`` run as a cell puts the code the agent ran in its own place, under a
    ``%%chat_run`` line; running that cell again runs nothing and says so."""
    count = page.locator(f"{nb} .jp-Notebook .jp-Cell").count()
    run_cell(page, index - 1)  # %load_ext nbagent
    run_cell(page, index)
    expect(cell(page, nb, index).locator(".jp-OutputArea-output")).to_contain_text(
        "this cell now holds 1 piece of code the agent ran (turn 1)")
    expect(cell(page, nb, index).locator(".cm-content")).to_contain_text(CODE, use_inner_text=True)
    expect(cell(page, nb, index).locator(".cm-content")).to_contain_text("%%chat_run call=", use_inner_text=True)
    expect(page.locator(f"{nb} .jp-Notebook .jp-Cell")).to_have_count(count)  # no copy added
    run_cell(page, index)
    expect(cell(page, nb, index).locator(".jp-OutputArea-output")).to_contain_text("⏸ not run: code the agent ran in turn 1")


def agent_flow(page, nb, tmp_path, label):
    """The whole flow on an open notebook of CELLS (see the module doc)."""
    expect.set_options()  # every wait is generous (Playwright's default is 5 s)
    try:
        _flow(page, nb, tmp_path, label)
    finally:
        expect.set_options(timeout=5_000)


def _flow(page, nb, tmp_path, label):
    run_cell(page, 0)
    chat = f"{nb} .nba-chat"
    expect(page.locator(chat)).to_be_visible()
    ask_with_mention(page, chat)
    card = approve_code(page, chat)
    shot(page, chat, f"notebook-agent-chat-{label}.png", tmp_path)  # the chat at the turn's end
    shot(page, f"{chat} .nba-tool[data-status='done']", f"notebook-agent-{label}.png", tmp_path)  # scrolls the card into view
    insert_below(page, nb, card)
    kernel_holds_the_prompt(page, nb, 2)
    chat_code_replaces_its_cell(page, nb, 4)
    errors = [e for e in page.errors if "nba" in e or "nbagent" in e or "widget" in e.lower()]
    assert not errors, errors
