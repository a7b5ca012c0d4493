// Math in model text: `$...$`, `\(...\)` inline; `$$...$$`, `\[...\]` displayed. Markdown gets
// them from a marked extension (code spans and code blocks are tokenized first, so their `$` is
// never math); plain text (thoughts) from split(). Both leave placeholders —
// <span class="nba-math">TeX</span> — that typeset() turns into MathML once the Temml module
// (static/math.js) is loaded; it is asked of the kernel once per page, when math first appears
// (see assets.js).
import DOMPurify from "dompurify";
import { asset, onAsset } from "./assets.js";

// inline `$x$`: no space inside the dollars, no digit after the closing one ("$5 and $10" is money)
const DOLLAR = /^\$(?!\s)((?:\\.|[^$\\\n])+?)(?<!\s)\$(?!\d)/;
const INLINE = [
  [/^\$\$((?:\\.|[^$\\])+?)\$\$/, true],
  [/^\\\(((?:\\.|[^\\])+?)\\\)/, false],
  [/^\\\[((?:\\.|[^\\])+?)\\\]/, true],
  [DOLLAR, false],
];
const BLOCK = /^ {0,3}(?:\$\$((?:\\.|[^$\\])+?)\$\$|\\\[((?:\\.|[^\\])+?)\\\])[ \t]*(?:\n+|$)/;

/** @param {string} s */
const esc = (s) => s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] || c);

/** @param {string} tex @param {boolean} display */
export const placeholder = (tex, display) =>
  display ? `<div class="nba-math nba-math-display">${esc(tex)}</div>` : `<span class="nba-math">${esc(tex)}</span>`;

/** The marked extension. */
export const mathExtension = {
  extensions: [
    {
      name: "mathBlock", level: "block",
      /** @param {string} src */
      start(src) { const m = /^ {0,3}(\$\$|\\\[)/m.exec(src); return m ? m.index : undefined; },
      /** @param {string} src */
      tokenizer(src) {
        const m = BLOCK.exec(src);
        if (m) return { type: "mathBlock", raw: m[0], text: (m[1] ?? m[2]).trim() };
        return undefined;
      },
      /** @param {any} t */
      renderer(t) { return placeholder(t.text, true); },
    },
    {
      name: "mathInline", level: "inline",
      /** @param {string} src */
      start(src) { const i = src.search(/\$|\\[([]/); return i < 0 ? undefined : i; },
      /** @param {string} src */
      tokenizer(src) {
        for (const [re, display] of INLINE) {
          const m = /** @type {RegExp} */ (re).exec(src);
          if (m && m[1].trim()) return { type: "mathInline", raw: m[0], text: m[1].trim(), display };
        }
        return undefined;
      },
      /** @param {any} t */
      renderer(t) { return placeholder(t.text, t.display); },
    },
  ],
};

/** Plain text (a thought) -> [text, null] and [tex, display] pieces; `code spans` are text.
 * @param {string} text @returns {[string, boolean|null][]} */
export function split(text) {
  /** @type {[string, boolean|null][]} */
  const out = [];
  let plain = "";
  for (let i = 0; i < text.length;) {
    const c = text[i];
    if (c === "`") {
      const end = text.indexOf("`", i + 1);
      const stop = end < 0 ? text.length : end + 1;
      plain += text.slice(i, stop);
      i = stop;
      continue;
    }
    if (c === "$" || c === "\\") {
      const rest = text.slice(i);
      const hit = INLINE.map(([re, d]) => [/** @type {RegExp} */ (re).exec(rest), d]).find(([m]) => m && m[1].trim());
      if (hit) {
        const m = /** @type {RegExpExecArray} */ (hit[0]);
        if (plain) out.push([plain, null]);
        plain = "";
        out.push([m[1].trim(), /** @type {boolean} */ (hit[1])]);
        i += m[0].length;
        continue;
      }
    }
    plain += c;
    i++;
  }
  if (plain) out.push([plain, null]);
  return out;
}

// the widgets' own elements: a host may render them inside a shadow root (marimo), which
// `document.querySelectorAll` never searches; shared by every copy of this bundle on the page
const G = /** @type {any} */ (globalThis);
/** @type {Set<HTMLElement>} */
const roots = G.__nbagentMathRoots || (G.__nbagentMathRoots = new Set());

/** The views' roots (watchMath), also those inside a shadow root. */
export const watchedRoots = () => [...roots];

/** Typeset `el` when the math module arrives (a view's root); returns the unwatch. @param {HTMLElement} el */
export function watchMath(el) {
  roots.add(el);
  return () => { roots.delete(el); };
}

onAsset("math", () => {
  for (const el of roots) typeset(el);
  if (typeof document !== "undefined") document.querySelectorAll(".nba-chat").forEach((el) => typeset(/** @type {HTMLElement} */ (el)));
});

const MATHML = { USE_PROFILES: { mathMl: true }, FORBID_ATTR: ["style", "href", "xlink:href"] };

/** Placeholders under `root` -> MathML (or, before the module is here, ask for it once). @param {HTMLElement} root */
export function typeset(root) {
  const pending = root.querySelectorAll(".nba-math:not(.nba-math-done)");
  if (!pending.length) return;
  const mod = asset("math");
  if (!mod) return;
  for (const el of pending) {
    const tex = el.textContent || "";
    el.classList.add("nba-math-done");
    try {
      el.innerHTML = DOMPurify.sanitize(mod.tex(tex, el.classList.contains("nba-math-display")), MATHML);
      el.setAttribute("title", tex);
    } catch { el.textContent = tex; }
  }
}
