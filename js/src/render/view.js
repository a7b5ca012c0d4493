// The whole chat: turns, a notice line, the input box with Send and Stop.
//
// Keyboard: the box handles Enter (send), Shift+Enter (a new line) and Escape (leave the box);
// every other key (Ctrl+S, Ctrl+Enter, ...) reaches the notebook's shortcuts.
// No control waits forever: a prompt the kernel does not take up (refused, kernel busy or gone)
// unlocks the box, and Stop can be pressed again while a turn has not ended.
import { h } from "./dom.js";
import { TurnView } from "./turn.js";
import { turnModel } from "./footer.js";
import { GaugeView, ConfirmView } from "./gauge.js";
import { MentionBox } from "./mentions.js";
import { cellRefs } from "../live.js";

const WAIT_HINT_MS = 8000; // no word from the kernel after a send: say why, let Stop unlock
const STOP_RETRY_MS = 5000; // Stop pressed, turn still running: enable Stop again
export const SHOWN_TURNS = 20; // a long chat renders its latest turns; earlier ones on demand
export const EARLIER_TURNS = 40; // turns one press of "Show earlier turns" adds

/** How many of a chat's first turns stay unrendered behind "Show earlier turns": none while the
 * chat is empty (null: not decided), all but the latest SHOWN_TURNS when it first has turns (or
 * has fewer than before: another conversation), and the same again once the rendered turns
 * outgrow SHOWN_TURNS + EARLIER_TURNS while the view follows the stream (the reader is at the
 * end). @param {number} total @param {number|null} hidden @param {boolean} following
 * @returns {number|null} */
export function hiddenTurns(total, hidden, following) {
  if (!total) return null;
  const latest = Math.max(0, total - SHOWN_TURNS);
  if (hidden === null || hidden > total) return latest;
  if (following && total - hidden > SHOWN_TURNS + EARLIER_TURNS) return latest;
  return hidden;
}

export class ChatView {
  /** @param {HTMLElement} el @param {(msg: import("../protocol").ChatRequest) => boolean} send @param {string} placeholder */
  constructor(el, send, placeholder) {
    this.host = el;
    this.send = send;
    /** @type {((prompt: string) => Promise<any[]>)|null} */ this.cellRefs = null; // set where the notebook is reachable
    // a chat log: screen readers announce what is added (aria-busy holds it while a turn streams)
    this.list = h("div", { class: "nba-turns", role: "log", "aria-live": "polite", "aria-label": "Chat" });
    this.empty = h("div", { class: "nba-empty", text: "No messages yet." });
    this.notice = h("div", { class: "nba-notice", role: "status" });
    // the `autosave` trait: why the turns are not being saved (until a save works), or where they go
    this.autosave = h("div", { class: "nba-autosave", role: "alert" });
    this.autosave.hidden = true;
    this.hint = h("div", { class: "nba-hint", role: "status" });
    this.input = /** @type {HTMLTextAreaElement} */ (h("textarea", { class: "nba-input", rows: 2, placeholder, "aria-label": "Message" }));
    this.sendBtn = /** @type {HTMLButtonElement} */ (h("button", { type: "button", class: "nba-btn nba-send", text: "Send", onclick: () => this.submit() }));
    this.stopBtn = /** @type {HTMLButtonElement} */ (h("button", { type: "button", class: "nba-btn nba-stop", text: "Stop", title: "Stop the running turn",
      onclick: () => this.stop() }));
    this.mentions = new MentionBox(this.input, (id) => this.send({ type: "names", id })); // @name autocomplete
    this.input.addEventListener("keydown", (e) => this.onKey(e));
    this.input.addEventListener("input", () => this.setHint(""));
    this.gauge = new GaugeView();
    this.confirm = new ConfirmView((prompt) => this.submit(prompt, true), (prompt) => { if (!this.input.value) this.input.value = prompt; this.input.focus(); });
    this.newBtn = /** @type {HTMLButtonElement} */ (h("button", { type: "button", class: "nba-btn nba-new", text: "↓ new messages",
      title: "Scroll to the latest message and follow the stream", onclick: () => this.follow() }));
    this.newBtn.hidden = true;
    /** @type {number|null} */ this.hiddenTurns = null; // see hiddenTurns()
    this.earlier = /** @type {HTMLButtonElement} */ (h("button", { type: "button", class: "nba-btn nba-earlier", onclick: () => this.showEarlier() }));
    this.earlier.hidden = true;
    this.list.append(this.earlier);
    this.root = h("div", { class: "nba-chat" }, h("div", { class: "nba-turns-box" }, this.list, this.newBtn), this.empty, this.notice, this.autosave, this.confirm.el,
      h("div", { class: "nba-inputbar" }, this.input, this.mentions.el, h("div", { class: "nba-buttons" }, this.sendBtn, this.stopBtn)), this.hint, this.gauge.el);
    this.root.addEventListener("click", (e) => this.onClick(e));
    el.append(this.root);
    /** @type {Map<number, TurnView>} */ this.turns = new Map();
    /** @type {import("../reducer.js").State|null} */ this.state = null;
    this.running = null;
    this.waiting = false; // sent a prompt; the kernel has not answered yet
    /** The prompt this view sent, shown at once until the kernel's turn brings it (or it is refused):
     * `after` the newest turn then, `refusals` the refusal count then, `ran` the kernel said running since.
     * @type {{view: TurnView, after: number, refusals: number, ran: boolean}|null} */
    this.echo = null;
    this.refusals = 0; // the state's refusal count when the prompt was sent
    /** @type {any} */ this.waitTimer = null;
    this.refocus = false;
    this.scrollQueued = false;
    /** What the host does after each update (index.js: step aside for the saved transcript). */
    this.afterUpdate = () => {};
    this.watchScroll();
    this.setHint("");
  }

