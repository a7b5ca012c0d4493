// nbagent ChatWidget front end (anywidget). One store per model (shared by all its views):
// traits and delta messages go through the reducer; views render the resulting state.
//
// Lifecycle: the store goes `dead` when the kernel restarts, dies or is replaced (JupyterLab and
// Notebook 7: the widget manager's kernel reports it), when ipywidgets marks the comm dead
// (views get the class jupyter-widgets-disconnected) or when a send throws. Then: the transcript stays readable, nothing is "running", and the view
// says to re-run the cell; no control waits for a kernel that cannot answer.
//
// Debug switch: run `globalThis.nbagentDebug = {}` in the page (browser console) and the widget
// records into it: `deltas` — [arrival time in ms since the epoch, characters] per delta message —
// and `resyncs` — how many times a view found text missing and asked the kernel for the full turn.
import { initialState, apply, carriedTraits, undeclaredField } from "./reducer.js";
import { ChatView } from "./render/view.js";
import { watchMath } from "./mathtext.js";
import { hideTranscriptBeside, hideAskedElsewhere } from "./transcript_beside.js";
import { loadAsset, setAssetRequester } from "./assets.js";
import { notebookHost, registerHost } from "./host.js";
import { saveStubWith } from "./saved_state.js";
import { mountSessionBar, resetViews } from "./sessions.js";
import { isFolderWidget, renderFolderWidget } from "./folder_ui.js";
import { undoAnswered } from "./render/toolcard.js";

/** @typedef {import("./protocol").ChatEvent} ChatEvent */
/** @typedef {{state: import("./reducer.js").State, views: Set<ChatView>, resyncAt: number, timer: any,
 *   send: (msg: import("./protocol").ChatRequest) => boolean, checkLive: () => void, everLive: boolean, unwatch: () => void,
 *   hosts: Map<ChatView, {host: import("./host.js").NotebookHost, el: Element}>, waiting: Map<string, (msg: any) => void>,
 *   request: (msg: any, ms: number) => Promise<any>}} Store */

export const KERNEL_RESTARTED = "Kernel restarted — re-run this cell to continue.";
export const NO_KERNEL = "Not connected to a kernel — re-run this cell to continue.";
export const KERNEL_SHUT_DOWN = "The kernel was shut down — start one and re-run this cell to continue.";
// anywidget hands each view its own proxy of the model, so stores are keyed by the widget's id.
/** @type {Map<string, Store>} */
const stores = new Map();

/** The page's debug record (see the top of this file), or null when the switch is off. */
function debugLog() {
  const d = /** @type {any} */ (globalThis).nbagentDebug;
  return d && typeof d === "object" ? d : null;
}

/** Calls `gone(why)` when the kernel behind the widget manager restarts, dies, is shut down or is
 * replaced (the JupyterLab / Notebook 7 manager exposes it; elsewhere nothing is watched).
 * Returns an unwatch. @param {any} model @param {(why: string) => void} gone @returns {() => void} */
function watchKernel(model, gone) {
  try {
    const manager = model.widget_manager;
    const session = manager && manager.context && manager.context.sessionContext;
    const kernel = (manager && manager.kernel) || (session && session.session && session.session.kernel);
    const onStatus = (/** @type {any} */ _k, /** @type {string} */ status) => {
      if (status === "restarting" || status === "autorestarting") gone(KERNEL_RESTARTED);
      else if (status === "dead") gone(KERNEL_SHUT_DOWN);
    };
    const id = kernel && kernel.id;
    const onKernel = () => gone(KERNEL_SHUT_DOWN); // disposed: Shut Down Kernel, or the session ended
    const onChange = (/** @type {any} */ _s, /** @type {any} */ change) => { // another kernel, not a (re)connection to ours
      const next = change && change.newValue;
      if (id && (!next || next.id !== id)) gone(next ? KERNEL_RESTARTED : KERNEL_SHUT_DOWN);
    };
    if (kernel && kernel.statusChanged) kernel.statusChanged.connect(onStatus);
    if (kernel && kernel.disposed) kernel.disposed.connect(onKernel);
    if (session && session.kernelChanged) session.kernelChanged.connect(onChange);
    return () => {
      if (kernel && kernel.statusChanged) kernel.statusChanged.disconnect(onStatus);
      if (kernel && kernel.disposed) kernel.disposed.disconnect(onKernel);
      if (session && session.kernelChanged) session.kernelChanged.disconnect(onChange);
    };
  } catch { // another widget manager: the comm and send checks still apply
    return () => {};
  }
}

let requests = 0;

/** Answer the kernel's live-notebook request through a view that reaches the notebook (the
 * first one); a request with an empty id is only applied. @param {Store} s @param {any} msg */
