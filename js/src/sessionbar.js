// The chat widget's session bar: New chat and History (an Agent with save_to: the `switchable`
// trait) and a replay's step counter, Next and prompt-mismatch notice (the `replay` trait, a
// protocol ReplayState). Kernel side: nbagent/notebook/widget_sessions.py.
// Keys, only while the keyboard is in this chat and not in a text field: → and Space play the next
// step, ← does nothing (a played step is already in the conversation: it cannot be taken back).
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

export const NEXT_KEYS = "ArrowRight Space";
const NO_BACK = "← cannot go back: a played step is already in the conversation";

/** What the replay part of the bar shows for a ReplayState (`{}`: no replay).
 * @param {Partial<import("./protocol").ChatEvent_replay>|null|undefined} r @param {boolean} pending Next was pressed, not yet played */
export function replayView(r, pending = false) {
  if (!r || typeof r.steps !== "number") return { show: false, stepping: false, counter: "", canNext: false, nextTitle: "", notice: null };
  const step = Math.min(r.step || 0, r.steps);
  const counter = `step ${step} of ${r.steps}` + (r.live_turn ? " · answering live" : "");
  const canNext = !!r.waiting && !r.mismatch && !pending;
  const nextTitle = canNext ? `Play the next step (→ or Space). ${NO_BACK}`
    : r.mismatch ? "Choose first: continue with the recording or answer live"
    : r.waiting ? "Playing…"
    : step >= r.steps ? `The recording has no more steps. ${NO_BACK}`
    : `Nothing to play yet: type the next prompt. ${NO_BACK}`;
  const notice = r.mismatch ? {
    text: `This prompt differs from the recorded one. The recording answers “${r.recorded_prompt || ""}”.`,
    liveLabel: r.live ? `Answer live (${r.live})` : "Answer live",
    liveUnavailable: r.live_unavailable || "",
  } : null;
  return { show: true, stepping: !!r.stepping, counter, canNext, nextTitle, notice };
}

/** Whether a key pressed on `target` in the chat is the replay's (not typing, not another control's Space).
 * @param {{key: string, altKey?: boolean, ctrlKey?: boolean, metaKey?: boolean, shiftKey?: boolean, isComposing?: boolean}} e
 * @param {any} target @param {any} nextBtn @returns {"next"|"back"|""} */
export function replayKey(e, target, nextBtn) {
  if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey || e.isComposing) return "";
  const el = target && target.closest ? target : null;
  if (el && (el.closest("input, textarea, select, [contenteditable]:not([contenteditable=false])"))) return "";
  if (e.key === "ArrowRight") return "next";
  if (e.key === "ArrowLeft") return "back";
  if (e.key === " " && (target === nextBtn || !(el && el.closest("button, a, summary, [role=option], [role=button]")))) return "next";
  return "";
}

/** One view's session bar, mounted at the top of the chat.
 * @param {any} model @param {HTMLElement} root the chat's root element @param {(msg: import("./protocol").ChatRequest) => boolean} send */