  /** Follow the stream until the *user* scrolls up. Growing content, a programmatic scroll or
   * a block that collapses fire scroll events too; only a scroll that moved up after the user
   * touched the list (wheel, touch, a key, a pointer on its scrollbar) stops following. Scrolling
   * back to the bottom, Send and the "new messages" button follow again. */
  watchScroll() {
    const list = this.list;
    this.stick = true;
    this.intent = false; // the user has touched the list since it was last at the bottom
    this.lastTop = 0;
    this.missed = false; // content arrived while not following
    // where a wheel up found the list, until the list moved up from there: the scroll event of the
    // follow's own scroll to the end, still queued when the wheel comes, must not follow again
    /** @type {number|null} */ this.upFrom = null;
    const touched = () => { this.intent = true; };
    list.addEventListener("wheel", (e) => {
      touched();
      this.upFrom = null;
      if (e.deltaY < 0 && list.scrollTop > 0) { // at once: the frame's follow must not undo it
        this.upFrom = list.scrollTop;
        this.setStick(false);
      }
    }, { passive: true });
    list.addEventListener("touchstart", touched, { passive: true });
    list.addEventListener("pointerdown", touched);
    list.addEventListener("keydown", touched);
    list.addEventListener("scroll", () => {
      const top = list.scrollTop;
      const wheelPending = this.upFrom !== null && top >= this.upFrom;
      if (!wheelPending) this.upFrom = null;
      if (list.scrollHeight - top - list.clientHeight < 40) {
        if (!wheelPending) { this.intent = false; this.setStick(true); }
      } else if (this.intent && top < this.lastTop) this.setStick(false);
      this.lastTop = top;
    }, { passive: true });
    // math, pictures and collapsing thoughts change a turn's height after its render
    this.resized = typeof ResizeObserver === "function" ? new ResizeObserver(() => { if (this.stick) this.scrollToEnd(); }) : null;
  }

  /** @param {boolean} stick */
  setStick(stick) {
    this.stick = stick;
    if (stick) this.missed = false;
    this.showNewButton();
  }

  showNewButton() {
    const below = this.list.scrollHeight - this.list.scrollTop - this.list.clientHeight >= 40;
    this.newBtn.hidden = this.stick || !below;
    this.newBtn.textContent = this.missed ? "↓ new messages" : "↓ latest";
  }

  /** Jump to the newest message and follow the stream again. */
  follow() {
    this.intent = false;
    this.upFrom = null;
    this.setStick(true);
    this.scrollToEnd();
  }

  scrollToEnd() {
    this.list.scrollTop = this.list.scrollHeight;
  }

  /** ipywidgets marks a view whose kernel went away (restart, shutdown) or that never had one. */
  disconnected() {
    return !!this.host.closest?.(".jupyter-widgets-disconnected");
  }

  /** @param {KeyboardEvent} e */
  onKey(e) {
    if (e.isComposing || this.mentions.onKey(e)) return;
    if (e.key === "Shift") {
      // a bare Shift reaching JupyterLab's shortcut handler makes it cancel the line break of the
      // Shift+Enter that follows; Shift alone is no shortcut, so it stays here
      e.stopPropagation();
    } else if (e.key === "Enter" && !e.shiftKey && !e.ctrlKey && !e.metaKey && !e.altKey) {
      e.preventDefault();
      e.stopPropagation();
      this.submit();
    } else if (e.key === "Enter" && e.shiftKey && !e.ctrlKey && !e.metaKey && !e.altKey) {
      e.stopPropagation(); // a new line in the box, not "run cell"
    } else if (e.key === "Escape") {
      e.preventDefault();
      e.stopPropagation();
      this.leave();
    }
  }

