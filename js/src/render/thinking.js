// The model's thinking: a collapsible block, open while it streams, collapsed when done.
import { h, fmtInt } from "./dom.js";

export class ThinkingBlock {
  constructor() {
    this.text = document.createTextNode("");
    this.label = h("span", { class: "nba-thinking-label", text: "Thinking…" });
    this.body = h("div", { class: "nba-thinking-body" }, this.text);
    this.el = /** @type {HTMLDetailsElement} */ (h("details", { class: "nba-thinking", open: true },
      h("summary", {}, this.label), this.body));
    this.userToggled = false;
    this.autoClosed = false;
    this.el.querySelector("summary")?.addEventListener("click", () => { this.userToggled = true; });
  }

  /** @param {string} thinking @param {boolean} done @param {number} [tokens] */
  update(thinking, done, tokens) {
    const have = this.text.data;
    if (thinking.startsWith(have)) this.text.appendData(thinking.slice(have.length));
    else this.text.data = thinking;
    const count = tokens ? `${fmtInt(tokens)} tokens` : `≈ ${fmtInt(thinking.length / 4)} tokens`;
    this.label.textContent = done ? `Thought · ${count}` : `Thinking… · ${count}`;
    this.el.classList.toggle("nba-streaming", !done);
    if (done && !this.autoClosed && !this.userToggled) { this.el.open = false; this.autoClosed = true; }
  }
}
