// The tool card as a person meets it (#48's rough edges): built in node on a small fake DOM.
import { test } from "node:test";
import assert from "node:assert/strict";
import { installFakeDom, allElements, visibleText } from "./support/fake_dom.js";

const document = installFakeDom();
const { ToolCard, badgeText, runningSeconds, errorForPeople } = await import("../src/render/toolcard.js");

const EDIT = { id: "e1", name: "edit_cell", args: { cell_id: "broken", source: "total + 2" } };
const STALE = "cell [3] id=broken changed since read_notebook returned it (the user edited it?); nothing was changed: " +
  "call read_notebook again and redo the edit on its new source";

/** A card inside a chat, as the view puts it. @param {any} call */
function cardIn(call) {
  const card = new ToolCard(call, () => true);
  const chat = document.createElement("div");
  chat.className = "nba-chat";
  chat.append(card.el);
  return card;
}

/** @param {string} text @param {string} part */
const count = (text, part) => text.split(part).length - 1;

test("a refused stale edit says so once in the card, without the exception's class or kind", () => {
  const card = cardIn(EDIT);
  const preview = { diff: [["-", "total + revnue"], ["+", "total + 2"]], problem: `[tool] ${STALE}`, position: 3 };
  card.update(EDIT, { status: "WAITING_FOR_USER", approval: "pending", preview }, 0);
  assert.equal(count(visibleText(card.el), "changed since read_notebook returned it"), 1); // warned before Approve
  card.update(EDIT, { status: "ERROR", approval: "approved", preview, error: `ToolError: [tool] ${STALE}`,
    content: `ToolError: [tool] ${STALE}` }, 0);
  const shown = visibleText(card.el);
  assert.equal(count(shown, "changed since read_notebook returned it"), 1, shown);
  assert.doesNotMatch(shown, /ToolError|\[tool\]|call read_notebook/); // the model's instruction is not the person's
  assert.match(shown, /nothing was changed \(the agent is told to read the notebook again\)/);
  assert.match(shown, /Not applied/);
});

test("a Python error keeps its class; only nbagent's own class and kind tag go", () => {
  assert.equal(errorForPeople("ZeroDivisionError: division by zero"), "ZeroDivisionError: division by zero");
  assert.equal(errorForPeople("ToolError: [tool] no cell has id 'x'"), "no cell has id 'x'");
  assert.equal(errorForPeople("[io] cannot write x"), "cannot write x");
});

test("a tool stopped while it ran says for how long; one canceled before it ran says canceled", () => {
  assert.equal(badgeText({ status: "CANCELED", approval: "approved", run_seconds: 2.7 }), "stopped after 2.7 s");
  assert.equal(badgeText({ status: "CANCELED", approval: "auto", run_seconds: 0.42 }), "stopped after 420 ms");
  assert.equal(badgeText({ status: "CANCELED", approval: "canceled", run_seconds: 5 }), "canceled");
  assert.equal(badgeText({ status: "DONE", approval: "auto" }), "done");
  const card = cardIn({ id: "c1", name: "run_python", args: { code: "slow()" } });
  card.update({ id: "c1", name: "run_python", args: { code: "slow()" } },
    { status: "CANCELED", approval: "approved", run_seconds: 2.7, content: "The user stopped this tool call while it ran (after 2.7 s); it did not finish." });
  assert.equal(card.badge.textContent, "stopped after 2.7 s");
});

test("a running tool shows its elapsed time, ticking, and the clock stops when it ends", () => {
  assert.equal(runningSeconds({ status: "ACTIVE", created_at: 100, decided_at: 104 }, 107.5), 3.5); // from Approve
  assert.equal(runningSeconds({ status: "ACTIVE", created_at: 100 }, 101), 1);
  assert.equal(runningSeconds({ status: "DONE", created_at: 100, decided_at: 104 }, 107), null);
  const call = { id: "c1", name: "run_python", args: { code: "slow()" } };
  const card = cardIn(call);
  const now = Date.now() / 1000;
  card.update(call, { status: "ACTIVE", approval: "auto", created_at: now - 5, decided_at: now - 5 });
  assert.match(card.dur.textContent, /^5\.\d s$/);
  assert.ok(card.ticker, "a clock ticks while it runs");
  card.update(call, { status: "DONE", approval: "auto", created_at: now - 5, decided_at: now - 5, run_seconds: 6.25, content: "ok" });
  assert.equal(card.ticker, null);
  assert.equal(card.dur.textContent, "6.25 s");
});

test("a result box that scrolls can be focused and is labelled (axe: scrollable-region-focusable)", () => {
  const frames = /** @type {Function[]} */ ([]);
  const g = /** @type {any} */ (globalThis);
  const raf = g.requestAnimationFrame;
  g.requestAnimationFrame = (/** @type {Function} */ fn) => frames.push(fn);
  try {
    const call = { id: "c2", name: "list_variables", args: {} };
    const card = cardIn(call);
    card.update(call, { status: "DONE", approval: "auto", content: "line\n".repeat(200), run_seconds: 0.1 });
    const out = allElements(card.el).find((el) => el.className === "nba-tool-out");
    out.scrollHeight = 3000; out.clientHeight = 200; // taller than its box: it scrolls
    frames.splice(0).forEach((fn) => fn());
    assert.equal(out.getAttribute("tabindex"), "0");
    assert.equal(out.getAttribute("role"), "region");
    assert.equal(out.getAttribute("aria-label"), "Result of list_variables");
    const short = cardIn({ id: "c3", name: "now", args: {} });
    short.update({ id: "c3", name: "now", args: {} }, { status: "DONE", approval: "auto", content: "12:00", run_seconds: 0.1 });
    frames.splice(0).forEach((fn) => fn());
    const box = allElements(short.el).find((el) => el.className === "nba-tool-out");
    assert.equal(box.getAttribute("tabindex"), null); // no extra Tab stop where nothing scrolls
  } finally {
    g.requestAnimationFrame = raf;
  }
});

test("after Approve of a cell edit the keyboard lands on Undo", () => {
  document.activeElement = document.body;
  const card = cardIn(EDIT);
  const preview = { diff: [["-", "a"], ["+", "total + 2"]], problem: "", position: 3 };
  card.update(EDIT, { status: "WAITING_FOR_USER", approval: "pending", preview }, 0);
  assert.equal(document.activeElement, card.approve);
  card.approve.click(); // sends approve; the kernel answers with the run and the result
  card.update(EDIT, { status: "ACTIVE", approval: "approved", preview }, 0);
  document.activeElement = document.body; // the browser drops focus from the hidden Approve
  card.update(EDIT, { status: "DONE", approval: "approved", preview, content: "Edited cell [3]", run_seconds: 0.1 }, 0);
  assert.equal(document.activeElement, card.undoBtn);
  assert.equal(card.undoBtn.getAttribute("aria-label"), "Undo the edit of cell broken");
  // a reloaded page draws the applied edit again but leaves the keyboard where it was
  document.activeElement = document.body;
  const again = cardIn(EDIT);
  again.update(EDIT, { status: "DONE", approval: "approved", preview, content: "Edited cell [3]", run_seconds: 0.1 }, 0);
  assert.equal(document.activeElement, document.body);
});

test("the turn a person reads starts at 1: 'written by the agent, turn 1' for conv.turns' turn 0", () => {
  const card = cardIn(EDIT);
  card.update(EDIT, { status: "DONE", approval: "approved", content: "Edited", run_seconds: 0.1,
    preview: { diff: [["+", "x"]], problem: "", position: 3 } }, 0);
  assert.match(visibleText(card.el), /written by the agent, turn 1\b/);
});
