// The live notebook's front-end side (src/live.js) on a stand-in of the shared notebook model:
// requests applied by cell id, stale edits refused, @cell references, outputs as short text,
// the "written by the agent" label; the cell tools' diff (src/diff.js, toolcard.js).
import { test } from "node:test";
import assert from "node:assert/strict";
import { applyRequest, cellRefs, resolveCellRefs, outputsText, agentLabel, Refused, runCell } from "../src/live.js";
import { lineDiff } from "../src/diff.js";
import { cellDiff, cellWhere } from "../src/render/toolcard.js";

/** A YNotebook-like model: cells with ids, sources, metadata; insertCell / deleteCell / transact. */
function notebook(sources) {
  let n = 0;
  const cell = (source, metadata = {}) => {
    const c = { id: `c${++n}`, cell_type: "code", execution_count: null, src: source, meta: metadata, outs: [],
      getSource() { return this.src; }, setSource(s) { this.src = s; }, getMetadata() { return this.meta; },
      setMetadata(m) { this.meta = m; }, getOutputs() { return this.outs; } };
    return c;
  };
  const shared = { cells: sources.map((s) => cell(s)), transact(fn) { fn(); },
    insertCell(index, { source, metadata }) { const c = cell(source, metadata); this.cells.splice(index, 0, c); return c; },
    deleteCell(index) { this.cells.splice(index, 1); } };
  return shared;
}
const where = (chat = 0) => ({ chatIndex: () => chat, activeId: () => "c2", path: "w.ipynb" });

test("a read gives every cell by id with its source, outputs and metadata, and the chat's and active cell", () => {
  const nb = notebook(["agent", "1 / 0"]);
  nb.cells[1].outs = [{ output_type: "error", ename: "ZeroDivisionError", evalue: "division by zero", traceback: [] }];
  nb.cells[1].execution_count = 2;
  const read = applyRequest(nb, { op: "read" }, where());
  assert.deepEqual(read.cells.map((c) => [c.id, c.index, c.source, c.execution_count]), [["c1", 0, "agent", null], ["c2", 1, "1 / 0", 2]]);
  assert.equal(read.cells[1].outputs[0].ename, "ZeroDivisionError");
  assert.deepEqual([read.chat_cell_id, read.active_cell_id, read.path], ["c1", "c2", "w.ipynb"]);
});

test("an edit lands on the cell it names only while its source is what was read", () => {
  const nb = notebook(["agent", "1 / 0"]);
  const meta = { nbagent: { actions: [{ action: "edited", turn: 1 }] } };
  const done = applyRequest(nb, { op: "set_source", cell_id: "c2", source: "1 / 1", expected_source: "1 / 0", metadata: meta }, where());
  assert.equal(done.source, "1 / 1");
  assert.deepEqual(nb.cells[1].getMetadata(), meta);
  assert.throws(() => applyRequest(nb, { op: "set_source", cell_id: "c2", source: "x", expected_source: "1 / 0" }, where()),
    (e) => e instanceof Refused && e.kind === "tool" && /changed since it was read/.test(e.message));
  assert.throws(() => applyRequest(nb, { op: "set_source", cell_id: "gone", source: "x", expected_source: "" }, where()), /no cell with id "gone"/);
  assert.equal(nb.cells[1].getSource(), "1 / 1"); // nothing overwritten by the refusals
});

test("an insert goes after the named cell, else after the chat's cell; a delete checks the source", () => {
  const nb = notebook(["agent", "x"]);
  assert.equal(applyRequest(nb, { op: "insert", source: "new" }, where(0)).index, 1);
  assert.equal(applyRequest(nb, { op: "insert", source: "last", after: "c2" }, where(0)).index, 3);
  assert.deepEqual(nb.cells.map((c) => c.getSource()), ["agent", "new", "x", "last"]);
  assert.throws(() => applyRequest(nb, { op: "delete", cell_id: "c3", expected_source: "other" }, where()), /changed/);
  applyRequest(nb, { op: "delete", cell_id: "c3", expected_source: "new" }, where());
  assert.deepEqual(nb.cells.map((c) => c.getSource()), ["agent", "x", "last"]);
  assert.throws(() => applyRequest(nb, { op: "drop_table" }, where()), (e) => e.kind === "protocol");
});