function answerNotebook(s, msg) {
  const first = s.hosts.values().next();
  const reply = (/** @type {any} */ answer) => { if (msg.id) s.send({ type: "notebook", id: msg.id, ...answer }); };
  if (first.done) { reply({ ok: false, error: "this view cannot reach its notebook", kind: "config" }); return; }
  const { host, el } = first.value;
  host.answer(el, msg).then((result) => reply({ ok: true, result: result ?? null }),
    (err) => reply({ ok: false, error: String(err && err.message || err), kind: (err && err.kind) || "tool" }));
}

/** @param {any} model @returns {Store} */
function storeFor(model) {
  const key = model.get("_key") || "";
  let store = key ? stores.get(key) : undefined;
  if (store) return store;
  const s = /** @type {Store} */ ({ state: initialState(), views: new Set(), resyncAt: 0, timer: null, everLive: false,
    hosts: new Map(), waiting: new Map() });
  /** Ask the kernel; its answer (same id), or null past `ms`. @param {any} msg @param {number} ms */
  s.request = (msg, ms) => new Promise((resolve) => {
    const id = `r${++requests}`;
    const timer = setTimeout(() => { s.waiting.delete(id); resolve(null); }, ms);
    s.waiting.set(id, (/** @type {any} */ answer) => { clearTimeout(timer); resolve(answer); });
    if (!s.send({ ...msg, id })) { clearTimeout(timer); s.waiting.delete(id); resolve(null); }
  });
  /** @param {import("./protocol").ChatRequest} msg @returns {boolean} false when the kernel cannot be reached (the store is dead then) */
  s.send = (msg) => {
    s.checkLive();
    if (s.state.dead) return false;
    try {
      model.send(msg);
      return true;
    } catch (err) {
      console.warn("nbagent: the kernel cannot be reached", err);
      dispatch({ type: "dead", reason: KERNEL_RESTARTED });
      return false;
    }
  };
  s.checkLive = () => {
    for (const v of s.views) {
      if (v.disconnected()) { dispatch({ type: "dead", reason: s.everLive ? KERNEL_RESTARTED : NO_KERNEL }); return; }
    }
  };
  if (key) stores.set(key, s);
  // turns come as custom messages (the running one's structure as patches, "turn", "turns"), the
  // text as deltas (see nbagent/notebook/widget.py); `finished` says how many finished turns there are
  /** @returns {import("./reducer.js").Event} */
  const traits = () => ({ type: "traits", running: model.get("running"),
    notice: model.get("notice"), gauge: model.get("gauge"), finished: model.get("finished") || 0 });
  /** Text or turns missing (a page reloaded, a late view, a new conversation): ask for all, once
   * the syncs in flight had a moment to arrive, and at most every 2 s. @param {number} wait */
  const askIfGap = (wait) => {
    if (!s.state.gap || s.timer || s.state.dead) return;
    s.timer = setTimeout(() => {
      s.timer = null;
      if (!s.state.gap) return;
      const since = performance.now() - s.resyncAt;
      if (since < 2000) { askIfGap(2000 - since); return; }
      s.resyncAt = performance.now();
      const debug = debugLog();
      if (debug) debug.resyncs = (debug.resyncs || 0) + 1;
      s.send({ type: "resync" });
    }, wait);
  };
  /** @param {any} event */
  const dispatch = (event) => {
    const next = apply(s.state, event);
    if (next === s.state) return;
    s.state = next;
    for (const v of s.views) { v.update(next); v.afterUpdate(); }
    askIfGap(300);
  };
  let queued = false;
  const onTraits = () => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => { queued = false; dispatch(traits()); });
  };
  for (const name of ["running", "notice", "gauge", "finished"]) model.on(`change:${name}`, onTraits);
  model.on("change:conversation_key", () => { resetViews(s); onTraits(); }); // rebound: New chat, History
  model.on("comm_live_update", () => queueMicrotask(s.checkLive));
  s.unwatch = watchKernel(model, (why) => dispatch({ type: "dead", reason: why }));
  /** One handler per event the kernel sends (nbagent/notebook/protocol.py; the types are generated, so
   * tsc fails here when an event is declared without a handler).
   * @type {{[K in ChatEvent["type"]]: (msg: Extract<ChatEvent, {type: K}>) => void}} */
  const handlers = {
    refused: dispatch,
    confirm: dispatch,
    turn: dispatch,
    turns: dispatch,
    deltas: (msg) => {
      const debug = debugLog();
      if (debug) (debug.deltas ||= []).push([performance.timeOrigin + performance.now(),
        msg.items.reduce((n, /** @type {any} */ it) => n + it[3].length, 0)]);
      dispatch(msg);
      // running / finished / gauge changed with this flush: set here as the kernel set them (no
      // update of their own); never saved back, so a later sync from the kernel still wins
      for (const [name, value] of Object.entries(carriedTraits((n) => model.get(n), msg.state,
        (msg.patches || []).filter((p) => p.ended).length))) model.set(name, value);
    },
    names: (msg) => { for (const v of s.views) v.mentions.receive(msg); }, // @name: the kernel's variables
    asset: (msg) => { // math.js, grammars.js
      if (typeof msg.name === "string" && typeof msg.code === "string") {
        loadAsset(msg.name, msg.code).catch((e) => console.warn(`nbagent: ${msg.name}`, e));
      }
    },
    history: () => {}, // the session bar's own listener answers it (sessionbar.js)
    replay: () => {}, // the `replay` trait's value, never a custom message: the session bar reads the trait
    notebook: (msg) => answerNotebook(s, msg), // live_notebook.py: read or edit the notebook this view is in
    undo: (msg) => undoAnswered(msg), // an Undo of a tool card (toolcard.js)
    provenance: (msg) => { // answers to s.request
      const waiting = s.waiting.get(msg.id);
      if (waiting) { s.waiting.delete(msg.id); waiting(msg); }
    },
  };
  model.on("msg:custom", (/** @type {any} */ msg) => {
    const bad = undeclaredField(msg); // a field the declaration lacks: dropped, as the schema rejects it
    if (bad) { console.warn(`nbagent: dropped a kernel message with an undeclared ${JSON.stringify(bad)}`, msg && msg.type); return; }
    /** @type {any} */ (handlers)[msg.type](msg);
  });
  setAssetRequester((name) => s.send({ type: "asset", id: name, name })); // the newest widget asks for lazy modules
  const whole = model.get("turns"); // the whole state's turns (widget.py get_state), when it was sent
  if (Array.isArray(whole)) s.state = apply(s.state, { type: "turns", first: true, last: true, turns: whole });
  s.state = apply(s.state, traits());
  askIfGap(0); // a late view (a page reload, another page): the finished turns are asked for
  return s;
}