  /** Escape: give the keyboard back to the notebook (its cell, when there is one). */
  leave() {
    this.refocus = false;
    this.input.blur();
    const cell = /** @type {HTMLElement|null} */ (this.root.closest(".jp-Cell") || this.root.closest("[tabindex]"));
    if (cell) cell.focus({ preventScroll: true });
  }

  /** @param {string} text */
  setHint(text) {
    if (this.hint.textContent !== text) this.hint.textContent = text;
    this.hint.style.display = text ? "" : "none";
  }

  /** @param {string} [again] a prompt to send again (the over-budget "Send anyway") @param {boolean} [overBudget] */
  submit(again, overBudget = false) {
    const prompt = again != null ? again : this.input.value;
    if (this.state && this.state.dead) { this.setHint(this.state.dead); return; }
    if (!prompt.trim()) { this.setHint("Nothing to send: type a message first (Enter sends, Shift+Enter adds a line)."); return; }
    if (this.running) { this.setHint("A turn is running; press Stop first."); return; }
    if (this.cellRefs && cellRefs(prompt).length) { // @cell, @cell:5: the cells go with the prompt
      this.cellRefs(prompt).then((cells) => this.sendPrompt(prompt, overBudget, cells),
        () => this.sendPrompt(prompt, overBudget, null));
      return;
    }
    this.sendPrompt(prompt, overBudget, null);
  }

  /** @param {string} prompt @param {boolean} overBudget @param {any[]|null} cells the @cell references resolved */
  sendPrompt(prompt, overBudget, cells) {
    /** @type {any} */
    const msg = overBudget ? { type: "send", prompt, over_budget: true } : { type: "send", prompt };
    if (cells && cells.length) msg.cells = cells;
    if (!this.send(msg)) { this.setHint(this.state ? this.state.dead : ""); return; }
    this.setHint("");
    this.confirm.hide();
    this.follow(); // the user's prompt and its answer are what they look at next
    this.input.value = "";
    this.refocus = true; // give the box back after this turn, which the user started here
    this.waiting = true;
    this.refusals = this.state ? this.state.refusals : 0;
    this.setRunning(true); // optimistic: the kernel confirms with `running`
    this.showEcho(prompt);
    clearTimeout(this.waitTimer);
    this.waitTimer = setTimeout(() => {
      if (!this.waiting) return;
      this.setHint("No answer from the kernel yet (is a cell still running?). Stop gives the box back.");
      this.stopBtn.disabled = false;
    }, WAIT_HINT_MS);
  }

  stop() {
    if (this.waiting) { // the kernel never took the prompt up: unlock here
      this.waiting = false;
      this.dropEcho();
      this.setHint("");
      this.setRunning(!!(this.state && this.state.running));
    }
    this.stopBtn.disabled = true;
    this.send({ type: "stop" });
    setTimeout(() => { if (this.running) this.stopBtn.disabled = false; }, STOP_RETRY_MS);
  }

  /** Show the prompt just sent as the next turn's, before the kernel answers (its turn replaces it).
   * @param {string} prompt */
  showEcho(prompt) {
    this.dropEcho();
    const turns = this.state ? this.state.turns : [];
    const view = new TurnView(this.send);
    view.el.classList.add("nba-echo");
    view.update({ turn: -1, record: null, steps: [/** @type {any} */ ({ step_index: -1, kind: "prompt", content: prompt, thinking: "" })] });
    this.echo = { view, after: turns.length ? turns[turns.length - 1].turn : -1, refusals: this.state ? this.state.refusals : 0, ran: false };
    this.list.append(view.el);
    this.empty.style.display = "none";
    this.scrollToEnd();
  }

  dropEcho() {
    if (this.echo) this.echo.view.el.remove();
    this.echo = null;
  }

  /** The kernel's answer to the echoed prompt: its turn came with it (a prompt in a newer turn), it
   * was refused, the kernel is gone, or its run ended without a turn. @param {import("../reducer.js").State} state */
  settleEcho(state) {
    const echo = this.echo;
    if (!echo) return;
    if (state.running) echo.ran = true;
    const arrived = state.turns.some((t) => t.turn > echo.after && t.steps.some((s) => s.kind === "prompt"));
    if (arrived || state.dead || state.refusals !== echo.refusals || (echo.ran && !state.running)) this.dropEcho();
    else if (echo.view.el !== this.list.lastElementChild) this.list.append(echo.view.el); // after the turns
  }

