// The session browser's filters and the chat's rebinding reset (pure parts; the DOM is tested in
// JupyterLab by tests/test_session_browser_browser.py).
import { test } from "node:test";
import assert from "node:assert/strict";
import { filterSessions, distinct, shortModel, shortModels } from "../src/browser/filter.js";
import { resetViews } from "../src/sessions.js";
import { shortDate, replayView, replayKey, NEXT_KEYS } from "../src/sessionbar.js";
import { apply, initialState } from "../src/reducer.js";

const ROWS = [
  { path: "/s/b.json", title: "Plot the sales data", models: "openai:gpt-4.1, anthropic:claude", user: "ann", error: "" },
  { path: "/s/a.json", title: "Second chat", models: "demo:demo", user: "ben", error: "" },
  { path: "/s/broken.json", title: "", models: "", user: "", error: "damaged: not JSON" },
];

test("text filters titles, case-insensitively; an unreadable file by its name", () => {
  assert.deepEqual(filterSessions(ROWS, { text: "SALES" }).map((r) => r.path), ["/s/b.json"]);
  assert.deepEqual(filterSessions(ROWS, { text: "broken" }).map((r) => r.path), ["/s/broken.json"]);
  assert.equal(filterSessions(ROWS, { text: "  " }).length, 3); // blank: everything, in order
  assert.deepEqual(filterSessions(ROWS, { text: "chat" }).map((r) => r.path), ["/s/a.json"]);
});

test("the kernel's full-text matches add to the title matches", () => {
  const paths = new Set(["/s/a.json"]);
  assert.deepEqual(filterSessions(ROWS, { text: "sales", paths }).map((r) => r.path), ["/s/b.json", "/s/a.json"]);
});

test("model and user select exact values; a model is any of a session's models", () => {
  assert.deepEqual(filterSessions(ROWS, { model: "anthropic:claude" }).map((r) => r.path), ["/s/b.json"]);
  assert.deepEqual(filterSessions(ROWS, { model: "anthropic" }), []); // not a prefix match
  assert.deepEqual(filterSessions(ROWS, { user: "ben" }).map((r) => r.path), ["/s/a.json"]);
  assert.deepEqual(filterSessions(ROWS, { user: "ben", model: "openai:gpt-4.1" }), []);
});

test("the selects offer each model and user once, unreadable rows left out", () => {
  assert.deepEqual(distinct(ROWS, "models"), ["anthropic:claude", "demo:demo", "openai:gpt-4.1"]);
  assert.deepEqual(distinct(ROWS, "user"), ["ann", "ben"]);
});

test("dates show as local YYYY-MM-DD HH:MM; missing or bad ones as nothing", () => {
  assert.match(shortDate("2026-12-01T16:20:00+00:00"), /^2026-12-0[12] \d\d:\d\d$/);
  assert.equal(shortDate(null), "");
  assert.equal(shortDate("not a date"), "");
});

test("a rebound widget's views forget the old conversation's turns", () => {
  const removed = [];
  const turnViews = new Map([[0, { el: { remove: () => removed.push(0) } }], [1, { el: { remove: () => removed.push(1) } }]]);
  const store = { state: apply(initialState(), { type: "turns", first: true, turns: [{ record: { turn: 0 }, steps: [] }] }), views: new Set([{ turns: turnViews }]) };
  assert.equal(store.state.turns.length, 1);
  resetViews(store);
  assert.deepEqual(store.state, initialState());
  assert.deepEqual(removed, [0, 1]);
  assert.equal(turnViews.size, 0);
});

test("the browser labels a model by its name when the provider repeats it", () => {
  assert.equal(shortModel("demo:demo"), "demo");
  assert.equal(shortModel("openai:gpt-4.1"), "openai:gpt-4.1");
  assert.equal(shortModel("replay:demo"), "replay:demo");
  assert.equal(shortModels("demo:demo, openai:gpt-4.1"), "demo, openai:gpt-4.1");
});

