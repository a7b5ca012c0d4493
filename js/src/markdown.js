// Markdown for model output: marked (raw HTML shown as text) + highlight.js (grammars: see below) + DOMPurify + math
// (see mathtext.js), rendered incrementally: finished top-level blocks once, only the growing tail again.
import { Marked } from "marked";
import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/core";
import python from "highlight.js/lib/languages/python";
import { mathExtension, typeset } from "./mathtext.js";
import { asset, onAsset } from "./assets.js";

// Python is here (the run_python card shows it at once); the other grammars are static/grammars.js,
// asked of the kernel when a code block first needs one (see assets.js). Until they arrive such a
// block shows plain, marked `nba-hl-pending`, and is highlighted once when they do.
hljs.registerLanguage("python", python);
hljs.registerAliases(["py"], { languageName: "python" });
// No JavaScript / TypeScript grammar (~6.5 KB of bundle each): such blocks show as plain code.
const LAZY = { sql: "sql", bash: "bash", sh: "bash", shell: "bash", console: "bash", zsh: "bash", yaml: "yaml",
  yml: "yaml", json: "json" };

/** Register the grammars module's languages (once). @param {any} mod */
export function registerGrammars(mod) {
  if (hljs.getLanguage("sql")) return;
  for (const name of ["sql", "bash", "yaml", "json"]) hljs.registerLanguage(name, mod[name]);
  hljs.registerAliases(["sh", "shell", "console", "zsh"], { languageName: "bash" });
  hljs.registerAliases(["yml"], { languageName: "yaml" });
}

onAsset("grammars", (mod) => {
  registerGrammars(mod);
  if (typeof document === "undefined") return;
  for (const el of document.querySelectorAll("code.nba-hl-pending")) { // only the blocks shown plain
    const lang = [...el.classList].find((c) => c.startsWith("language-"))?.slice(9);
    el.classList.remove("nba-hl-pending");
    el.innerHTML = highlight(el.textContent || "", lang); // escaped text in highlight.js spans
  }
});

/** @param {string} [lang] */
const langName = (lang) => (lang || "").trim().split(/\s+/)[0].toLowerCase();

/** Whether a block in `lang` waits for the grammars module (asks for it, once per page). @param {string} [lang] */
function pending(lang) {
  const name = langName(lang);
  if (!Object.hasOwn(LAZY, name) || hljs.getLanguage(name)) return false;
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

/** @param {string} code @param {string} [lang] */
export function highlight(code, lang) {
  const name = langName(lang);
  if (name && hljs.getLanguage(name)) {
    try { return hljs.highlight(code, { language: name, ignoreIllegals: true }).value; } catch { /* plain */ }
  }
  return escapeHtml(code);
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
