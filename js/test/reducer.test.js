import { test } from "node:test";
import assert from "node:assert/strict";
import { initialState, apply, transcript, undeclaredField } from "../src/reducer.js";

const user = { step_index: 0, source: "USER", target: "UNSPECIFIED", type: "TEXT_RESPONSE", status: "DONE", content: "hi" };
const model = (status, content, thinking = "") => ({ step_index: 1, source: "MODEL", target: "USER", type: "TEXT_RESPONSE", status, content, thinking });
const bare = (step) => { const { content, thinking, ...rest } = step; return { ...rest, n: [(content || "").length, (thinking || "").length] }; };
const rec = (status) => ({ turn: 0, prompt: "hi", status, usage: {} });
/** A flush with patches and no text. @param {any[]} patches */
const flush = (...patches) => ({ type: "deltas", items: [], patches });
/** The running turn's structure as the kernel patches it (turn_codec.TurnBuffer.patch): steps
 * without their text (it comes as deltas). @param {any} record @param {any[]} steps */
const patch = (record, steps, ended = false) => flush({ turn: record.turn, record,
  steps: steps.map((st) => { const { content, thinking, n, ...rest } = st; return ended ? { ...rest, n: n || [(content || "").length, (thinking || "").length] } : rest; }), ended });
/** A running turn: its patch, then the text its steps already have, as deltas. */
const running = (steps, record = rec("running")) => {
  let s = apply(initialState(), patch(record, steps));
  s = apply(s, { type: "deltas", items: steps.flatMap((st) => [[st.step_index, "c", 0, st.content || ""], [st.step_index, "t", 0, st.thinking || ""]]) });
  return apply(s, { type: "traits", running: true });
};

test("deltas append in order at their offsets, duplicates and overlaps are dropped", () => {
  let s = running([user, model("ACTIVE", "")]);
  s = apply(s, { type: "deltas", items: [[1, "t", 0, "hmm "], [1, "c", 0, "Hel"]] });
  s = apply(s, { type: "deltas", items: [[1, "c", 3, "lo"], [1, "c", 0, "He"], [1, "c", 4, "o wor"], [1, "t", 4, "ok"]] });
  const st = s.turns[0].steps[1];
  assert.equal(st.content, "Hello wor");
  assert.equal(st.thinking, "hmm ok");
  assert.equal(s.gap, false);
});

test("a resync's whole finished step wins; the turn's end (an ended patch) keeps the streamed text", () => {
  let s = running([user, model("ACTIVE", "")]);
  s = apply(s, { type: "deltas", items: [[1, "c", 0, "final text"]] });
  s = apply(s, flush({ turn: 0, record: { status: "done" }, steps: [{ step_index: 0, n: [2, 0] }, { step_index: 1, status: "DONE", n: [10, 0] }], ended: true }));
  s = apply(s, { type: "traits", running: false, finished: 1 });
  assert.equal(s.turns[0].done, true);
  assert.equal(s.turns[0].record.prompt, "hi"); // the fields the patch did not name stay
  assert.equal(s.gap, false); // the text came as deltas or whole
  s = apply(s, { type: "turns", first: true, turns: [{ record: rec("done"), steps: [user, model("DONE", "final text")] }] });
  assert.deepEqual(transcript(s), [{ turn: 0, status: "done", steps: [
    { step_index: 0, status: "DONE", content: "hi", thinking: "" },
    { step_index: 1, status: "DONE", content: "final text", thinking: "" }] }]);
  assert.equal(s.running, false);
  assert.equal(s.gap, false);
});

test("a patch names only what changed: other fields and the text stay, a null field goes", () => {
  let s = running([user, { ...model("ACTIVE", "ab"), preparing_tool: "calc" }]);
  const before = s.turns[0];
  s = apply(s, flush({ turn: 0, record: null, steps: [{ step_index: 1, preparing_tool: null, notice: "retrying" }] }));
  const st = s.turns[0].steps[1];
  assert.equal(st.content, "ab");
  assert.equal(st.notice, "retrying");
  assert.equal("preparing_tool" in st, false);
  assert.equal(st.source, "MODEL");
  assert.equal(s.turns[0].steps[0], before.steps[0]); // an unchanged step keeps its identity
  assert.equal(s.turns[0].record, before.record);
  s = apply(s, flush({ turn: 0, record: null, steps: [{ step_index: 1, content: "stale", status: "DONE" }] }));
  assert.equal(s.turns[0].steps[1].content, "ab"); // text comes as deltas only
});

