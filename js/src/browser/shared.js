// What the session browser and the class view (../classview/) share: request/reply over custom
// messages, the kernel's assets for a shown session, and a saved session drawn read-only with the
// chat widget's own renderer (render/turn.js, markdown.js and its sanitiser), which widget.js hands
// over when it loads this code (static/folders.js, see ../folder_ui.js): never bundled twice.
import { fmtInt, fmtCost } from "../render/dom.js";
import { shortModel } from "./filter.js";
import { loadAsset, setAssetRequester } from "../assets.js";

const REPLY_TIMEOUT_MS = 30000;
const NO_ANSWER = "No answer from the kernel (is a cell still running, or was the kernel restarted?). Try again.";

/** @typedef {import("../protocol").BrowserRequest | import("../protocol").ClassRequest} Request */

/** Request/response over custom messages tagged with an id. @param {any} model */
export function requester(model) {
  let next = 0;
  /** @type {Map<string, (reply: any) => void>} */
  const pending = new Map();
  /** @param {any} msg */
  const onMsg = (msg) => {
    if (!msg || msg.type !== "reply") return;
    const done = pending.get(msg.id);
    if (done) { pending.delete(msg.id); done(msg); }
  };
  model.on("msg:custom", onMsg);
  return {
    /** @param {Request} msg @returns {Promise<any>} the reply (its answer fields), or a local {ok: false, error} */
    call(msg) {
      const id = `r${++next}`;
      return new Promise((resolve) => {
        const timer = setTimeout(() => { // a busy or gone kernel: say so (a late reply is dropped)
          if (pending.delete(id)) resolve({ ok: false, error: NO_ANSWER });
        }, REPLY_TIMEOUT_MS);
        pending.set(id, (/** @type {any} */ reply) => { clearTimeout(timer); resolve(reply); });
        try { model.send({ ...msg, id }); } catch (err) { clearTimeout(timer); pending.delete(id); resolve({ ok: false, error: `the kernel cannot be reached (${err})` }); }
      });
    },
    dispose() { model.off("msg:custom", onMsg); pending.clear(); },
  };
}

/** A shown session's math.js and grammars.js come from the kernel (see ../assets.js).
 * @param {{call: (msg: Request) => Promise<any>}} rpc */
export function serveAssets(rpc) {
  setAssetRequester((name) => {
    rpc.call({ type: "asset", name })
      .then((r) => (r.ok && typeof r.code === "string" ? loadAsset(name, r.code) : undefined))
      .catch((e) => console.warn(`nbagent: ${name}`, e));
    return true;
  });
}

/** @typedef {(container: HTMLElement, turns: any[]) => void} TurnsRenderer */
/** @type {TurnsRenderer} */
let drawTurns = (container) => { container.textContent = "This session cannot be shown here."; };

/** Draw transcripts with `fn` (widget.js's read-only turn renderer, given when it loads this module). @param {TurnsRenderer} fn */
export function useTurnsRenderer(fn) { drawTurns = fn; }

/** Draw a saved session's turns (an `open` reply's `turns`) read-only into `container`.
 * @param {HTMLElement} container @param {any[]} turns */
export function showTranscript(container, turns) { drawTurns(container, turns); }

/** One line on an opened session's usage rows: turns, tokens in and out, cost, models. @param {any[]} usage */
export function usageLine(usage) {
  const sum = (/** @type {string} */ k) => usage.reduce((n, u) => n + (u[k] || 0), 0);
  const cost = usage.some((u) => u.cost == null) ? "" : ` · ${fmtCost(sum("cost"))}`;
  const models = [...new Set(usage.map((u) => shortModel(u.model)).filter(Boolean))].join(", ");
  return `${usage.length} turn${usage.length === 1 ? "" : "s"} · ${fmtInt(sum("input_tokens"))} in · ` +
    `${fmtInt(sum("output_tokens"))} out${cost}${models ? " · " + models : ""}`;
}
