// The chat widget's session bar: New chat and History (an Agent with save_to: the `switchable`
// trait) and a replay's Next (the `step_waiting` trait). Kernel side: nbagent/notebook/widget_sessions.py.
// Built on its own (static/session_bar.js) and handed over by the kernel in the `session_ui`
// trait only to widgets that show it, so widget.js stays small (src/sessions.js loads it).
import { h } from "./render/dom.js";

let nextId = 0;

/** Short local date-time of an ISO string ("" when none). @param {string|null|undefined} iso */
export function shortDate(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (isNaN(d.getTime())) return "";
  const pad = (/** @type {number} */ n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** One view's session bar, mounted at the top of the chat.
 * @param {any} model @param {HTMLElement} root the chat's root element @param {(msg: import("./protocol").ChatRequest) => boolean} send */
export function mount(model, root, send) {
  const list = h("div", { class: "nba-history", role: "listbox", "aria-label": "Saved conversations" });
  const newBtn = h("button", { type: "button", class: "nba-btn nba-new-chat", text: "New chat", title: "Start a new conversation (the current one stays saved)",
    onclick: () => { hide(); send({ type: "new_chat" }); } });
  const histBtn = h("button", { type: "button", class: "nba-btn nba-history-btn", text: "History", title: "Open a saved conversation of this agent's folder",
    onclick: () => { if (list.childElementCount) hide(); else ask(); } });
  const nextBtn = h("button", { type: "button", class: "nba-btn nba-next", text: "Next ▶", title: "Play the replay's next step",
    onclick: () => { nextBtn.setAttribute("disabled", ""); send({ type: "next" }); } });
  const bar = h("div", { class: "nba-sessionbar" }, newBtn, histBtn, nextBtn);
  root.prepend(bar, list);
  let pending = "";
  const hide = () => { list.replaceChildren(); pending = ""; };
  const ask = () => {
    pending = `h${++nextId}`;
    list.replaceChildren(h("div", { class: "nba-history-empty", text: "Loading…" }));
    if (!send({ type: "history", id: pending })) hide();
  };
  /** @param {import("./protocol").ChatEvent_history} msg */
  const onMsg = (msg) => {
    if (!msg || msg.type !== "history" || msg.id !== pending) return;
    const rows = (msg.sessions || []).map((/** @type {any} */ s) => {
      const current = s.path === msg.current;
      const row = h("button", { type: "button", class: "nba-history-row" + (current ? " nba-current" : ""), role: "option", disabled: !!s.error || current,
        title: s.error || s.path, onclick: () => { hide(); send({ type: "open_session", path: s.path }); } },
      h("span", { class: "nba-history-title", text: s.error ? "(unreadable)" : s.title || "(empty)" }),
      h("span", { class: "nba-history-meta", text: s.error ? s.error : `${shortDate(s.updated)} · ${s.turns} turn${s.turns === 1 ? "" : "s"}` }));
      row.dataset.path = s.path;
      return row;
    });
    list.replaceChildren(...(rows.length ? rows : [h("div", { class: "nba-history-empty", text: "No saved conversations yet." })]));
  };
  const sync = () => {
    const switchable = !!model.get("switchable");
    const waiting = !!model.get("step_waiting");
    newBtn.style.display = histBtn.style.display = switchable ? "" : "none";
    nextBtn.style.display = waiting ? "" : "none";
    if (waiting) nextBtn.removeAttribute("disabled");
    bar.style.display = switchable || waiting ? "" : "none";
    if (!switchable) hide();
  };
  model.on("msg:custom", onMsg);
  model.on("change:switchable", sync);
  model.on("change:step_waiting", sync);
  model.on("change:conversation_key", hide);
  sync();
  return () => {
    model.off("msg:custom", onMsg);
    model.off("change:switchable", sync);
    model.off("change:step_waiting", sync);
    model.off("change:conversation_key", hide);
  };
}
