// Markdown for model output: marked (raw HTML shown as text) + highlight.js (see below) + DOMPurify + math
// (see mathtext.js), rendered incrementally: finished top-level blocks once, only the growing tail again.
import { Marked } from "marked";
import DOMPurify from "dompurify";
import { mathExtension, typeset, watchedRoots } from "./mathtext.js";
import { asset, onAsset } from "./assets.js";

// highlight.js and its grammars (Python, SQL, shell, YAML, JSON) are static/grammars.js, asked of the
// kernel when a code block first needs one (see assets.js). Until they arrive such a block shows
// plain, marked `nba-hl-pending`, and is highlighted once when they do. Other languages (JavaScript,
// TypeScript: ~6.5 KB of bundle each) always show as plain code.
const LAZY = new Set(["python", "py", "sql", "bash", "sh", "shell", "console", "zsh", "yaml", "yml", "json"]);
/** @type {{has: (name: string) => boolean, highlight: (code: string, name: string) => string}|null} */
let grammars = null;

/** Use the grammars module (static/grammars.js) from now on. @param {any} mod */
export function registerGrammars(mod) { grammars = mod; }

// Code shown plain whose HTML is more than its highlighted text (showCode's `post`), shared by every
// copy of this bundle on the page: element -> how to draw it once the grammars are here.
const G = /** @type {any} */ (globalThis);
/** @type {WeakMap<Element, {code: string, lang: string|undefined, post: (html: string) => string}>} */
const plainCode = G.__nbagentPlainCode || (G.__nbagentPlainCode = new WeakMap());

onAsset("grammars", (mod) => {
  registerGrammars(mod);
  if (typeof document === "undefined") return;
  const shown = new Set(); // the blocks shown plain, in the page and in the views' (shadow) roots
  for (const scope of [document, ...watchedRoots()]) for (const el of scope.querySelectorAll("code.nba-hl-pending")) shown.add(el);
  for (const el of shown) {
    const lang = [...el.classList].find((c) => c.startsWith("language-"))?.slice(9);
    const drawn = plainCode.get(el);
    el.classList.remove("nba-hl-pending");
    // escaped text in highlight.js spans
    el.innerHTML = drawn ? drawn.post(highlight(drawn.code, drawn.lang)) : highlight(el.textContent || "", lang);
  }
});

/** @param {string} [lang] */
const langName = (lang) => (lang || "").trim().split(/\s+/)[0].toLowerCase();

/** Whether a block in `lang` waits for the grammars module (asks for it, once per page). @param {string} [lang] */
function pending(lang) {
  if (grammars || !LAZY.has(langName(lang))) return false;
  const mod = asset("grammars");
  if (mod) registerGrammars(mod);
  return !mod;
}

/** The class of a `<code>` element showing `lang`. @param {string} [lang] */
export function codeClass(lang) {
  const name = escapeHtml((lang || "").trim().split(/\s+/)[0]);
  return `hljs${name ? " language-" + name : ""}${pending(lang) ? " nba-hl-pending" : ""}`;
}

/** @param {string} s */
export function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

const SAFE_URL = /^(https?:|mailto:|#|\/|\.\/|\.\.\/|[^:]*$)/i;

/** `code` as escaped text, in highlight.js spans once its grammar is here. @param {string} code @param {string} [lang] */
export function highlight(code, lang) {
  const name = langName(lang);
  if (name && grammars && grammars.has(name)) {
    try { return grammars.highlight(code, name); } catch { /* plain */ }
  }
  return escapeHtml(code);
}

/** Show `code` in the `<code>` element `el`: its class (codeClass) and its highlighted HTML passed
 * through `post` (e.g. markers for hidden characters), again once the grammars arrive when it waits for them.
 * @param {HTMLElement} el @param {string} code @param {string} [lang] @param {(html: string) => string} [post] */
export function showCode(el, code, lang, post = (html) => html) {
  el.className = codeClass(lang);
  el.innerHTML = post(highlight(code, lang));
  if (el.classList.contains("nba-hl-pending")) plainCode.set(el, { code, lang, post });
  else plainCode.delete(el);
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    // model output is text: raw HTML is shown, never interpreted
    html({ text }) { return escapeHtml(text); },
    code({ text, lang }) {
      const name = escapeHtml((lang || "").trim().split(/\s+/)[0]);
      return `<div class="nba-code"><div class="nba-code-head"><span class="nba-code-lang">${name}</span>` +
        `<button type="button" class="nba-copy" title="Copy code">Copy</button></div>` +
        `<pre><code class="${codeClass(lang)}">${highlight(text, lang)}</code></pre></div>`;
    },
    link({ href, title, tokens }) {
      const text = this.parser.parseInline(tokens);
      if (!href || !SAFE_URL.test(href.trim())) return text;
      const t = title ? ` title="${escapeHtml(title)}"` : "";
      return `<a href="${escapeHtml(href)}"${t} target="_blank" rel="noopener noreferrer">${text}</a>`;
    },
    image({ href, text }) {
      // no remote fetches from model output: an image becomes a link
      if (!href || !/^https?:/i.test(href.trim())) return escapeHtml(text);
      return `<a href="${escapeHtml(href)}" target="_blank" rel="noopener noreferrer">🖼 ${escapeHtml(text || href)}</a>`;
    },
  },
});
marked.use(mathExtension);