export default {
  /** @param {{model: any}} ctx */
  initialize({ model }) {
    if (isFolderWidget(model)) return undefined;
    const store = storeFor(model);
    saveStubWith(model); // a reopened notebook finds a (blank) model instead of an error box
    return () => { store.unwatch(); stores.delete(model.get("_key") || ""); }; // the widget was closed
  },
  /** @param {{model: any, el: HTMLElement, host?: any}} ctx */
  render(ctx) {
    const { model, el } = ctx;
    if (isFolderWidget(model)) return renderFolderWidget(ctx); // a SessionBrowser's or ClassView's model (`_role`)
    const store = storeFor(model);
    const view = new ChatView(el, store.send, model.get("placeholder") || "");
    const host = notebookHost(model); // JupyterLab, Notebook 7: tool cards can insert cells
    if (host) host.provenance = (callId, code) => store.request({ type: "provenance", call_id: callId, source: code }, 3000)
      .then((answer) => (answer && answer.metadata) || {});
    registerHost(el, host);
    el.classList.toggle("nba-can-insert", !!host);
    store.views.add(view);
    view.cellRefs = host ? (prompt) => host.cellRefs(el, prompt) : null; // @cell in the box
    const unwatchCells = host ? host.watch(el) : () => {};
    if (host) { store.hosts.set(view, { host, el }); store.send({ type: "notebook", host: true }); } // a live backend
    if (!view.disconnected()) { store.everLive = true; store.send({ type: "view" }); } // someone can press Approve
    store.checkLive();
    view.update(store.state);
    const unmountBar = mountSessionBar(model, view.root, store.send); // New chat, History, Next
    const unwatchMath = watchMath(view.root); // also inside a shadow root (marimo)
    const hiding = hideTranscriptBeside(el); // the saved transcript is for readers without a kernel
    /** @type {(() => void)|null} */ let showAsked = null;
    view.afterUpdate = () => { // no kernel ever and no turns (a headless run's saved state): the transcript says it all
      const aside = !!store.state.dead && !store.everLive && !store.state.turns.length;
      if (view.root.classList.contains("nba-aside") !== aside || (!aside && !showAsked)) {
        view.root.classList.toggle("nba-aside", aside);
        hiding.check();
        if (aside && showAsked) { showAsked(); showAsked = null; }
        if (!aside && !showAsked) showAsked = hideAskedElsewhere(model.get("_key") || "");
      }
    };
    view.afterUpdate();
    const onAutosave = () => view.setAutosave(model.get("autosave") || ""); // not saved / saved elsewhere
    onAutosave();
    model.on("change:autosave", onAutosave);
    return () => { store.views.delete(view); store.hosts.delete(view); unwatchCells(); unmountBar(); unwatchMath(); hiding.stop();
      if (showAsked) showAsked(); model.off("change:autosave", onAutosave); };
  },
};