test("an ended turn's bare step longer than the text here is a gap; a late patch of an ended turn is ignored", () => {
  let s = apply(initialState(), patch(rec("running"), [user, model("ACTIVE", "")]));
  s = apply(s, flush({ turn: 0, record: null, steps: [{ step_index: 0, n: [2, 0] }, { step_index: 1, n: [3, 0] }], ended: true }));
  assert.equal(s.gap, true);
  s = apply(s, { type: "deltas", items: [[0, "c", 0, "hi"], [1, "c", 0, "abc"]] });
  assert.equal(s.gap, false);
  s = apply(s, { type: "deltas", items: [[1, "c", 3, "def"]] });
  s = apply(s, flush({ turn: 0, record: { status: "done" }, steps: [{ step_index: 1, status: "DONE", n: [6, 0] }], ended: true }));
  const ended = s.turns[0];
  s = apply(s, flush({ turn: 0, record: { status: "running" }, steps: [{ step_index: 1, status: "ACTIVE" }] }));
  assert.equal(s.turns[0], ended);
  assert.equal(ended.steps[1].content, "abcdef");
  assert.equal(ended.steps[1].status, "DONE");
  assert.equal(s.gap, false);
});

test("a patch of a step never seen here is a gap (the view asks for a resync)", () => {
  let s = running([user]);
  s = apply(s, flush({ turn: 0, record: null, steps: [{ step_index: 5, status: "DONE" }] }));
  assert.equal(s.gap, true);
  s = apply(s, { type: "turns", first: true, last: true, turns: [{ record: rec("running"), steps: [user] }] });
  assert.equal(s.gap, false);
});

test("more finished turns than the view has is a gap; the resync's pages fill it", () => {
  let s = apply(initialState(), { type: "traits", running: false, finished: 2 });
  assert.equal(s.gap, true);
  const r1 = { ...rec("done"), turn: 1 };
  s = apply(s, { type: "turns", first: true, last: false, turns: [{ record: rec("done"), steps: [user] }] });
  assert.equal(s.gap, true);
  s = apply(s, { type: "turns", first: false, last: true, turns: [{ record: r1, steps: [{ ...user, step_index: 1 }] }] });
  assert.deepEqual(s.turns.map((t) => t.turn), [0, 1]);
  assert.equal(s.gap, false);
});

test("a replacing delta rewrites the text from its offset", () => {
  let s = running([user, model("ACTIVE", "long text")]);
  s = apply(s, { type: "deltas", items: [[1, "c", 0, "short", true]] });
  assert.equal(s.turns[0].steps[1].content, "short");
});

test("deltas that run ahead of their step's patch wait for it (no duplicate, no gap)", () => {
  let s = running([user]);
  s = apply(s, { type: "deltas", items: [[1, "c", 0, "hello"], [1, "c", 5, " world"]] });
  assert.equal(s.gap, true);
  s = apply(s, flush({ turn: 0, record: null, steps: [bare(model("ACTIVE", "hello"))] }));
  assert.equal(s.turns[0].steps[1].content, "hello world");
  assert.equal(s.gap, false);
  assert.equal(s.turns[0].steps.length, 2);
});

