// What the page hosting the widget lets it do to the notebook: insert a code cell below the
// widget's cell, answer the kernel's live-notebook requests (./live.js), resolve @cell references. JupyterLab 4 and Notebook 7 give it through the widget manager behind the model
// (@jupyter-widgets/jupyterlab-manager's WidgetManager has the notebook's document context, whose
// model is the shared notebook): no lab extension, no `window.jupyterapp`. Elsewhere (VS Code,
// marimo, a static HTML page, a console) there is no such context and the host is null.
//
// Finding the widget's cell: the code cells whose outputs show this widget (an output's
// widget-view model id whose model has our `_key`); when the widget shows in several cells, the
// one whose DOM holds the clicked view (its index in the notebook) decides. The inserted cell is
// scrolled into view and gets the keyboard (revealCell).

import { applyRequest, activeIndex, markAgentCells, resolveCellRefs, watchActiveCell } from "./live.js";

const WIDGET_VIEW = "application/vnd.jupyter.widget-view+json";

/** @typedef {{insertBelow: (node: Element, code: string, metadata?: any) => Promise<number>,
 *   answer: (node: Element|null, msg: any) => Promise<any>, cellRefs: (node: Element|null, prompt: string) => Promise<any[]>,
 *   source: (cellId: string) => string|null, watch: (node: Element) => () => void,
 *   provenance?: (callId: string, code: string) => Promise<any>}} NotebookHost */

/** Model ids of the widget views among a cell's outputs. @param {any} cell @returns {string[]} */
export function widgetIdsOf(cell) {
  if (!cell || cell.cell_type !== "code" || typeof cell.getOutputs !== "function") return [];
  /** @type {string[]} */
  const ids = [];
  for (const out of cell.getOutputs() || []) {
    const view = out && out.data && out.data[WIDGET_VIEW];
    if (view && typeof view.model_id === "string") ids.push(view.model_id);
  }
  return ids;
}

/** The index to insert after: a cell showing the widget; the DOM's index when it is one of them
 * (the widget shows in several cells), the only one otherwise; -1 when it cannot be told.
 * @param {number[]} showing @param {number} domIndex */
export function chooseCell(showing, domIndex) {
  if (showing.includes(domIndex)) return domIndex;
  return showing.length === 1 ? showing[0] : -1;
}

/** The index of the notebook cell holding `node` as the page shows it, or -1.
 * @param {Element} node */
export function domCellIndex(node) {
  const cell = /** @type {HTMLElement|null} */ (node.closest ? node.closest(".jp-Cell") : null);
  if (!cell) return -1;
  const windowed = Number.parseInt(cell.dataset.windowedListIndex || "", 10); // JupyterLab 4's windowed notebook
  if (Number.isInteger(windowed) && windowed >= 0) return windowed;
  const parent = cell.parentElement;
  return parent ? [...parent.children].filter((c) => c.classList.contains("jp-Cell")).indexOf(cell) : -1;
}

/** The host's notebook operations for this model, or null where the page has none.
 * @param {any} model the anywidget model @returns {NotebookHost|null} */
