// The model's thinking: a collapsible block, open while it streams (plain text, appended), collapsed
// when done, its math typeset then.
import { h, fmtInt } from "./dom.js";
import { split, placeholder, typeset } from "../mathtext.js";

export class ThinkingBlock {
  constructor() {
    this.text = document.createTextNode("");
    this.label = h("span", { class: "nba-thinking-label", text: "Thinking…" });
    this.body = h("div", { class: "nba-thinking-body" }, this.text);
    this.el = /** @type {HTMLDetailsElement} */ (h("details", { class: "nba-thinking", open: true },
      h("summary", {}, this.label), this.body));
    this.userToggled = false;
    this.autoClosed = false;
    this.typeset = ""; // the text whose math is typeset (the body is plain text otherwise)
    this.checked = ""; // the finished text last looked at for math
    this.el.querySelector("summary")?.addEventListener("click", () => { this.userToggled = true; });
  }

  /** @param {string} thinking @param {boolean} done @param {number} [tokens] */
  update(thinking, done, tokens) {
    if (this.typeset && thinking !== this.typeset) { this.typeset = ""; this.body.replaceChildren(this.text); }
    const have = this.text.data;
    if (thinking.startsWith(have)) this.text.appendData(thinking.slice(have.length));
    else this.text.data = thinking;
    if (done && !this.typeset && this.checked !== thinking) { this.checked = thinking; this.typesetMath(thinking); }
    const count = tokens ? `${fmtInt(tokens)} tokens` : `≈ ${fmtInt(thinking.length / 4)} tokens`;
    this.label.textContent = done ? `Thought · ${count}` : `Thinking… · ${count}`;
    this.el.classList.toggle("nba-streaming", !done);
    if (done && !this.autoClosed && !this.userToggled) { this.el.open = false; this.autoClosed = true; }
  }

  /** Once done: the text again, with its math as MathML. @param {string} thinking */
  typesetMath(thinking) {
    const pieces = split(thinking);
    if (!pieces.some(([, display]) => display !== null)) return;
    this.typeset = thinking;
    const nodes = pieces.map(([s, display]) => {
      if (display === null) return document.createTextNode(s);
      const tpl = document.createElement("template");
      tpl.innerHTML = placeholder(s, display);
      return /** @type {Node} */ (tpl.content.firstChild);
    });
    this.body.replaceChildren(...nodes);
    typeset(/** @type {HTMLElement} */ (this.body));
  }
}
