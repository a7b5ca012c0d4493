// The `@name` popup of the chat box: a list of the kernel's variables under the caret.
// Typing `@` asks the kernel for its names once per popup ({"type": "names", "id"}; the answer
// carries the same id); Arrow keys move, Enter or Tab picks, Escape closes, a click picks.
// Accessible: the list is a listbox of options, the box names the active one
// (aria-activedescendant) while the popup is open.
import { h } from "./dom.js";
import { mentionAt, matchNames, pickMention, parseNames } from "../mention.js";

let boxes = 0;

/** The caret's position in a textarea, relative to its top-left corner: a hidden copy of the box
 * (every computed style) holds the text before it and a marker.
 * @param {HTMLTextAreaElement} area @param {number} pos @returns {{left: number, top: number, height: number}} */
export function caretPoint(area, pos) {
  const style = getComputedStyle(area);
  const mirror = h("div");
  for (const p of style) mirror.style.setProperty(p, style.getPropertyValue(p));
  Object.assign(mirror.style, { position: "absolute", visibility: "hidden", whiteSpace: "pre-wrap", top: "0", left: "0",
    height: "auto", overflow: "hidden" });
  const mark = h("span", { text: "\u200b" });
  mirror.append(area.value.slice(0, pos), mark);
  document.body.append(mirror);
  const point = { left: mark.offsetLeft - area.scrollLeft, top: mark.offsetTop - area.scrollTop, height: mark.offsetHeight };
  mirror.remove();
  return point;
}

export class MentionBox {
  /** @param {HTMLTextAreaElement} input @param {(id: string) => boolean} request asks the kernel for its names */
  constructor(input, request) {
    this.input = input;
    this.request = request;
    this.uid = `nba-mentions-${++boxes}`;
    this.el = h("ul", { class: "nba-mentions", role: "listbox", id: this.uid, "aria-label": "Variables in the kernel" });
    this.el.addEventListener("mousedown", (e) => e.preventDefault()); // keep the focus in the box
    this.el.addEventListener("click", (e) => {
      const li = /** @type {HTMLElement|null} */ (/** @type {HTMLElement} */ (e.target).closest?.(".nba-mention"));
      if (li) this.pick(Number(li.dataset.index));
    });
    input.setAttribute("aria-autocomplete", "list");
    input.setAttribute("aria-controls", this.uid);
    input.addEventListener("input", () => this.refresh());
    input.addEventListener("click", () => this.refresh());
    input.addEventListener("blur", () => this.close());
    /** @type {import("../mention.js").Variable[]|null} */ this.names = null; // this popup's names (null: asked, not answered)
    /** @type {import("../mention.js").Variable[]} */ this.shown = [];
    this.active = 0;
    this.open = false;
    this.pending = "";
    this.seq = 0;
    /** @type {{start: number, query: string}|null} */ this.at = null;
    this.close();
  }

  /** Show, filter or close the popup for the text before the caret. */
  refresh() {
    const at = this.input.selectionStart === this.input.selectionEnd ? mentionAt(this.input.value, this.input.selectionStart) : null;
    if (!at) { this.close(); return; }
    this.at = at;
    if (!this.open) { // a new popup: ask for the names now in the kernel
      this.open = true;
      this.names = null;
      this.pending = `${this.uid}-${++this.seq}`;
      if (!this.request(this.pending)) { this.close(); return; }
    }
    this.render();
  }

  /** The kernel's answer. @param {import("../protocol").ChatEvent_names} msg */
  receive(msg) {
    if (!msg || msg.id !== this.pending || !this.open) return;
    this.names = parseNames(msg.names);
    this.active = 0;
    this.render();
  }

  render() {
    if (!this.open || !this.at) return;
    const shown = this.names ? matchNames(this.names, this.at.query) : [];
    if (shown.map((v) => v.name).join("\n") !== this.shown.map((v) => v.name).join("\n")) this.active = 0;
    this.shown = shown;
    if (!shown.length) { this.hide(); return; } // no answer from the kernel yet, or nothing matches
    this.el.replaceChildren(...shown.map((v, i) => h("li", { class: "nba-mention", role: "option", id: `${this.uid}-${i}`,
      "data-index": i }, h("span", { class: "nba-mention-name", text: v.name }), h("span", { class: "nba-mention-type", text: v.type }))));
    this.place();
    this.mark();
  }

  /** Under the caret's line; above it when the chat has no room below (its box clips). */
  place() {
    const p = caretPoint(this.input, this.at ? this.at.start : 0);
    const top = this.input.offsetTop + p.top;
    this.el.style.left = `${this.input.offsetLeft + p.left}px`;
    this.el.style.top = `${top + p.height + 2}px`;
    this.el.style.display = "";
    const chat = this.input.closest(".nba-chat");
    if (chat && this.el.getBoundingClientRect().bottom > chat.getBoundingClientRect().bottom) {
      this.el.style.top = `${top - this.el.offsetHeight - 2}px`;
    }
  }

  mark() {
    this.el.querySelectorAll(".nba-mention").forEach((li, i) => li.setAttribute("aria-selected", String(i === this.active)));
    const li = this.el.querySelector(`[id="${this.uid}-${this.active}"]`);
    if (li && this.shown.length) {
      this.input.setAttribute("aria-activedescendant", li.id);
      if (li.scrollIntoView) li.scrollIntoView({ block: "nearest" });
    } else this.input.removeAttribute("aria-activedescendant");
  }

  /** @returns {boolean} whether the list is on screen with something to pick */
  visible() { return this.shown.length > 0; }

  hide() {
    this.el.style.display = "none";
    this.shown = [];
    this.input.removeAttribute("aria-activedescendant");
  }

  close() {
    this.open = false;
    this.pending = "";
    this.at = null;
    this.hide();
  }

  /** @param {number} i */
  pick(i) {
    const v = this.shown[i];
    if (!v || !this.at) return;
    const { text, caret } = pickMention(this.input.value, this.at.start, this.input.selectionStart, v.name);
    this.input.value = text;
    this.input.setSelectionRange(caret, caret);
    this.close();
    this.input.dispatchEvent(new Event("input", { bubbles: true })); // listeners see the new text (the popup stays closed)
  }

  /** Keys for the popup; true when the key was used here. @param {KeyboardEvent} e */
  onKey(e) {
    if (e.key === "Escape" && this.open) { this.close(); e.preventDefault(); e.stopPropagation(); return true; }
    if (!this.visible() || e.ctrlKey || e.metaKey || e.altKey) return false;
    const n = this.shown.length;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      this.active = (this.active + (e.key === "ArrowDown" ? 1 : n - 1)) % n;
      this.mark();
    } else if ((e.key === "Enter" && !e.shiftKey) || (e.key === "Tab" && !e.shiftKey)) {
      this.pick(this.active);
    } else return false;
    e.preventDefault();
    e.stopPropagation();
    return true;
  }
}
