// Loads the chat's session bar (src/sessionbar.js, New chat / History / Next) from the code the
// kernel puts in the `session_ui` trait, and resets the views when the widget is rebound to another
// conversation (`conversation_key` changes): the old transcript goes before the new one arrives.
import { initialState } from "./reducer.js";
import { importCode } from "./assets.js";

/** @param {{state: any, views: Set<any>}} store */
export function resetViews(store) {
  store.state = initialState();
  for (const view of store.views) {
    for (const turn of view.turns.values()) turn.el.remove();
    view.turns.clear();
    view.hiddenTurns = null; // the next conversation starts at its latest turns
  }
}

/** Mount the session bar in a view once the kernel has sent its code. Returns an unmount.
 * @param {any} model @param {HTMLElement} root @param {(msg: import("./protocol").ChatRequest) => boolean} send */
export function mountSessionBar(model, root, send) {
  let unmount = () => {};
  let done = false;
  const load = () => {
    const code = model.get("session_ui") || "";
    if (!code || done) return;
    done = true;
    importCode(code).then((mod) => { if (done) unmount = mod.mount(model, root, send); })
      .catch((err) => console.warn("nbagent: session bar", err));
  };
  model.on("change:session_ui", load);
  load();
  return () => { done = false; model.off("change:session_ui", load); unmount(); };
}