  /** @param {MouseEvent} e */
  onClick(e) {
    const btn = /** @type {HTMLElement} */ (e.target).closest?.(".nba-copy");
    if (!btn) return;
    const code = btn.closest(".nba-code")?.querySelector("code")?.textContent || "";
    const done = () => { btn.textContent = "Copied"; setTimeout(() => { btn.textContent = "Copy"; }, 1200); };
    if (navigator.clipboard) navigator.clipboard.writeText(code).then(done, () => {});
  }

  /** @param {boolean} running */
  setRunning(running) {
    if (running === this.running) return;
    this.running = running;
    const typing = typeof document !== "undefined" && this.root.contains(document.activeElement);
    this.stopBtn.disabled = !running;
    this.input.disabled = running;
    this.sendBtn.disabled = running;
    // the box is locked while a turn streams: the keyboard goes to Stop, not to the page's body
    if (running && typing) this.stopBtn.focus({ preventScroll: true });
    this.root.classList.toggle("nba-is-running", running);
    this.list.setAttribute("aria-busy", String(running));
    // Focus returns only after a turn sent from this box, and only if the user has not moved
    // on: focusing on every state change would steal the notebook's keyboard (Shift+Enter).
    if (!running && this.refocus) {
      this.refocus = false;
      const active = document.activeElement;
      if (!active || active === document.body || this.root.contains(active)) this.input.focus({ preventScroll: true });
    }
  }

  /** Render EARLIER_TURNS more of the turns before the rendered ones, keeping what the reader
   * sees in place (the new turns go above it); the view stops following the stream. */
  showEarlier() {
    if (!this.state || !this.hiddenTurns) return;
    const list = this.list;
    const fromBottom = list.scrollHeight - list.scrollTop;
    this.hiddenTurns = Math.max(0, this.hiddenTurns - EARLIER_TURNS);
    this.setStick(false);
    this.renderTurns(this.state);
    list.scrollTop = list.scrollHeight - fromBottom;
    this.lastTop = list.scrollTop;
  }

  /** The turn views of the rendered turns (the latest, see hiddenTurns), in order.
   * @param {import("../reducer.js").State} state */
  renderTurns(state) {
    const total = state.turns.length;
    this.hiddenTurns = hiddenTurns(total, this.hiddenTurns, this.stick);
    const hidden = this.hiddenTurns || 0;
    this.earlier.hidden = !hidden;
    if (hidden) this.earlier.textContent = `Show earlier turns (${hidden} more)`;
    const seen = new Set();
    /** @type {HTMLElement} */
    let prev = this.earlier;
    for (let i = hidden; i < total; i++) {
      const turn = state.turns[i];
      seen.add(turn.turn);
      let view = this.turns.get(turn.turn);
      if (!view) {
        view = new TurnView(this.send);
        this.turns.set(turn.turn, view);
        if (this.resized) this.resized.observe(view.el);
        this.list.insertBefore(view.el, prev.nextSibling);
      }
      view.update(turn);
      view.markSwitch(i ? turnModel(state.turns[i - 1].record) : "");
      prev = view.el;
    }
    for (const [key, view] of this.turns) {
      if (seen.has(key)) continue;
      if (this.resized) this.resized.unobserve(view.el);
      view.el.remove();
      this.turns.delete(key);
    }
  }

  /** The autosave line ("" hides it). @param {string} text */
  setAutosave(text) {
    this.autosave.textContent = text;
    this.autosave.hidden = !text;
    this.autosave.classList.toggle("nba-autosave-failing", text.startsWith("Not saved"));
  }

  /** @param {import("../reducer.js").State} state */
  update(state) {
    this.state = state;
    this.renderTurns(state);
    this.settleEcho(state);
    this.empty.style.display = state.turns.length || this.echo ? "none" : "";
    const notice = state.dead || state.notice;
    this.notice.textContent = notice;
    this.notice.style.display = notice ? "" : "none";
    this.root.classList.toggle("nba-dead", !!state.dead);
    this.gauge.update(state.gauge);
    if (!state.dead) this.confirm.update(state.confirm);
    // the kernel answered the prompt this view sent (took it up, refused it) or cannot any more
    if (this.waiting && (state.running || state.dead || state.refusals !== this.refusals)) {
      this.waiting = false;
      clearTimeout(this.waitTimer);
      if (this.hint.textContent.startsWith("No answer")) this.setHint("");
    }
    this.setRunning(state.running || this.waiting);
    if (state.dead) this.refocus = false;
    if (!this.scrollQueued) { // after this frame's markdown render, without forcing layout now
      this.scrollQueued = true;
      requestAnimationFrame(() => {
        this.scrollQueued = false;
        if (this.stick) this.scrollToEnd();
        else { this.missed = true; this.showNewButton(); }
      });
    }
  }
}
