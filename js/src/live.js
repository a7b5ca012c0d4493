// The live notebook for the kernel (nbagent/notebook/live_notebook.py): the kernel's requests
// ({"type": "notebook", "id", "op", ...}) are applied to the shared notebook model that
// ../host.js reaches, and answered with the same id. Cells are named by their nbformat id;
// every write names the source it expects to replace, and a cell whose source is no longer that
// is refused (kind "tool"), so an edit never lands on text the model did not read.
//
// Also here: `@cell` / `@cell:N` references in the chat box (the cells sent with the prompt),
// the cell the user last worked in (the "active" cell: the chat's own cell is never it), and the
// "written by the agent, turn N" label on cells whose metadata records an agent action.

const OUTPUT_TEXT_MAX = 2000; // characters of a cell's outputs sent with an @cell reference
export const CELL_REF = /(^|[^\w@.])@cell(?::(\d+))?(?![\w:])/g; // @cell, @cell:5 (not an email)

/** A cell's source as a string. @param {any} cell */
function sourceOf(cell) {
  if (typeof cell.getSource === "function") return cell.getSource();
  const s = cell.source;
  return Array.isArray(s) ? s.join("") : String(s ?? "");
}

/** A cell as the kernel reads it. @param {any} cell @param {number} index */
export function cellJson(cell, index) {
  const outputs = cell.cell_type === "code" && typeof cell.getOutputs === "function" ? cell.getOutputs() : [];
  const metadata = typeof cell.getMetadata === "function" ? cell.getMetadata() : (cell.metadata || {});
  return { id: cell.id, index, cell_type: cell.cell_type, source: sourceOf(cell),
    execution_count: cell.cell_type === "code" ? (cell.execution_count ?? null) : null,
    outputs: JSON.parse(JSON.stringify(outputs || [])), metadata: JSON.parse(JSON.stringify(metadata || {})) };
}

/** A refusal the kernel raises as an NbagentError of `kind`. */
export class Refused extends Error {
  /** @param {string} message @param {string} [kind] */
  constructor(message, kind = "tool") { super(message); this.kind = kind; }
}

/** The index of the cell with this id, or a refusal. @param {any} shared @param {string} id */
function indexOf(shared, id) {
  const index = shared.cells.findIndex((/** @type {any} */ c) => c.id === id);
  if (index < 0) throw new Refused(`no cell with id ${JSON.stringify(id)} in the notebook (deleted?)`);
  return index;
}

/** Refuse a cell whose source is not what the writer read. @param {any} cell @param {any} expected */
function checkSource(cell, expected) {
  if (typeof expected === "string" && sourceOf(cell) !== expected) {
    throw new Refused(`cell ${cell.id} changed since it was read (the user edited it); read the notebook again`);
  }
}

/** Replace a cell's whole metadata: the shared model's setMetadata(object) only sets keys, so the
 * keys the new metadata lacks (an undone edit's `nbagent` record) are deleted first.
 * @param {any} cell @param {any} metadata */
function replaceMetadata(cell, metadata) {
  if (typeof cell.deleteMetadata === "function" && typeof cell.getMetadata === "function") {
    for (const key of Object.keys(cell.getMetadata() || {})) if (!(key in metadata)) cell.deleteMetadata(key);
  }
  cell.setMetadata(metadata);
}

/** Apply one kernel request to the notebook; the answer's `result`.
 * @param {any} shared @param {any} msg @param {{chatIndex: () => number, activeId: () => string|null, path: string, kernel?: () => any}} where */
