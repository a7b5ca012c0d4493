import { test } from "node:test";
import assert from "node:assert/strict";
import { initialState, apply, transcript } from "../src/reducer.js";

const user = { step_index: 0, source: "USER", target: "UNSPECIFIED", type: "TEXT_RESPONSE", status: "DONE", content: "hi" };
const model = (status, content, thinking = "") => ({ step_index: 1, source: "MODEL", target: "USER", type: "TEXT_RESPONSE", status, content, thinking });
const bare = (step) => { const { content, thinking, ...rest } = step; return { ...rest, n: [(content || "").length, (thinking || "").length] }; };
const rec = (status) => ({ turn: 0, prompt: "hi", status, usage: {} });

test("deltas append in order at their offsets, duplicates and overlaps are dropped", () => {
  let s = apply(initialState(), { type: "traits", current: { record: rec("running"), steps: [user, model("ACTIVE", "")] }, running: true });
  s = apply(s, { type: "deltas", items: [[1, "t", 0, "hmm "], [1, "c", 0, "Hel"]] });
  s = apply(s, { type: "deltas", items: [[1, "c", 3, "lo"], [1, "c", 0, "He"], [1, "c", 4, "o wor"], [1, "t", 4, "ok"]] });
  const st = s.turns[0].steps[1];
  assert.equal(st.content, "Hello wor");
  assert.equal(st.thinking, "hmm ok");
  assert.equal(s.gap, false);
});

test("a resync's whole finished step wins; the turn's end (bare) keeps the streamed text", () => {
  let s = apply(initialState(), { type: "traits", current: { record: rec("running"), steps: [user, model("ACTIVE", "")] }, running: true });
  s = apply(s, { type: "deltas", items: [[1, "c", 0, "final text"]] });
  s = apply(s, { type: "turn", turn: { record: rec("done"), steps: [bare(user), bare(model("DONE", "final text"))] } });
  s = apply(s, { type: "traits", current: null, running: false, finished: 1 });
  assert.equal(s.gap, false); // the text came as deltas or whole
  s = apply(s, { type: "turns", first: true, turns: [{ record: rec("done"), steps: [user, model("DONE", "final text")] }] });
  assert.deepEqual(transcript(s), [{ turn: 0, status: "done", steps: [
    { step_index: 0, status: "DONE", content: "hi", thinking: "" },
    { step_index: 1, status: "DONE", content: "final text", thinking: "" }] }]);
  assert.equal(s.running, false);
  assert.equal(s.gap, false);
});

test("a bare step longer than the text here is a gap; a late sync of an ended turn is ignored", () => {
  let s = apply(initialState(), { type: "traits", current: { record: rec("running"), steps: [bare(user), bare(model("ACTIVE", "abc"))] }, running: true });
  assert.equal(s.gap, true);
  s = apply(s, { type: "deltas", items: [[0, "c", 0, "hi"], [1, "c", 0, "abc"]] });
  assert.equal(s.gap, false);
  s = apply(s, { type: "deltas", items: [[1, "c", 3, "def"]] });
  s = apply(s, { type: "turn", turn: { record: rec("done"), steps: [bare(user), bare(model("DONE", "abcdef"))] } });
  const ended = s.turns[0];
  s = apply(s, { type: "traits", current: { record: rec("running"), steps: [bare(user), bare(model("ACTIVE", "abc"))] }, running: true, finished: 0 });
  assert.equal(s.turns[0], ended);
  assert.equal(ended.steps[1].content, "abcdef");
  assert.equal(ended.steps[1].status, "DONE");
  assert.equal(s.gap, false);
});

test("more finished turns than the view has is a gap; the resync's pages fill it", () => {
  let s = apply(initialState(), { type: "traits", current: null, running: false, finished: 2 });
  assert.equal(s.gap, true);
  const r1 = { ...rec("done"), turn: 1 };
  s = apply(s, { type: "turns", first: true, last: false, turns: [{ record: rec("done"), steps: [user] }] });
  assert.equal(s.gap, true);
  s = apply(s, { type: "turns", first: false, last: true, turns: [{ record: r1, steps: [{ ...user, step_index: 1 }] }] });
  assert.deepEqual(s.turns.map((t) => t.turn), [0, 1]);
  assert.equal(s.gap, false);
});

test("a replacing delta rewrites the text from its offset", () => {
  let s = apply(initialState(), { type: "traits", current: { record: rec("running"), steps: [user, model("ACTIVE", "long text")] }, running: true });
  s = apply(s, { type: "deltas", items: [[1, "c", 0, "short", true]] });
  assert.equal(s.turns[0].steps[1].content, "short");
});

test("while a step streams, local text ahead of an older sync is kept", () => {
  let s = apply(initialState(), { type: "traits", current: { record: rec("running"), steps: [user, model("ACTIVE", "ab")] }, running: true });
  s = apply(s, { type: "deltas", items: [[1, "c", 2, "cdef"]] });
  s = apply(s, { type: "traits", current: { record: rec("running"), steps: [user, model("ACTIVE", "abc")] }, running: true });
  assert.equal(s.turns[0].steps[1].content, "abcdef");
});

test("deltas that run ahead of their step's sync wait for it (no duplicate, no gap)", () => {
  let s = apply(initialState(), { type: "traits", history: [], current: { record: rec("running"), steps: [user] }, running: true });
  s = apply(s, { type: "deltas", items: [[1, "c", 5, " world"]] });
  assert.equal(s.gap, true);
  s = apply(s, { type: "traits", current: { record: rec("running"), steps: [user, model("ACTIVE", "hello")] }, running: true });
  assert.equal(s.turns[0].steps[1].content, "hello world");
  assert.equal(s.gap, false);
  assert.equal(s.turns[0].steps.length, 2);
});