test("add_action appends to the cell's record once", () => {
  const nb = notebook(["x"]);
  const action = { action: "inserted", turn: 0, call_id: "call_5", at: 1 };
  applyRequest(nb, { op: "add_action", cell_id: "c1", action }, where());
  applyRequest(nb, { op: "add_action", cell_id: "c1", action }, where()); // a second chat widget on the page
  assert.deepEqual(nb.cells[0].getMetadata().nbagent.actions, [action]);
  assert.equal(agentLabel(nb.cells[0].getMetadata()), "written by the agent, turn 1"); // conv.turns counts from 0, people from 1
  assert.equal(agentLabel({ nbagent: { actions: [{ action: "ran", turn: 3 }] } }), ""); // ran, not written
  assert.equal(agentLabel({}), "");
  assert.equal(agentLabel({ nbagent: { actions: [{ action: "edited", turn: 2, author: "Claude Code 2.1.7" }] } }),
    "written by Claude Code 2.1.7, turn 3"); // an outside agent (nbagent.serve) names itself; recorded turn 2 is the third
});

test("add_action replaces a record that is a string or a list (#48.5)", () => {
  const action = { action: "ran", turn: 1, call_id: "call_6", at: 2 };
  for (const bad of ["spoofed", ["a", "list"], 7]) {
    const nb = notebook(["x"]);
    nb.cells[0].meta = { nbagent: bad, tags: ["keep"] };
    applyRequest(nb, { op: "add_action", cell_id: "c1", action }, where());
    const saved = JSON.parse(JSON.stringify(nb.cells[0].getMetadata())); // as the notebook file will hold it
    assert.deepEqual(saved, { nbagent: { actions: [action] }, tags: ["keep"] });
  }
});

test("@cell and @cell:N are found (an email is not) and resolved 1-based, an unknown number said so", () => {
  assert.deepEqual(cellRefs("fix @cell and compare @cell:2, not me@cell.org or @cell:2 again"),
    [{ ref: "@cell", number: null }, { ref: "@cell:2", number: 2 }]);
  assert.deepEqual(cellRefs("@cellar is a name"), []);
  const nb = notebook(["a", "b = 1 / 0"]);
  const [active, second, missing] = resolveCellRefs("@cell @cell:2 @cell:7", nb, 0);
  assert.deepEqual([active.ref, active.number, active.source], ["@cell", 1, "a"]);
  assert.deepEqual([second.id, second.number, second.source], ["c2", 2, "b = 1 / 0"]);
  assert.equal(missing.error, "there is no cell 7 (the notebook has 2)");
});

test("outputs become short text: tracebacks without colour codes, images named, long text cut", () => {
  const text = outputsText([{ output_type: "stream", text: ["hi\n"] },
    { output_type: "error", ename: "E", evalue: "v", traceback: ["\x1b[0;31mZeroDivisionError\x1b[0m: division by zero"] },
    { output_type: "display_data", data: { "image/png": "AAAA", "text/plain": "<Figure>" } }]);
  assert.equal(text, "hi\n\nZeroDivisionError: division by zero\n[image/png]");
  assert.ok(outputsText([{ output_type: "stream", text: "x".repeat(5000) }]).endsWith("(3000 more characters)"));
});

test("the cell tools' diff: removed and added lines around the kept ones", () => {
  assert.deepEqual(lineDiff("a\nb = 1 / 0\nc\n", "a\nb = 1 / 1\nc"), [[" ", "a"], ["-", "b = 1 / 0"], ["+", "b = 1 / 1"], [" ", "c"]]);
  assert.deepEqual(lineDiff("", "x"), [["+", "x"]]);
  const edit = { name: "edit_cell", args: { cell_id: "c2", source: "y" } };
  assert.deepEqual(cellDiff(edit, null, "x").diff, [["-", "x"], ["+", "y"]]);
  assert.deepEqual(cellDiff({ name: "insert_cell", args: { source: "y" } }, null, "ignored").diff, [["+", "y"]]);
  const preview = { diff: [["-", "k"], ["+", "kernel's"]], problem: "stale", cut: false };
  assert.deepEqual(cellDiff(edit, { preview }, "x"), { diff: preview.diff, problem: "stale", cut: false }); // the kernel's wins
});

test("an insert_cell card says when the new cell is markdown (#48.10)", () => {
  const env = { preview: { position: 3 } };
  assert.equal(cellWhere({ name: "insert_cell", args: { source: "# Notes", cell_type: "markdown" } }, env), "new markdown cell (cell 3)");
  assert.equal(cellWhere({ name: "insert_cell", args: JSON.stringify({ source: "x", cell_type: "raw" }) }, null), "new raw cell");
  assert.equal(cellWhere({ name: "insert_cell", args: { source: "x = 1" } }, env), "new cell (cell 3)");
  assert.equal(cellWhere({ name: "insert_cell", args: { source: "x", cell_type: "<b>odd</b>" } }, env), "new cell (cell 3)");
  assert.equal(cellWhere({ name: "edit_cell", args: { cell_id: "c2", source: "y" } }, env), "cell c2 (cell 3)");
});