export function applyRequest(shared, msg, where) {
  switch (msg.op) {
    case "read": {
      const chat = where.chatIndex();
      return { cells: shared.cells.map(cellJson), path: where.path || null, active_cell_id: where.activeId(),
        chat_cell_id: chat >= 0 && shared.cells[chat] ? shared.cells[chat].id : null };
    }
    case "set_source": {
      const index = indexOf(shared, msg.cell_id);
      const cell = shared.cells[index];
      checkSource(cell, msg.expected_source);
      shared.transact(() => {
        cell.setSource(String(msg.source ?? ""));
        if (msg.metadata && typeof msg.metadata === "object") replaceMetadata(cell, msg.metadata);
      });
      return cellJson(cell, index);
    }
    case "insert": {
      let index;
      if (typeof msg.after === "string" && msg.after) index = indexOf(shared, msg.after) + 1;
      else { const chat = where.chatIndex(); index = chat >= 0 ? chat + 1 : shared.cells.length; }
      const kind = ["code", "markdown", "raw"].includes(msg.cell_type) ? msg.cell_type : "code";
      const cell = shared.insertCell(index, { cell_type: kind, source: String(msg.source ?? ""), metadata: msg.metadata || {} });
      return cellJson(cell || shared.cells[index], index);
    }
    case "delete": {
      const index = indexOf(shared, msg.cell_id);
      checkSource(shared.cells[index], msg.expected_source);
      shared.deleteCell(index);
      return null;
    }
    case "set_metadata": {
      const cell = shared.cells[indexOf(shared, msg.cell_id)];
      shared.transact(() => replaceMetadata(cell, msg.metadata || {}));
      return null;
    }
    case "add_action": { // a CellAction appended to the cell's record (nbagent/notebook/provenance.py)
      const cell = shared.cells[indexOf(shared, msg.cell_id)];
      const metadata = JSON.parse(JSON.stringify(typeof cell.getMetadata === "function" ? cell.getMetadata() : cell.metadata || {}));
      const nbagent = metadata.nbagent; // a record that is a string or a list is replaced, never written into
      const record = nbagent && typeof nbagent === "object" && !Array.isArray(nbagent) ? nbagent : {};
      const actions = Array.isArray(record.actions) ? record.actions : [];
      const same = (/** @type {any} */ a) => a && msg.action && a.call_id === msg.action.call_id && a.at === msg.action.at;
      if (actions.some(same)) return null; // two chat widgets of one kernel on the page: recorded once
      record.actions = [...actions, msg.action];
      metadata.nbagent = record;
      cell.setMetadata(metadata);
      return null;
    }
    case "run": // the cell executed by the page, as if the user ran it: its answer comes when it ends
      return runCell(shared, msg, where.kernel ? where.kernel() : null);
    default:
      throw new Refused(`unknown notebook request ${JSON.stringify(msg.op)}`, "protocol");
  }
}

// --- running a cell as the user would --------------------------------------------------------

/** One iopub message folded into a cell's outputs (nbformat JSON), as an output area does:
 * stream text joins the stream before it of the same name; clear_output empties them (at once,
 * or at the next output with `wait`). @param {any[]} outputs @param {any} msg @param {{wait: boolean}} clear */
export function addOutput(outputs, msg, clear) {
  const type = msg.header && msg.header.msg_type;
  const content = msg.content || {};
  if (type === "clear_output") {
    if (content.wait) clear.wait = true; else outputs.length = 0;
    return;
  }
  if (!["stream", "display_data", "execute_result", "error"].includes(type)) return;
  if (clear.wait) { outputs.length = 0; clear.wait = false; }
  const last = outputs[outputs.length - 1];
  if (type === "stream" && last && last.output_type === "stream" && last.name === content.name) {
    last.text += String(content.text ?? "");
    return;
  }
  if (type === "stream") outputs.push({ output_type: "stream", name: content.name, text: String(content.text ?? "") });
  else if (type === "error") outputs.push({ output_type: "error", ename: content.ename, evalue: content.evalue, traceback: content.traceback || [] });
  else {
    const out = { output_type: type, data: content.data || {}, metadata: content.metadata || {} };
    if (type === "execute_result") out.execution_count = content.execution_count ?? null;
    outputs.push(out);
  }
}

/** Run a code cell through the notebook's kernel connection, as Shift+Enter does: its outputs
 * replaced as they come, its execution count set from the reply, in the kernel's queue. The
 * cell answers when the execution ends (the kernel's reply), with its outputs.
 * @param {any} shared @param {any} msg @param {any} kernel the kernel connection, or null */
