// The folder widgets (SessionBrowser, ClassView: a model's `_role` says which) share widget.js with the
// chat, but their own code (src/folders.js, static/folders.js) comes in the model's `_ui` trait,
// set by the kernel (session_browser.py, class_view.py): a chat widget never carries it. Their
// transcripts are drawn with this bundle's renderer, handed to that module when it is loaded.
import { TurnView } from "./render/turn.js";
import { apply, initialState } from "./reducer.js";
import { importCode } from "./assets.js";

/** Draw a saved session's turns read-only into `container`. @param {HTMLElement} container @param {any[]} turns */
function showTurns(container, turns) {
  const state = apply(initialState(), { type: "turns", first: true, last: true, turns });
  container.replaceChildren(...state.turns.map((/** @type {any} */ turn) => {
    const view = new TurnView(() => false); // read-only: approvals and other requests go nowhere
    view.update(turn);
    return view.el;
  }));
}

/** Whether a model is a folder widget's. @param {any} model */
export const isFolderWidget = (model) => model.get("_role") === "session_browser" || model.get("_role") === "class_view";

/** Render a folder widget once its code is loaded; resolves to its cleanup. @param {{model: any, el: HTMLElement, host?: any}} ctx */
export async function renderFolderWidget(ctx) {
  const code = ctx.model.get("_ui") || "";
  if (!code) { ctx.el.textContent = "This widget's code is missing: re-run the cell."; return undefined; }
  const mod = await importCode(code);
  mod.useTurnsRenderer(showTurns);
  return (ctx.model.get("_role") === "class_view" ? mod.classWidget : mod.browserWidget).render(ctx);
}