export function notebookHost(model) {
  let manager, shared;
  try {
    manager = model.widget_manager;
    shared = manager && manager.context && manager.context.model && manager.context.model.sharedModel;
  } catch {
    return null;
  }
  if (!shared || typeof shared.insertCell !== "function" || !Array.isArray(shared.cells)
    || typeof manager.get_model !== "function") return null;
  const key = model.get("_key");
  /** @param {string} id */
  const isOurs = async (id) => {
    try { return (await manager.get_model(id)).get("_key") === key; } catch { return false; } // a widget of a past kernel
  };
  /** @param {Element|null} node */
  const chatIndex = async (node) => {
    /** @type {number[]} */
    const showing = [];
    const cells = shared.cells;
    for (let i = 0; i < cells.length; i++) {
      for (const id of widgetIdsOf(cells[i])) if (await isOurs(id)) { showing.push(i); break; }
    }
    return chooseCell(showing, node ? domCellIndex(node) : -1);
  };
  /** @param {Element|null} node */
  const notebookNode = (node) => (node && node.closest ? node.closest(".jp-Notebook") : null);
  return {
    async insertBelow(node, code, metadata) {
      const index = await chatIndex(node);
      if (index < 0) throw new Error("the cell showing this chat was not found in the notebook");
      shared.insertCell(index + 1, { cell_type: "code", source: code, metadata: metadata || {} });
      revealCell(node, index + 1);
      return index + 1;
    },
    async answer(node, msg) {
      const chat = await chatIndex(node);
      const nb = notebookNode(node);
      const kernel = () => { const session = manager.context.sessionContext && manager.context.sessionContext.session; return session ? session.kernel : null; };
      const result = await applyRequest(shared, msg, { chatIndex: () => chat, path: String(manager.context.path || ""), kernel,
        activeId: () => { const i = activeIndex(nb, chat); return i >= 0 && shared.cells[i] ? shared.cells[i].id : null; } });
      if (nb) markAgentCells(shared, nb);
      return result;
    },
    async cellRefs(node, prompt) {
      return resolveCellRefs(prompt, shared, activeIndex(notebookNode(node), await chatIndex(node)));
    },
    source(cellId) {
      const cell = shared.cells.find((/** @type {any} */ c) => c.id === cellId);
      return cell ? (typeof cell.getSource === "function" ? cell.getSource() : String(cell.source ?? "")) : null;
    },
    watch(node) {
      let stop = () => {};
      let tries = 0;
      let waiting = /** @type {any} */ (null);
      const start = () => { // the view's element joins the page a moment after render
        waiting = null;
        const nb = notebookNode(node);
        if (!nb) { if (tries++ < 100) waiting = setTimeout(start, 100); return; }
        const unwatchActive = watchActiveCell(nb);
        let timer = /** @type {any} */ (null);
        const mark = () => { if (!timer) timer = setTimeout(() => { timer = null; markAgentCells(shared, nb); }, 50); };
        const observer = new MutationObserver(mark); // cells rendered later (a windowed notebook)
        observer.observe(nb.querySelector(".jp-WindowedPanel-viewport") || nb, { childList: true });
        if (shared.changed && shared.changed.connect) shared.changed.connect(mark);
        mark();
        stop = () => {
          unwatchActive();
          observer.disconnect();
          clearTimeout(timer);
          if (shared.changed && shared.changed.disconnect) shared.changed.disconnect(mark);
        };
      };
      start();
      return () => { clearTimeout(waiting); stop(); };
    },
  };
}

const REVEAL_FRAMES = 60; // frames to wait for the inserted cell (and its editor) to render

/** Bring the notebook cell at `index` (next to `node`'s notebook) into view and give it the
 * keyboard: its editor is focused, so the notebook selects it (edit mode; Shift+Enter runs it).
 * The page renders the inserted cell a few frames later: wait for it, then give up quietly.
 * @param {Element} node @param {number} index @param {number} [frames] */
export function revealCell(node, index, frames = REVEAL_FRAMES) {
  const notebook = node.closest ? node.closest(".jp-Notebook") : null;
  if (!notebook || typeof requestAnimationFrame !== "function") return;
  const cell = /** @type {HTMLElement|undefined} */ ([...notebook.querySelectorAll(".jp-Cell")].find((c) => domCellIndex(c) === index));
  const editor = /** @type {HTMLElement|null} */ (cell ? cell.querySelector(".cm-content, textarea") : null);
  if (!editor && frames > 0) { requestAnimationFrame(() => revealCell(node, index, frames - 1)); return; }
  if (!cell) return;
  cell.scrollIntoView({ block: "nearest" });
  (editor || cell).focus({ preventScroll: true });
}

/** @type {WeakMap<Element, NotebookHost>} */
const hosts = new WeakMap();

/** Remember the host for a widget's element (its views' cards find it from there).
 * @param {Element} el @param {NotebookHost|null} host */
export function registerHost(el, host) {
  if (host) hosts.set(el, host); else hosts.delete(el);
}

/** The host registered for `node` or its nearest registered ancestor. @param {Element|null} node */
export function hostOf(node) {
  for (let n = node; n; n = n.parentElement) {
    const host = hosts.get(n);
    if (host) return host;
  }
  return null;
}

/** Copy text: the async clipboard, else a selected textarea and execCommand (insecure pages,
 * denied permission). @param {string} text @returns {Promise<boolean>} */
export async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) { await navigator.clipboard.writeText(text); return true; }
  } catch { /* fall back */ }
  const box = document.createElement("textarea");
  box.value = text;
  box.setAttribute("readonly", "");
  box.style.cssText = "position:fixed;top:0;left:0;opacity:0;";
  const active = /** @type {HTMLElement|null} */ (document.activeElement);
  document.body.append(box);
  box.select();
  let ok = false;
  try { ok = document.execCommand("copy"); } catch { ok = false; }
  box.remove();
  if (active && active.focus) active.focus({ preventScroll: true });
  return ok;
}