export async function runCell(shared, msg, kernel) {
  const cell = shared.cells[indexOf(shared, msg.cell_id)];
  if (cell.cell_type !== "code") throw new Refused(`cell ${cell.id} is not a code cell`);
  checkSource(cell, msg.expected_source);
  if (!kernel || typeof kernel.requestExecute !== "function") throw new Refused("the notebook has no kernel to run the cell in", "config");
  /** @type {any[]} */
  const outputs = [];
  const clear = { wait: false };
  const show = () => { if (typeof cell.setOutputs === "function") cell.setOutputs(JSON.parse(JSON.stringify(outputs))); };
  shared.transact(() => {
    if (typeof cell.setOutputs === "function") cell.setOutputs([]);
    cell.execution_count = null;
    if ("executionState" in cell) cell.executionState = "running";
  });
  const future = kernel.requestExecute({ code: sourceOf(cell), silent: false, store_history: true, allow_stdin: false,
    stop_on_error: true }, true, { cellId: cell.id });
  future.onIOPub = (/** @type {any} */ m) => { const n = outputs.length; addOutput(outputs, m, clear); if (n || outputs.length) show(); };
  let reply;
  try { reply = await future.done; } catch (err) { reply = { content: { status: "abort", error: String(err) } }; }
  const content = (reply && reply.content) || {};
  const index = shared.cells.findIndex((/** @type {any} */ c) => c.id === cell.id); // moved or deleted meanwhile
  shared.transact(() => {
    show();
    if (Number.isInteger(content.execution_count)) cell.execution_count = content.execution_count;
    if ("executionState" in cell) cell.executionState = "idle";
  });
  if (index < 0) throw new Refused(`cell ${msg.cell_id} was deleted while it ran`);
  return { ...cellJson(cell, index), status: String(content.status || "ok") };
}

// --- the cell the user works in --------------------------------------------------------------

/** @type {WeakMap<Element, Element>} */
const lastCell = new WeakMap(); // notebook node -> the .jp-Cell the user last clicked or typed in

/** Remember, per notebook, the last cell the user worked in that is not a chat's cell.
 * @param {Element} notebookNode @returns {() => void} */
export function watchActiveCell(notebookNode) {
  const note = (/** @type {Event} */ e) => {
    const cell = /** @type {Element|null} */ (e.target instanceof Element ? e.target.closest(".jp-Cell") : null);
    if (cell && !cell.querySelector(".nba-chat")) lastCell.set(notebookNode, cell);
  };
  notebookNode.addEventListener("focusin", note, true);
  notebookNode.addEventListener("mousedown", note, true);
  return () => { notebookNode.removeEventListener("focusin", note, true); notebookNode.removeEventListener("mousedown", note, true); };
}

/** The index of a DOM cell in its notebook. @param {Element} cell */
function domIndexOf(cell) {
  const windowed = Number.parseInt(/** @type {HTMLElement} */ (cell).dataset.windowedListIndex || "", 10);
  if (Number.isInteger(windowed) && windowed >= 0) return windowed;
  const parent = cell.parentElement;
  return parent ? [...parent.children].filter((c) => c.classList.contains("jp-Cell")).indexOf(cell) : -1;
}

/** The active cell's index: the last cell the user worked in, else the selected one (when it
 * is not the chat's), else the cell above the chat's. @param {Element|null} notebookNode @param {number} chat */
export function activeIndex(notebookNode, chat) {
  const remembered = notebookNode ? lastCell.get(notebookNode) : null;
  if (remembered && remembered.isConnected) return domIndexOf(remembered);
  const selected = notebookNode ? notebookNode.querySelector(".jp-Cell.jp-mod-active") : null;
  if (selected && !selected.querySelector(".nba-chat")) return domIndexOf(selected);
  return chat > 0 ? chat - 1 : -1;
}

// --- @cell references ------------------------------------------------------------------------

/** The @cell references in a prompt: [{ref, number}] (number null: the active cell; 1-based).
 * @param {string} prompt */
