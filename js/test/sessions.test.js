// The session browser's filters and the chat's rebinding reset (pure parts; the DOM is tested in
// JupyterLab by tests/test_session_browser_browser.py).
import { test } from "node:test";
import assert from "node:assert/strict";
import { filterSessions, distinct, shortModel, shortModels } from "../src/browser/filter.js";
import { resetViews } from "../src/sessions.js";
import { shortDate } from "../src/sessionbar.js";
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
