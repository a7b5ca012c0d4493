// The widget's reach into the notebook: a code tool's card (code highlighted), `@name`
// autocomplete logic, and inserting a cell below the widget's cell through the host.
import { test } from "node:test";
import assert from "node:assert/strict";
import { codeOf, CODE_TOOLS } from "../src/render/toolcard.js";
import { highlight, registerGrammars } from "../src/markdown.js";
import * as grammars from "../src/grammars.js";
import { mentionAt, matchNames, pickMention, parseNames } from "../src/mention.js";
import { widgetIdsOf, chooseCell, domCellIndex, notebookHost } from "../src/host.js";

test("a run_python call's code is shown as Python; other calls keep their plain arguments", () => {
  const code = "df = sales.head()\nprint('<script>x</script>')";
  assert.deepEqual(codeOf({ name: "run_python", args: { code } }), { code, language: "python", rest: {} });
  assert.deepEqual(codeOf({ name: "run_python", args: JSON.stringify({ code, timeout: 5 }) }),
    { code, language: "python", rest: { timeout: 5 } });
  assert.equal(codeOf({ name: "calculator", args: { code } }), null);
  assert.equal(codeOf({ name: "run_python", args: { code: 42 } }), null);
  assert.equal(codeOf({ name: "run_python", args: "not json" }), null);
  assert.equal(codeOf({ name: "toString", args: { code } }), null); // only the mapping's own names
  assert.deepEqual(Object.keys(CODE_TOOLS), ["run_python"]);
  assert.doesNotMatch(highlight(code, "python"), /hljs-/); // plain until the grammars module arrives
  registerGrammars(grammars);
  const html = highlight(code, codeOf({ name: "run_python", args: { code } }).language);
  assert.match(html, /<span class="hljs-built_in">print<\/span>/);
  assert.ok(html.includes("&lt;script&gt;") && !html.includes("<script>")); // code is text, never markup
});

test("a mention is an @ at a word start, up to the caret", () => {
  assert.deepEqual(mentionAt("look at @sa", 11), { start: 8, query: "sa" });
  assert.deepEqual(mentionAt("@", 1), { start: 0, query: "" });
  assert.deepEqual(mentionAt("(@df_1", 6), { start: 1, query: "df_1" });
  assert.deepEqual(mentionAt("look at @sales and", 11), { start: 8, query: "sa" }); // caret inside the word
  assert.equal(mentionAt("mail me@example", 15), null); // an email, not a mention
  assert.equal(mentionAt("look at @sales now", 18), null);
  assert.equal(mentionAt("@1abc", 5), null);
});

test("names starting with the query come first, exact case before other case, then names containing it", () => {
  const names = parseNames([["Sales", "DataFrame"], ["resale", "list"], ["sales", "DataFrame"], ["sa", "int"],
    ["x", "int"], [3, "bad"], "bad", ["", "empty"], ["noType"]]);
  assert.deepEqual(names.map((v) => v.name), ["Sales", "resale", "sales", "sa", "x", "noType"]);
  assert.deepEqual(names.at(-1), { name: "noType", type: "" });
  assert.deepEqual(matchNames(names, "sa").map((v) => v.name), ["sales", "sa", "Sales", "resale"]);
  assert.deepEqual(matchNames(names, "").map((v) => v.name), ["Sales", "resale", "sales", "sa", "x", "noType"]);
  assert.deepEqual(matchNames(names, "zz"), []);
  assert.equal(matchNames(names, "", 2).length, 2);
  assert.deepEqual(parseNames(null), []);
});

test("picking a name completes the mention and puts the caret after it", () => {
  assert.deepEqual(pickMention("look at @sa", 8, 11, "sales"), { text: "look at @sales ", caret: 15 });
  assert.deepEqual(pickMention("look at @sa please", 8, 11, "sales"), { text: "look at @sales please", caret: 15 });
  assert.deepEqual(pickMention("@salXX!", 0, 4, "sales"), { text: "@sales !", caret: 7 }); // the word the caret was in
});

/** A shared notebook model as JupyterLab 4 has it (cells with getOutputs; insertCell). */
function fakeNotebook(outputsPerCell) {
  const inserted = [];
  const cells = outputsPerCell.map((ids) => ({ cell_type: ids === null ? "markdown" : "code",
    getOutputs: () => (ids || []).map((id) => ({ output_type: "display_data",
      data: { "application/vnd.jupyter.widget-view+json": { model_id: id, version_major: 2 }, "text/plain": "x" } })) }));
  const shared = { cells, insertCell: (index, cell) => inserted.push([index, cell]) };
  const models = { ours: "k1", ours2: "k1", other: "k2" }; // model id -> its _key
  const manager = { context: { model: { sharedModel: shared } },
    get_model: async (id) => { if (!(id in models)) throw new Error("no such model"); return { get: () => models[id] }; } };
  return { inserted, model: { widget_manager: manager, get: (name) => (name === "_key" ? "k1" : undefined) } };
}
const at = (index) => ({ closest: () => ({ dataset: { windowedListIndex: String(index) } }) });
const nowhere = { closest: () => null };

test("Insert as cell below puts a code cell right under the cell showing this widget", async () => {
  const nb = fakeNotebook([[], null, ["gone-kernel", "ours"], ["other"], []]);
  const host = notebookHost(nb.model);
  assert.ok(host);
  assert.equal(await host.insertBelow(nowhere, "print(1)"), 3);
  assert.deepEqual(nb.inserted, [[3, { cell_type: "code", source: "print(1)", metadata: {} }]]);
});

test("a widget shown in two cells inserts under the one that was clicked; unknown cells are an error", async () => {
  const nb = fakeNotebook([["ours"], [], ["ours2"]]);
  const host = notebookHost(nb.model);
  assert.equal(await host.insertBelow(at(2), "x"), 3);
  assert.equal(await host.insertBelow(at(0), "x"), 1);
  await assert.rejects(host.insertBelow(nowhere, "x"), /not found/);
  await assert.rejects(notebookHost(fakeNotebook([["other"]]).model).insertBelow(nowhere, "x"), /not found/);
  assert.deepEqual(chooseCell([4], 7), 4);
  assert.deepEqual(chooseCell([], 7), -1);
  assert.deepEqual(widgetIdsOf({ cell_type: "raw" }), []);
});

test("hosts without a notebook (VS Code, marimo, static HTML, a console) get no Insert", () => {
  assert.equal(notebookHost({ get: () => "k" }), null); // no widget manager (marimo)
  assert.equal(notebookHost({ widget_manager: {}, get: () => "k" }), null); // no document context (VS Code, HTML)
  assert.equal(notebookHost({ widget_manager: { context: { model: null } }, get: () => "k" }), null);
  const throwing = { get widget_manager() { throw new Error("no"); }, get: () => "k" };
  assert.equal(notebookHost(throwing), null);
});

test("the clicked view's cell index comes from the windowed list or the cell's place among its siblings", () => {
  assert.equal(domCellIndex(at(5)), 5);
  assert.equal(domCellIndex(nowhere), -1);
  const cell = { dataset: {}, classList: { contains: () => true } };
  const other = { dataset: {}, classList: { contains: (c) => c === "jp-Cell" } };
  const header = { classList: { contains: () => false } };
  cell.parentElement = { children: [header, other, cell] };
  assert.equal(domCellIndex({ closest: () => cell }), 1);
});