export function mount(model, root, send) {
  const list = h("div", { class: "nba-history", role: "listbox", "aria-label": "Saved conversations" });
  const newBtn = h("button", { type: "button", class: "nba-btn nba-new-chat", text: "New chat", title: "Start a new conversation (the current one stays saved)",
    onclick: () => { hide(); send({ type: "new_chat" }); } });
  const histBtn = h("button", { type: "button", class: "nba-btn nba-history-btn", text: "History", title: "Open a saved conversation of this agent's folder",
    onclick: () => { if (list.childElementCount) hide(); else ask(); } });
  // Next is never disabled nor hidden while the replay shows: a disabled or hidden button drops the
  // keyboard to the page. aria-disabled says when it has nothing to play.
  const nextBtn = h("button", { type: "button", class: "nba-btn nba-next", text: "Next ▶", "aria-keyshortcuts": NEXT_KEYS,
    onclick: () => next() });
  const counter = h("span", { class: "nba-step-count", role: "status", "aria-live": "polite", "aria-atomic": "true" });
  const noticeText = h("span", { class: "nba-replay-notice-text" });
  const why = h("span", { class: "nba-replay-why" });
  const continueBtn = h("button", { type: "button", class: "nba-btn nba-replay-continue", text: "Continue with the recording",
    onclick: () => choose("continue") });
  const liveBtn = h("button", { type: "button", class: "nba-btn nba-replay-live", text: "Answer live", onclick: () => choose("live") });
  const notice = h("div", { class: "nba-replay-notice", role: "alert" }, noticeText, h("span", { class: "nba-replay-choices" }, continueBtn, liveBtn), why);
  const bar = h("div", { class: "nba-sessionbar" }, counter, newBtn, histBtn, nextBtn);
  root.prepend(bar, notice, list);
  let pressedAt = -1; // the wait (ReplayState.waits) Next was pressed in: no second press in it
  let choosing = false;
  let view = replayView(null);
  // the keyboard is in this chat, or fell to the page from it (a control that was disabled)
  let lastInChat = false;
  const onFocusIn = () => { lastInChat = true; };
  const onFocusOut = (/** @type {FocusEvent} */ e) => { if (e.relatedTarget && !root.contains(/** @type {Node} */ (e.relatedTarget))) lastInChat = false; };
  root.addEventListener("focusin", onFocusIn);
  root.addEventListener("focusout", onFocusOut);
  const inChat = () => {
    const a = document.activeElement;
    return !!a && (root.contains(a) || ((a === document.body || a === document.documentElement) && lastInChat));
  };
  const next = () => {
    if (!view.canNext) return;
    pressedAt = (model.get("replay") || {}).waits ?? 0;
    if (!send({ type: "next" })) pressedAt = -1;
    sync();
  };
  /** @param {"continue"|"live"} choice */
  const choose = (choice) => {
    if (!view.notice || choosing || (choice === "live" && view.notice.liveUnavailable)) return;
    const refocus = root.contains(document.activeElement);
    choosing = true;
    if (!send({ type: "replay_choice", choice })) choosing = false;
    if (refocus) nextBtn.focus({ preventScroll: true });
  };
  /** @param {KeyboardEvent} e */
  const onKey = (e) => {
    if (!view.stepping) return;
    const what = replayKey(e, e.target, nextBtn);
    if (!what) return;
    e.preventDefault(); // no page scroll on Space, no click from the button's own Space
    e.stopPropagation(); // the notebook's command mode never sees it
    if (what === "next") next();
  };
  root.addEventListener("keydown", onKey);
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
  let focusedAt = -1; // the wait Next last took the keyboard in
  let hadNotice = false;
  const sync = () => {
    const switchable = !!model.get("switchable");
    const state = model.get("replay") || {};
    if (!state.waiting || state.waits !== pressedAt) pressedAt = -1; // played: a new wait takes a new press
    if (!state.mismatch) choosing = false;
    view = replayView(state, pressedAt >= 0);
    newBtn.style.display = histBtn.style.display = switchable ? "" : "none";
    counter.style.display = view.show ? "" : "none";
    nextBtn.style.display = view.stepping ? "" : "none"; // a replay without step=True plays without Next
    counter.textContent = view.counter;
    nextBtn.setAttribute("aria-disabled", String(!view.canNext));
    nextBtn.title = view.nextTitle;
    notice.style.display = view.notice ? "" : "none";
    if (view.notice) {
      noticeText.textContent = view.notice.text;
      liveBtn.textContent = view.notice.liveLabel;
      liveBtn.setAttribute("aria-disabled", String(!!view.notice.liveUnavailable));
      liveBtn.title = view.notice.liveUnavailable || "Let the live model answer this prompt (the recording waits for its own)";
      why.textContent = view.notice.liveUnavailable ? `Answer live is unavailable: ${view.notice.liveUnavailable}` : "";
      if (!hadNotice && inChat()) continueBtn.focus({ preventScroll: true }); // the keyboard goes to the choice
    } else if (view.canNext && state.waits !== focusedAt && inChat()) {
      focusedAt = state.waits; // once per wait: a teacher who moves on keeps the keyboard where they put it
      nextBtn.focus({ preventScroll: true }); // a step waits: the keyboard goes to Next (from Stop, or the page)
    }
    hadNotice = !!view.notice;
    bar.style.display = switchable || view.show ? "" : "none";
    if (!switchable) hide();
  };
  model.on("msg:custom", onMsg);
  model.on("change:switchable", sync);
  model.on("change:replay", sync);
  model.on("change:conversation_key", hide);
  sync();
  return () => {
    root.removeEventListener("keydown", onKey);
    root.removeEventListener("focusin", onFocusIn);
    root.removeEventListener("focusout", onFocusOut);
    model.off("msg:custom", onMsg);
    model.off("change:switchable", sync);
    model.off("change:replay", sync);
    model.off("change:conversation_key", hide);
  };
}
