// The whole chat: turns, a notice line, the input box with Send and Stop.
import { h } from "./dom.js";
import { TurnView } from "./turn.js";

export class ChatView {
  /** @param {HTMLElement} el @param {(msg: any) => void} send @param {string} placeholder */
  constructor(el, send, placeholder) {
    this.send = send;
    this.list = h("div", { class: "nba-turns" });
    this.empty = h("div", { class: "nba-empty", text: "No messages yet." });
    this.notice = h("div", { class: "nba-notice", role: "status" });
    this.input = /** @type {HTMLTextAreaElement} */ (h("textarea", { class: "nba-input", rows: 2, placeholder, "aria-label": "Message" }));
    this.sendBtn = /** @type {HTMLButtonElement} */ (h("button", { type: "button", class: "nba-btn nba-send", text: "Send", onclick: () => this.submit() }));
    this.stopBtn = /** @type {HTMLButtonElement} */ (h("button", { type: "button", class: "nba-btn nba-stop", text: "Stop", title: "Stop the running turn",
      onclick: () => { this.stopBtn.disabled = true; send({ type: "stop" }); } }));
    this.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); this.submit(); }
      e.stopPropagation(); // keep JupyterLab's notebook shortcuts out of the text box
    });
    this.root = h("div", { class: "nba-chat" }, this.list, this.empty, this.notice,
      h("div", { class: "nba-inputbar" }, this.input, h("div", { class: "nba-buttons" }, this.sendBtn, this.stopBtn)));
    this.root.addEventListener("click", (e) => this.onClick(e));
    el.append(this.root);
    /** @type {Map<number, TurnView>} */ this.turns = new Map();
    this.running = null;
    this.refocus = false;
    this.scrollQueued = false;
    this.stick = true; // follow the stream while the user is at the bottom
    this.list.addEventListener("scroll", () => {
      this.stick = this.list.scrollHeight - this.list.scrollTop - this.list.clientHeight < 40;
    }, { passive: true });
  }

  submit() {
    const prompt = this.input.value;
    if (!prompt.trim() || this.running) return;
    this.input.value = "";
    this.refocus = true; // give the box back after this turn, which the user started here
    this.setRunning(true); // optimistic: the kernel confirms with `running`
    this.send({ type: "send", prompt });
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
    this.input.disabled = running;
    this.sendBtn.disabled = running;
    this.stopBtn.disabled = !running;
    this.root.classList.toggle("nba-is-running", running);
    // Focus returns only after a turn sent from this box, and only if the user has not moved
    // on: focusing on every state change would steal the notebook's keyboard (Shift+Enter).
    if (!running && this.refocus) {
      this.refocus = false;
      const active = document.activeElement;
      if (!active || active === document.body || this.root.contains(active)) this.input.focus({ preventScroll: true });
    }
  }

  /** @param {import("../reducer.js").State} state */
  update(state) {
    const seen = new Set();
    let prev = null;
    for (const turn of state.turns) {
      seen.add(turn.turn);
      let view = this.turns.get(turn.turn);
      if (!view) {
        view = new TurnView(this.send);
        this.turns.set(turn.turn, view);
        this.list.insertBefore(view.el, prev ? prev.nextSibling : this.list.firstChild);
      }
      view.update(turn);
      prev = view.el;
    }
    for (const [key, view] of this.turns) if (!seen.has(key)) { view.el.remove(); this.turns.delete(key); }
    this.empty.style.display = state.turns.length ? "none" : "";
    this.notice.textContent = state.notice;
    this.notice.style.display = state.notice ? "" : "none";
    this.setRunning(state.running);
    if (this.stick && !this.scrollQueued) { // after this frame's markdown render, without forcing layout now
      this.scrollQueued = true;
      requestAnimationFrame(() => { this.scrollQueued = false; if (this.stick) this.list.scrollTop = this.list.scrollHeight; });
    }
  }
}