test("a new turn's deltas wait for its patch and land in it", () => {
  let s = apply(initialState(), { type: "turns", first: true, turns: [{ record: rec("done"), steps: [user, model("DONE", "old")] }] });
  s = apply(s, { type: "deltas", items: [[3, "c", 0, "new"]] });
  const r1 = { turn: 1, prompt: "again", status: "running", usage: {} };
  s = apply(s, flush({ turn: 1, record: r1, steps: [bare({ ...user, step_index: 2 }), bare({ ...model("ACTIVE", "new"), step_index: 3 })] }));
  s = apply(s, { type: "deltas", items: [[2, "c", 0, "hi"]] });
  assert.deepEqual(s.turns.map((t) => t.steps.map((x) => x.step_index)), [[0, 1], [2, 3]]);
  assert.equal(s.turns[1].steps[1].content, "new");
  assert.equal(s.gap, false);
});
test("unchanged turns and steps keep their identity (cheap re-render)", () => {
  const hist = [{ record: rec("done"), steps: [user, model("DONE", "x")] }];
  const s1 = apply(initialState(), { type: "turns", first: true, turns: hist });
  const s2 = apply(s1, { type: "turns", first: true, turns: JSON.parse(JSON.stringify(hist)) });
  assert.equal(s2.turns[0], s1.turns[0]);
  const s3 = apply(s2, flush({ turn: 1, record: { ...rec("running"), turn: 1 }, steps: [] }));
  assert.equal(s3.turns[0], s1.turns[0]);
  assert.equal(apply(s3, { type: "deltas", items: [] }), s3);
});
test("cleared: a resync with no turns empties the transcript", () => {
  let s = apply(initialState(), { type: "turns", first: true, turns: [{ record: rec("done"), steps: [user] }] });
  s = apply(s, { type: "turns", first: true, last: true, turns: [] });
  assert.deepEqual(s.turns, []);
});

test("a dead kernel ends the running turn as interrupted and stays dead through later patches", () => {
  let s = running([user, model("ACTIVE", "half")]);
  s = apply(s, { type: "dead", reason: "Kernel restarted — re-run this cell to continue." });
  assert.equal(s.running, false);
  assert.match(s.dead, /re-run this cell/);
  assert.equal(s.turns[0].record.status, "interrupted");
  assert.equal(s.turns[0].record.lost, true);
  assert.equal(s.turns[0].steps[1].content, "half"); // the transcript stays readable
  const again = apply(s, { type: "dead", reason: "other" });
  assert.equal(again, s);
  s = apply(s, flush({ turn: 0, record: { status: "running" }, steps: [] }));
  s = apply(s, { type: "traits", running: true });
  assert.equal(s.running, false);
  assert.equal(s.turns[0].record.status, "interrupted");
  assert.ok(s.dead);
});

test("a refused prompt is counted (even with the same notice twice)", () => {
  let s = apply(initialState(), { type: "refused", text: "Nothing sent: the message is empty." });
  s = apply(s, { type: "refused", text: "Nothing sent: the message is empty." });
  assert.equal(s.refusals, 2);
  assert.equal(s.notice, "Nothing sent: the message is empty.");
});

test("the next turn's first deltas, ahead of its patch, never land in the finished turn", () => {
  // the widget's own box: the kernel flushes the new turn's first deltas just before the patch
  // that announces the turn; they used to become a step of the previous turn (a ghost thought)
  const done = { record: rec("done"), steps: [user, model("DONE", "old", "thought one")] };
  let s = apply(initialState(), { type: "turns", first: true, turns: [done] });
  s = apply(s, { type: "traits", running: false, finished: 1 });
  const before = s.turns[0];
  s = apply(s, { type: "deltas", items: [[2, "c", 0, "again"], [3, "t", 0, "The user asked: "]] });
  assert.equal(s.turns.length, 1);
  assert.equal(s.turns[0], before); // untouched: no step 3 in turn 0
  const r1 = { turn: 1, prompt: "again", status: "running", usage: {} };
  s = apply(s, flush({ turn: 1, record: r1, steps: [bare({ ...user, step_index: 2, content: "again" }), bare({ ...model("ACTIVE", "", "The user asked: "), step_index: 3 })] }));
  s = apply(s, { type: "traits", running: true, finished: 1 });
  assert.deepEqual(s.turns.map((t) => t.steps.map((x) => x.step_index)), [[0, 1], [2, 3]]);
  assert.equal(s.turns[1].steps[1].thinking, "The user asked: "); // the early delta applied to its own turn
  assert.equal(s.turns[1].steps[0].content, "again");
  assert.equal(s.gap, false);
});