// A replay's counter, Next and mismatch notice (the `replay` trait: protocol ReplayState).
const REPLAY = { type: "replay", step: 2, steps: 5, waiting: true, mismatch: false, recorded_prompt: "", prompt: "",
  live: "", live_unavailable: "", live_turn: false, stepping: true, waits: 3 };

test("no replay: nothing of the replay shows", () => {
  for (const r of [null, undefined, {}]) assert.deepEqual(replayView(r), { show: false, stepping: false, counter: "", canNext: false, nextTitle: "", notice: null });
  assert.equal(replayView({ ...REPLAY, stepping: false }).stepping, false); // no step=True: the counter, no Next
});

test("the counter says how many recorded steps have played, of all", () => {
  const v = replayView(REPLAY);
  assert.equal(v.counter, "step 2 of 5");
  assert.ok(v.show && v.canNext && !v.notice);
  assert.match(v.nextTitle, /→ or Space/);
  assert.match(v.nextTitle, /← cannot go back/);
  assert.equal(replayView({ ...REPLAY, step: 0, waiting: false }).counter, "step 0 of 5");
  assert.equal(replayView({ ...REPLAY, step: 9 }).counter, "step 5 of 5"); // never past the end
  assert.equal(replayView({ ...REPLAY, live_turn: true, waiting: false }).counter, "step 2 of 5 · answering live");
  assert.equal(NEXT_KEYS, "ArrowRight Space");
});

test("Next plays only while the replay waits, once per wait, and says why not", () => {
  assert.equal(replayView(REPLAY, true).canNext, false); // pressed: not again until the next wait
  const idle = replayView({ ...REPLAY, waiting: false });
  assert.ok(!idle.canNext && /type the next prompt/.test(idle.nextTitle));
  const done = replayView({ ...REPLAY, step: 5, waiting: false });
  assert.ok(!done.canNext && /no more steps/.test(done.nextTitle));
});

test("a differing prompt shows the notice, and Next waits for the choice", () => {
  const m = { ...REPLAY, waiting: false, mismatch: true, recorded_prompt: "Weather in Paris?", prompt: "And Rome?",
    live: "demo:demo" };
  const v = replayView(m);
  assert.ok(!v.canNext && /Choose first/.test(v.nextTitle));
  assert.deepEqual(v.notice, { text: "This prompt differs from the recorded one. The recording answers “Weather in Paris?”.",
    liveLabel: "Answer live (demo:demo)", liveUnavailable: "" });
  const none = replayView({ ...m, live: "", live_unavailable: "no live model: make the agent with live=..." });
  assert.equal(none.notice?.liveLabel, "Answer live");
  assert.match(none.notice?.liveUnavailable || "", /no live model/);
});

/** A stand-in element: `closest` answers from the selectors it matches. @param {string[]} matches */
const el = (...matches) => ({ closest: (/** @type {string} */ sel) => (sel.split(",").some((s) => matches.includes(s.trim().split(":")[0])) ? {} : null) });

test("→ and Space are the replay's only outside text fields; ← is taken (it does nothing)", () => {
  const next = el("button");
  const list = el();
  assert.equal(replayKey({ key: "ArrowRight" }, next, next), "next");
  assert.equal(replayKey({ key: " " }, next, next), "next");
  assert.equal(replayKey({ key: " " }, list, next), "next"); // the transcript has the keyboard
  assert.equal(replayKey({ key: "ArrowLeft" }, next, next), "back");
  assert.equal(replayKey({ key: " " }, el("button"), next), ""); // Space on another button clicks that button
  for (const field of ["input", "textarea", "[contenteditable]"]) {
    assert.equal(replayKey({ key: "ArrowRight" }, el(field), next), "", field); // typing: the caret moves
    assert.equal(replayKey({ key: " " }, el(field), next), "", field);
  }
  assert.equal(replayKey({ key: "ArrowRight", shiftKey: true }, next, next), ""); // a selection, not a step
  assert.equal(replayKey({ key: "ArrowRight", ctrlKey: true }, next, next), "");
  assert.equal(replayKey({ key: "Enter" }, next, next), "");
});
