// nbagent ChatWidget front end (anywidget). One store per model (shared by all its views):
// traits and delta messages go through the reducer; views render the resulting state.
//
// Debug switch: run `globalThis.nbagentDebug = {}` in the page (browser console) and the widget
// records into it: `deltas` — [arrival time in ms since the epoch, characters] per delta message —
// and `resyncs` — how many times a view found text missing and asked the kernel for the full turn.
import { initialState, apply } from "./reducer.js";
import { ChatView } from "./render/view.js";

/** @typedef {{state: import("./reducer.js").State, views: Set<ChatView>, resyncAt: number, timer: any}} Store */
// anywidget hands each view its own proxy of the model, so stores are keyed by the widget's id.
/** @type {Map<string, Store>} */
const stores = new Map();

/** The page's debug record (see the top of this file), or null when the switch is off. */
function debugLog() {
  const d = /** @type {any} */ (globalThis).nbagentDebug;
  return d && typeof d === "object" ? d : null;
}

/** @param {any} model @returns {Store} */
function storeFor(model) {
  const key = model.get("_key") || "";
  let store = key ? stores.get(key) : undefined;
  if (store) return store;
  const s = /** @type {Store} */ ({ state: initialState(), views: new Set(), resyncAt: 0, timer: null });
  if (key) stores.set(key, s);
  // finished turns live in the levels turns_0, turns_1, ... (see nbagent/notebook/widget.py)
  const levels = [];
  for (let k = 0; model.get(`turns_${k}`) !== undefined; k++) levels.push(`turns_${k}`);
  const traits = () => ({ type: "traits", history: levels.flatMap((name) => model.get(name) || []),
    current: model.get("current"), running: model.get("running"), notice: model.get("notice") });
  /** @param {any} event */
  const dispatch = (event) => {
    const next = apply(s.state, event);
    if (next === s.state) return;
    s.state = next;
    for (const v of s.views) v.update(next);
    if (next.gap && !s.timer) { // text missing (e.g. the page was reloaded mid-stream): ask once
      s.timer = setTimeout(() => {
        s.timer = null;
        if (s.state.gap && performance.now() - s.resyncAt > 2000) {
          s.resyncAt = performance.now();
          const debug = debugLog();
          if (debug) debug.resyncs = (debug.resyncs || 0) + 1;
          model.send({ type: "resync" });
        }
      }, 300);
    }
  };
  let queued = false;
  const onTraits = () => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => { queued = false; dispatch(traits()); });
  };
  for (const name of [...levels, "current", "running", "notice"]) model.on(`change:${name}`, onTraits);
  model.on("msg:custom", (/** @type {any} */ msg) => {
    if (!msg || msg.type !== "deltas") return;
    const debug = debugLog();
    if (debug) (debug.deltas ||= []).push([performance.timeOrigin + performance.now(),
      msg.items.reduce((n, /** @type {any} */ it) => n + it[3].length, 0)]);
    dispatch(msg);
  });
  s.state = apply(s.state, traits());
  return s;
}

export default {
  /** @param {{model: any}} ctx */
  initialize({ model }) {
    storeFor(model);
    return () => { stores.delete(model.get("_key") || ""); }; // the widget was closed
  },
  /** @param {{model: any, el: HTMLElement}} ctx */
  render({ model, el }) {
    const store = storeFor(model);
    const view = new ChatView(el, (msg) => model.send(msg), model.get("placeholder") || "");
    store.views.add(view);
    view.update(store.state);
    return () => { store.views.delete(view); };
  },
};