export function cellRefs(prompt) {
  /** @type {{ref: string, number: number|null}[]} */
  const refs = [];
  for (const m of prompt.matchAll(CELL_REF)) {
    const ref = m[2] ? `@cell:${m[2]}` : "@cell";
    if (!refs.some((r) => r.ref === ref)) refs.push({ ref, number: m[2] ? Number(m[2]) : null });
  }
  return refs;
}

/** A cell's outputs as short text: streams and results trimmed, errors with their traceback
 * (colour codes removed), images and HTML as one line naming their type. @param {any[]} outputs */
export function outputsText(outputs) {
  const parts = [];
  for (const out of outputs || []) {
    if (out.output_type === "stream") parts.push(Array.isArray(out.text) ? out.text.join("") : String(out.text || ""));
    else if (out.output_type === "error") {
      // eslint-disable-next-line no-control-regex
      const tb = (out.traceback || []).join("\n").replace(/\x1b\[[0-9;]*m/g, "");
      parts.push(tb || `${out.ename}: ${out.evalue}`);
    } else if (out.data) {
      const text = out.data["text/plain"];
      const kinds = Object.keys(out.data).filter((k) => k !== "text/plain");
      if (kinds.length && (kinds.some((k) => k.startsWith("image/")) || !text)) parts.push(`[${kinds.join(", ")}]`);
      else if (text != null) parts.push(Array.isArray(text) ? text.join("") : String(text));
    }
  }
  const all = parts.join("\n");
  return all.length > OUTPUT_TEXT_MAX ? `${all.slice(0, OUTPUT_TEXT_MAX)}\n… (${all.length - OUTPUT_TEXT_MAX} more characters)` : all;
}

/** The cells a prompt's @cell references name, as the kernel attaches them (unknown numbers
 * give `error`). @param {string} prompt @param {any} shared @param {number} active */
export function resolveCellRefs(prompt, shared, active) {
  return cellRefs(prompt).map(({ ref, number }) => {
    const index = number == null ? active : number - 1;
    const cell = index >= 0 ? shared.cells[index] : null;
    if (!cell) {
      return { ref, error: number == null ? "no active cell" : `there is no cell ${number} (the notebook has ${shared.cells.length})` };
    }
    const json = cellJson(cell, index);
    return { ref, id: json.id, number: index + 1, cell_type: json.cell_type, source: json.source,
      execution_count: json.execution_count, outputs: outputsText(json.outputs) };
  });
}

// --- "written by the agent" labels -----------------------------------------------------------

/** The label of a cell whose metadata records agent actions ("" when none). @param {any} metadata */
export function agentLabel(metadata) {
  const actions = metadata && metadata.nbagent && Array.isArray(metadata.nbagent.actions) ? metadata.nbagent.actions : [];
  const last = actions.filter((/** @type {any} */ a) => a && a.action !== "ran").pop();
  if (!last) return "";
  const who = typeof last.author === "string" && last.author ? last.author : "the agent"; // an outside MCP client's name
  return `written by ${who}, turn ${Number.isInteger(last.turn) && last.turn >= 0 ? last.turn + 1 : "?"}`; // people count from 1
}

/** Put the label on each rendered cell of `notebookNode` whose model cell records one.
 * @param {any} shared @param {Element} notebookNode */
export function markAgentCells(shared, notebookNode) {
  const nodes = [...notebookNode.querySelectorAll(".jp-Cell")].filter((c) => c.closest(".jp-Notebook") === notebookNode);
  for (const node of nodes) {
    const index = domIndexOf(node);
    const cell = index >= 0 ? shared.cells[index] : null;
    const label = cell ? agentLabel(typeof cell.getMetadata === "function" ? cell.getMetadata() : cell.metadata) : "";
    const el = /** @type {HTMLElement} */ (node);
    if ((el.dataset.nbaAgent || "") === label) continue;
    if (label) el.dataset.nbaAgent = label; else delete el.dataset.nbaAgent;
    el.classList.toggle("nba-agent-cell", !!label);
  }
}
