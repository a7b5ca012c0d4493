// A small stand-in for the browser's DOM, enough to build and read the widget's cards in node
// (no browser in the fast tier): elements with attributes, children, text, style, dataset,
// classList, focus and a document that knows its active element. Install it before importing
// a module whose top level touches `document`.

class FakeElement {
  /** @param {string} tag */
  constructor(tag) {
    this.tagName = tag.toUpperCase();
    /** @type {FakeElement[]} */
    this.children = [];
    /** @type {FakeElement|null} */
    this.parentElement = null;
    /** @type {Record<string, string>} */
    this.attributes = {};
    this.style = { display: "" };
    /** @type {Record<string, string>} */
    this.dataset = {};
    this.className = "";
    this.disabled = false;
    this.ownText = "";
    this.innerHTMLText = "";
    this.listeners = {};
    const el = this;
    this.classList = {
      contains: (/** @type {string} */ c) => el.className.split(/\s+/).includes(c),
      add: (/** @type {string} */ c) => { if (!el.classList.contains(c)) el.className = `${el.className} ${c}`.trim(); },
      remove: (/** @type {string} */ c) => { el.className = el.className.split(/\s+/).filter((x) => x !== c).join(" "); },
      toggle: (/** @type {string} */ c, /** @type {boolean} */ on) => (on ? el.classList.add(c) : el.classList.remove(c)),
    };
  }

  /** @param {string} k @param {string} v */
  setAttribute(k, v) { this.attributes[k] = String(v); }
  /** @param {string} k */
  getAttribute(k) { return Object.prototype.hasOwnProperty.call(this.attributes, k) ? this.attributes[k] : null; }
  /** @param {string} k */
  removeAttribute(k) { delete this.attributes[k]; }
  /** @param {string} type @param {Function} fn */
  addEventListener(type, fn) { (this.listeners[type] ||= []).push(fn); }
  /** @param {...any} nodes */
  append(...nodes) {
    for (const n of nodes) {
      if (n == null) continue;
      const node = typeof n === "string" ? textNode(n) : n;
      if (node.parentElement) node.parentElement.children = node.parentElement.children.filter((c) => c !== node);
      node.parentElement = this;
      this.children.push(node);
    }
  }
  /** @param {any} node @param {any} ref the child to put it before (null: at the end) */
  insertBefore(node, ref) {
    if (node.parentElement) node.parentElement.children = node.parentElement.children.filter((/** @type {any} */ c) => c !== node);
    node.parentElement = this;
    const at = ref ? this.children.indexOf(ref) : -1;
    if (at < 0) this.children.push(node);
    else this.children.splice(at, 0, node);
    return node;
  }
  /** @param {...any} nodes */
  prepend(...nodes) {
    const first = this.children[0] || null;
    for (const n of nodes) this.insertBefore(typeof n === "string" ? textNode(n) : n, first);
  }
  get firstChild() { return this.children[0] || null; }
  get lastElementChild() { return this.children[this.children.length - 1] || null; }
  get nextSibling() {
    const siblings = this.parentElement ? this.parentElement.children : [];
    return siblings[siblings.indexOf(this) + 1] || null;
  }
  get nextElementSibling() { return this.nextSibling; }
  /** @param {...any} nodes */
  replaceChildren(...nodes) {
    for (const c of this.children) c.parentElement = null;
    this.children = [];
    this.ownText = "";
    this.innerHTMLText = "";
    this.append(...nodes);
  }
  get textContent() { return this.ownText + this.innerHTMLText.replace(/<[^>]*>/g, "") + this.children.map((c) => c.textContent).join(""); }
  set textContent(v) { this.replaceChildren(); this.ownText = String(v ?? ""); }
  get innerHTML() { return this.innerHTMLText; }
  set innerHTML(v) { this.replaceChildren(); this.innerHTMLText = String(v); }
  /** @param {string} selector a class (".x") or a tag name */
  closest(selector) {
    /** @type {FakeElement|null} */
    let el = this;
    while (el && !matches(el, selector)) el = el.parentElement;
    return el;
  }
  /** @param {string} selector */
  querySelector(selector) { return this.querySelectorAll(selector)[0] || null; }
  /** @param {string} selector @returns {FakeElement[]} */
  querySelectorAll(selector) {
    return this.children.flatMap((c) => [...(matches(c, selector) ? [c] : []), ...c.querySelectorAll(selector)]);
  }
  /** @param {FakeElement} other */
  contains(other) {
    for (let el = other; el; el = el.parentElement) if (el === this) return true;
    return false;
  }
  remove() {
    if (this.parentElement) this.parentElement.children = this.parentElement.children.filter((c) => c !== this);
    this.parentElement = null;
  }
  focus() { fakeDocument.activeElement = this; }
  blur() { if (fakeDocument.activeElement === this) fakeDocument.activeElement = fakeDocument.body; }
  click() { for (const fn of this.listeners.click || []) fn({ target: this }); }
}

/** @param {string} text */
function textNode(text) {
  const node = new FakeElement("#text");
  node.ownText = text;
  return node;
}

/** @param {FakeElement} el @param {string} selector */
function matches(el, selector) {
  return selector.startsWith(".") ? el.classList.contains(selector.slice(1)) : el.tagName === selector.toUpperCase();
}

const fakeDocument = {
  body: new FakeElement("body"),
  /** @type {any} */
  activeElement: null,
  /** @param {string} tag */
  createElement: (tag) => new FakeElement(tag),
  /** @param {string} _ns @param {string} tag */
  createElementNS: (_ns, tag) => new FakeElement(tag),
  /** @param {string} text */
  createTextNode: (text) => textNode(text),
};
fakeDocument.activeElement = fakeDocument.body;

/** Put the fake document (and requestAnimationFrame) on globalThis; returns it. */
export function installFakeDom() {
  const g = /** @type {any} */ (globalThis);
  g.document ||= fakeDocument;
  g.requestAnimationFrame ||= (/** @type {Function} */ fn) => { fn(); return 0; };
  return g.document;
}

/** Every element below `el` (itself included) in document order. @param {any} el @returns {any[]} */
export function allElements(el) {
  return [el, ...el.children.flatMap((/** @type {any} */ c) => allElements(c))];
}

/** The text a person sees in `el`: hidden (display none) parts left out. @param {any} el @returns {string} */
export function visibleText(el) {
  if (el.style && el.style.display === "none") return "";
  return el.ownText + el.innerHTMLText.replace(/<[^>]*>/g, "") + el.children.map((/** @type {any} */ c) => visibleText(c)).join(" ");
}