const PURIFY = { ADD_ATTR: ["target"], FORBID_TAGS: ["style", "form", "input", "img"], FORBID_ATTR: ["style"] };

/** Markdown source -> safe HTML string. @param {string} src */
export function renderMarkdown(src) {
  const html = /** @type {string} */ (marked.parse(src, { async: false }));
  return DOMPurify.isSupported ? DOMPurify.sanitize(html, PURIFY) : html;
}

/**
 * Split markdown into finished top-level blocks and the growing tail: a block is finished once
 * another block follows it. Returns raw sources; `done.join("") + tail === text`.
 * @param {string} text
 * @returns {{done: string[], tail: string}}
 */
export function splitBlocks(text) {
  const tokens = marked.lexer(text);
  let last = -1;
  for (let i = tokens.length - 1; i >= 0; i--) if (tokens[i].type !== "space") { last = i; break; }
  if (last <= 0) return { done: [], tail: text };
  const done = [];
  let used = 0;
  for (let i = 0; i < last; i++) {
    const raw = tokens[i].raw;
    if (tokens[i].type === "space" && done.length) done[done.length - 1] += raw;
    else if (tokens[i].type === "def") return { done: [], tail: text }; // link definitions span blocks
    else done.push(raw);
    used += raw.length;
  }
  if (text.slice(0, used) !== done.join("")) return { done: [], tail: text }; // lexer normalised: be safe
  return { done, tail: text.slice(used) };
}

const raf = typeof requestAnimationFrame === "function" ? requestAnimationFrame : (/** @type {any} */ f) => setTimeout(f, 16);

/** Renders a growing markdown text into `el`; finished blocks are rendered once and kept. */
export class IncrementalMarkdown {
  /** @param {HTMLElement} el */
  constructor(el) {
    this.el = el;
    this.doneEl = document.createElement("div");
    this.tailEl = document.createElement("div");
    this.doneEl.className = "nba-md-done";
    this.tailEl.className = "nba-md-tail";
    el.append(this.doneEl, this.tailEl);
    this.text = "";
    this.doneLen = 0;
    this.shown = null;
    this.scheduled = false;
    this.blocksRendered = 0;
  }

  /** @param {string} text */
  set(text) {
    if (text === this.text) return;
    if (!text.startsWith(this.text.slice(0, this.doneLen))) { // rewritten: start over
      this.doneEl.replaceChildren();
      this.doneLen = 0;
    }
    this.text = text;
    if (this.shown === null && !this.doneLen) { this.flush(); return; } // the first words show at once
    if (!this.scheduled) { this.scheduled = true; raf(() => this.flush()); }
  }

  /** Render now (the first text at once, then once per animation frame). */
  flush() {
    this.scheduled = false;
    const { done, tail } = splitBlocks(this.text.slice(this.doneLen));
    for (const block of done) {
      const div = document.createElement("div");
      div.className = "nba-block";
      div.innerHTML = renderMarkdown(block);
      typeset(div);
      this.doneEl.appendChild(div);
      this.doneLen += block.length;
      this.blocksRendered++;
    }
    if (tail !== this.shown) {
      this.tailEl.innerHTML = tail ? renderMarkdown(tail) : "";
      typeset(this.tailEl);
      this.shown = tail;
    }
  }
}