test("a new turn's deltas wait for its sync and land in it", () => {
  let s = apply(initialState(), { type: "turns", first: true, turns: [{ record: rec("done"), steps: [user, model("DONE", "old")] }] });
  s = apply(s, { type: "deltas", items: [[3, "c", 0, "new"]] });
  const r1 = { turn: 1, prompt: "again", status: "running", usage: {} };
  s = apply(s, { type: "traits", current: { record: r1, steps: [{ ...user, step_index: 2 }, bare({ ...model("ACTIVE", "new"), step_index: 3 })] }, running: true, finished: 1 });
  assert.deepEqual(s.turns.map((t) => t.steps.map((x) => x.step_index)), [[0, 1], [2, 3]]);
  assert.equal(s.turns[1].steps[1].content, "new");
  assert.equal(s.gap, false);
});
test("unchanged turns and steps keep their identity (cheap re-render)", () => {
  const hist = [{ record: rec("done"), steps: [user, model("DONE", "x")] }];
  const s1 = apply(initialState(), { type: "turns", first: true, turns: hist });
  const s2 = apply(s1, { type: "turns", first: true, turns: JSON.parse(JSON.stringify(hist)) });
  assert.equal(s2.turns[0], s1.turns[0]);
  const s3 = apply(s2, { type: "traits", current: { record: { ...rec("running"), turn: 1 }, steps: [] }, running: true, finished: 1 });
  assert.equal(s3.turns[0], s1.turns[0]);
  assert.equal(apply(s3, { type: "deltas", items: [] }), s3);
});
test("cleared: a resync with no turns empties the transcript", () => {
  let s = apply(initialState(), { type: "turns", first: true, turns: [{ record: rec("done"), steps: [user] }] });
  s = apply(s, { type: "turns", first: true, last: true, turns: [] });
  assert.deepEqual(s.turns, []);
});
test("an unchanged trait object is not merged again, a changed local turn is", () => {
  const live = { record: rec("running"), steps: [user, model("ACTIVE", "ab")] };
  let s = apply(initialState(), { type: "traits", current: live, running: true });
  const t0 = s.turns[0];
  s = apply(s, { type: "traits", current: live, running: true, notice: "x" });
  assert.equal(s.turns[0], t0);
  s = apply(s, { type: "deltas", items: [[1, "c", 2, "cd"]] });
  s = apply(s, { type: "traits", current: live, running: true });
  assert.equal(s.turns[0].steps[1].content, "abcd");
});

test("a dead kernel ends the running turn as interrupted and stays dead through later syncs", () => {
  let s = apply(initialState(), { type: "traits", current: { record: rec("running"), steps: [user, model("ACTIVE", "half")] }, running: true });
  s = apply(s, { type: "dead", reason: "Kernel restarted — re-run this cell to continue." });
  assert.equal(s.running, false);
  assert.match(s.dead, /re-run this cell/);
  assert.equal(s.turns[0].record.status, "interrupted");
  assert.equal(s.turns[0].record.lost, true);
  assert.equal(s.turns[0].steps[1].content, "half"); // the transcript stays readable
  const again = apply(s, { type: "dead", reason: "other" });
  assert.equal(again, s);
  s = apply(s, { type: "traits", current: { record: rec("running"), steps: [user, model("ACTIVE", "half")] }, running: true });
  assert.equal(s.running, false);
  assert.ok(s.dead);
});

test("a refused prompt is counted (even with the same notice twice)", () => {
  let s = apply(initialState(), { type: "refused", text: "Nothing sent: the message is empty." });
  s = apply(s, { type: "refused", text: "Nothing sent: the message is empty." });
  assert.equal(s.refusals, 2);
  assert.equal(s.notice, "Nothing sent: the message is empty.");
});

test("the next turn's first deltas, ahead of its sync, never land in the finished turn", () => {
  // the widget's own box: the kernel flushes the new turn's first deltas just before the trait
  // that announces the turn; they used to become a step of the previous turn (a ghost thought)
  const done = { record: rec("done"), steps: [user, model("DONE", "old", "thought one")] };
  let s = apply(initialState(), { type: "turns", first: true, turns: [done] });
  s = apply(s, { type: "traits", running: false, finished: 1 });
  const before = s.turns[0];
  s = apply(s, { type: "deltas", items: [[2, "c", 0, "again"], [3, "t", 0, "The user asked: "]] });
  assert.equal(s.turns.length, 1);
  assert.equal(s.turns[0], before); // untouched: no step 3 in turn 0
  const r1 = { turn: 1, prompt: "again", status: "running", usage: {} };
  s = apply(s, { type: "traits", running: true, finished: 1,
    current: { record: r1, steps: [bare({ ...user, step_index: 2, content: "again" }), bare({ ...model("ACTIVE", "", "The user asked: "), step_index: 3 })] } });
  assert.deepEqual(s.turns.map((t) => t.steps.map((x) => x.step_index)), [[0, 1], [2, 3]]);
  assert.equal(s.turns[1].steps[1].thinking, "The user asked: "); // the early delta applied to its own turn
  assert.equal(s.turns[1].steps[0].content, "again");
  assert.equal(s.gap, false);
});