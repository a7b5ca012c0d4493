// What a saved notebook keeps of the widget. JupyterLab and Notebook 7 save the widget's output as a
// reference to its model (application/vnd.jupyter.widget-view+json); reopened without that model
// in a kernel, the widget manager shows "Error displaying widget: model not found" under the saved
// transcript. The manager restores models that are not live from the notebook's widget state
// (metadata.widgets), which it writes only when "Save Widget State Automatically" is on. So on
// each save this module writes, for every nbagent widget an output refers to, a stub state: an
// anywidget whose module renders nothing (a few hundred bytes, no transcript: that is the
// markdown output beside it). Reopened, the stub is found and renders nothing; with the kernel
// still running (a page reload), the live model wins, as the manager restores "widgets from saved
// state that are not live" only.

export const STATE_MIME = "application/vnd.jupyter.widget-state+json";
export const VIEW_MIME = "application/vnd.jupyter.widget-view+json";
export const STUB_ESM = "export default { render() {} }; // nbagent: the chat's saved transcript is the output beside this one\n";
const BASE_KEYS = ["_model_module", "_model_module_version", "_model_name", "_view_module", "_view_module_version", "_view_name"];

/** The nbagent models (anywidget proxies) shown in each notebook context. @type {WeakMap<any, Set<any>>} */
const byContext = new WeakMap();

/** The stub state of a live model (its module names and versions; the rest is the stub's).
 * @param {(name: string) => any} get @returns {any} */
export function stubState(get) {
  /** @type {Record<string, any>} */
  const state = {};
  for (const k of BASE_KEYS) if (get(k) != null) state[k] = get(k);
  return { model_module: state._model_module, model_name: state._model_name, model_module_version: state._model_module_version,
    state: { ...state, _esm: STUB_ESM, _css: "", _nbagent_saved: true } };
}

/** The widget-state metadata to save: stubs for `ours` that an output refers to, stale stubs
 * (no output refers to them any more) dropped, every other widget's state kept.
 * @param {any} metadata the notebook's `widgets` metadata (or undefined)
 * @param {Map<string, any>} ours model_id -> stub @param {Set<string>} referenced model ids in outputs
 * @returns {any} the new `widgets` metadata, or undefined for none */
export function savedWidgets(metadata, ours, referenced) {
  const saved = (metadata && metadata[STATE_MIME]) || { version_major: 2, version_minor: 0, state: {} };
  /** @type {Record<string, any>} */
  const state = {};
  for (const [id, s] of Object.entries(saved.state || {})) {
    const stub = s && s.state && s.state._nbagent_saved;
    if (!stub || referenced.has(id)) state[id] = s;
  }
  for (const [id, stub] of ours) if (referenced.has(id)) state[id] = stub;
  if (!Object.keys(state).length && !(metadata && Object.keys(metadata).some((k) => k !== STATE_MIME))) return undefined;
  return { ...(metadata || {}), [STATE_MIME]: { ...saved, state } };
}

/** The model ids the notebook's outputs refer to. @param {any} notebook @returns {Set<string>} */
function referencedIds(notebook) {
  const ids = new Set();
  for (const cell of notebook.cells || []) {
    const outputs = cell.outputs;
    if (!outputs) continue;
    for (let i = 0; i < outputs.length; i++) {
      const view = (outputs.get(i).data || {})[VIEW_MIME];
      if (view && view.model_id) ids.add(view.model_id);
    }
  }
  return ids;
}

/** Keep the stub of this widget in its notebook's saves (JupyterLab / Notebook 7; elsewhere nothing).
 * @param {any} model the anywidget model proxy */
export function saveStubWith(model) {
  try {
    const context = model.widget_manager && model.widget_manager.context;
    const notebook = context && context.model;
    if (!context || !context.saveState || !notebook || typeof notebook.setMetadata !== "function") return;
    let models = byContext.get(context);
    if (!models) {
      const mine = /** @type {Set<any>} */ (new Set());
      byContext.set(context, mine);
      context.saveState.connect((/** @type {any} */ _c, /** @type {string} */ phase) => {
        if (phase === "started") writeStubs(notebook, mine);
      });
      models = mine;
    }
    models.add(model);
  } catch (err) {
    console.warn("nbagent: widget state not saved", err);
  }
}

/** @param {any} notebook @param {Set<any>} models */
function writeStubs(notebook, models) {
  try {
    /** @type {Map<string, any>} */
    const ours = new Map();
    for (const m of models) {
      const id = m.get("_widget_id"); // the model id, set by the kernel once the comm is open
      if (id) ours.set(id, stubState((k) => m.get(k)));
    }
    const before = notebook.getMetadata("widgets");
    const after = savedWidgets(before, ours, referencedIds(notebook));
    if (JSON.stringify(after) === JSON.stringify(before)) return;
    if (after) notebook.setMetadata("widgets", after);
    else notebook.deleteMetadata("widgets");
  } catch (err) {
    console.warn("nbagent: widget state not saved", err);
  }
}