test("one flush carries a new turn's structure and its first text: it shows at once, without a gap", () => {
  const done = { record: rec("done"), steps: [user, model("DONE", "old")] };
  let s = apply(initialState(), { type: "turns", first: true, turns: [done] });
  const r1 = { turn: 1, status: "running" };
  s = apply(s, { type: "deltas", items: [[2, "c", 0, "again"], [3, "c", 0, "Hel"]],
    patches: [{ turn: 1, record: r1, steps: [bare({ ...user, step_index: 2, content: "" }), bare({ ...model("ACTIVE", ""), step_index: 3 })].map(({ n, ...st }) => st) }] });
  assert.equal(s.turns[1].steps[1].content, "Hel");
  assert.deepEqual(s.pending, []);
  assert.equal(s.gap, false);
  s = apply(s, { type: "deltas", items: [[3, "c", 3, "lo"]],
    patches: [{ turn: 1, record: { status: "done" }, steps: [{ step_index: 2, n: [5, 0] }, { step_index: 3, status: "DONE", n: [5, 0] }], ended: true }] });
  assert.equal(s.turns[1].done, true);
  assert.equal(s.turns[1].steps[1].content, "Hello");
  assert.equal(s.gap, false);
});

test("a new turn's record starts with the turn before's model; its end makes it done and its active steps done unless it says otherwise", () => {
  const done = { record: { ...rec("done"), model: "m1", provider: "p" }, steps: [user, model("DONE", "old")] };
  let s = apply(initialState(), { type: "turns", first: true, turns: [done] });
  s = apply(s, { type: "deltas", items: [[2, "c", 0, "again"], [3, "c", 0, "Hi"]],
    patches: [{ turn: 1, steps: [[2, "prompt"], { step_index: 3, kind: "model_call" }] }] }); // [index, kind]: a new step all its kind says
  const t1 = s.turns[1];
  assert.equal(t1.record.model, "m1"); // as the turn before: the patch did not say otherwise
  assert.equal(t1.record.provider, "p");
  assert.equal(t1.record.status, "running");
  assert.equal(t1.steps[1].status, "ACTIVE");
  assert.equal(t1.steps[1].model, "m1"); // a model call's model is the record's
  assert.deepEqual([t1.steps[0].kind, t1.steps[0].status, t1.steps[0].source, t1.steps[0].content], ["prompt", "DONE", "USER", "again"]);
  s = apply(s, { type: "deltas", items: [[3, "c", 2, "!"]], patches: [{ turn: 1, record: { duration: 1.5 }, ended: true }] });
  const end = s.turns[1];
  assert.equal(end.done, true);
  assert.deepEqual([end.record.status, end.record.finish_reason, end.record.duration], ["done", "STOP", 1.5]);
  assert.deepEqual(end.steps.map((x) => x.status), ["DONE", "DONE"]);
  assert.equal(end.steps[1].content, "Hi!");
  assert.equal(s.gap, false);
  // a failed turn: the end names what differs (its record's status and reason, a step left active)
  s = apply(s, { type: "deltas", items: [[4, "c", 0, "x"]], patches: [{ turn: 2, record: { model: "m2" }, steps: [{ step_index: 4, kind: "prompt" }, { step_index: 5, kind: "model_call" }] }] });
  assert.equal(s.turns[2].record.model, "m2");
  s = apply(s, flush({ turn: 2, record: { status: "error", finish_reason: null, error: "boom" }, steps: [{ step_index: 5, status: "ACTIVE" }], ended: true }));
  const failed = s.turns[2];
  assert.deepEqual([failed.record.status, "finish_reason" in failed.record, failed.record.error], ["error", false, "boom"]);
  assert.deepEqual(failed.steps.map((x) => x.status), ["DONE", "ACTIVE"]);
});

test("a kernel message with a field its declaration lacks is dropped, as the schema rejects it", () => {
  assert.equal(undeclaredField({ type: "deltas", items: [], patches: [], state: {} }), "");
  assert.equal(undeclaredField({ type: "deltas", items: [], extra: 1 }), "extra");
  assert.equal(undeclaredField({ type: "no_such_event" }), "type");
  assert.equal(undeclaredField(null), "type");
});