/** A kernel connection stand-in: requestExecute plays the given iopub messages, then the reply. */
function kernel(messages, reply) {
  const sent = [];
  return { sent, requestExecute(content, dispose, metadata) {
    sent.push({ content, metadata });
    const future = { onIOPub: null, done: Promise.resolve().then(() => {
      for (const [type, c] of messages) future.onIOPub({ header: { msg_type: type }, content: c });
      return { content: reply };
    }) };
    return future;
  } };
}

test("run executes the cell through the kernel: its outputs replaced, its execution count from the reply", async () => {
  const nb = notebook(["agent", "print('a'); print('b'); 42"]);
  nb.cells[1].outs = [{ output_type: "error", ename: "KeyError", evalue: "'revnue'", traceback: [] }];
  nb.cells[1].execution_count = 3;
  nb.cells[1].setOutputs = function (o) { this.outs = o; };
  const k = kernel([["status", { execution_state: "busy" }], ["stream", { name: "stdout", text: "a\n" }],
    ["stream", { name: "stdout", text: "b\n" }], ["execute_result", { data: { "text/plain": "42" }, metadata: {}, execution_count: 4 }]],
  { status: "ok", execution_count: 4 });
  const done = await applyRequest(nb, { op: "run", cell_id: "c2", expected_source: "print('a'); print('b'); 42" }, { ...where(), kernel: () => k });
  assert.equal(k.sent[0].content.code, "print('a'); print('b'); 42");
  assert.equal(k.sent[0].content.store_history, true);
  assert.deepEqual(nb.cells[1].outs.map((o) => o.output_type), ["stream", "execute_result"]);
  assert.equal(nb.cells[1].outs[0].text, "a\nb\n");
  assert.equal(nb.cells[1].execution_count, 4);
  assert.deepEqual([done.execution_count, done.status, done.outputs.length], [4, "ok", 2]);
});

test("run refuses a changed cell, a markdown cell and a notebook without a kernel, and runs nothing", async () => {
  const nb = notebook(["x = 1"]);
  const k = kernel([], { status: "ok", execution_count: 1 });
  await assert.rejects(runCell(nb, { cell_id: "c1", expected_source: "x = 2" }, k), /changed since it was read/);
  await assert.rejects(runCell(nb, { cell_id: "c1", expected_source: "x = 1" }, null), (e) => e.kind === "config");
  nb.cells[0].cell_type = "markdown";
  await assert.rejects(runCell(nb, { cell_id: "c1" }, k), /not a code cell/);
  assert.equal(k.sent.length, 0);
});

test("an error output comes back with the run; clear_output(wait) empties the outputs at the next one", async () => {
  const nb = notebook(["boom"]);
  nb.cells[0].setOutputs = function (o) { this.outs = o; };
  const k = kernel([["stream", { name: "stdout", text: "old" }], ["clear_output", { wait: true }],
    ["error", { ename: "NameError", evalue: "name 'boom' is not defined", traceback: ["NameError"] }]], { status: "error", execution_count: 7 });
  const done = await runCell(nb, { cell_id: "c1", expected_source: "boom" }, k);
  assert.deepEqual(done.outputs.map((o) => o.output_type), ["error"]);
  assert.equal(done.status, "error");
  assert.equal(nb.cells[0].execution_count, 7);
});

test("an edit whose metadata drops a key (an undo taking the agent's record away) deletes it from the shared cell", () => {
  const nb = notebook(["x = 2"]);
  const c = nb.cells[0];
  c.meta = { tags: ["keep"], nbagent: { actions: [{ action: "edited", turn: 0 }] } };
  c.setMetadata = function (m) { this.meta = { ...this.meta, ...m }; }; // YCell's setMetadata(object) only sets keys
  c.deleteMetadata = function (k) { const m = { ...this.meta }; delete m[k]; this.meta = m; };
  applyRequest(nb, { op: "set_source", cell_id: "c1", source: "x = 1", expected_source: "x = 2", metadata: { tags: ["keep"] } }, where());
  assert.deepEqual(c.getMetadata(), { tags: ["keep"] });
  c.meta = { nbagent: {}, other: 1 };
  applyRequest(nb, { op: "set_metadata", cell_id: "c1", metadata: { other: 2 } }, where());
  assert.deepEqual(c.getMetadata(), { other: 2 });
});
