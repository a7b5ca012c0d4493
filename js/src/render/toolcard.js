// A tool call as a card: name, pretty arguments, live status, result or error, duration,
// and Approve / Deny while it waits for the user's decision. A result with a rich display
// (the step's `display`: a table as text/html, a figure or image as image/png) shows that,
// with the text the model got folded away below it. A tool whose argument is code (CODE_TOOLS)
// shows that code highlighted, from the moment it is asked for (while it waits for Approve),
// with Copy and, where the host allows (see ../host.js), Insert as cell below.
import DOMPurify from "dompurify";
import { h, fmtSeconds, pretty } from "./dom.js";
import { showCode } from "../markdown.js";
import { hostOf, copyText } from "../host.js";
import { lineDiff } from "../diff.js";

/** Tools that change a notebook cell: their card shows the diff before Approve, and Undo once applied. */
export const CELL_TOOLS = new Set(["edit_cell", "insert_cell"]);

/** @type {Map<string, (msg: any) => void>} */
const undoWaiting = new Map();
let undoIds = 0;

/** The kernel answered an Undo ({"type": "undo", "id", "ok", "text"}). @param {any} msg */
export function undoAnswered(msg) {
  const done = undoWaiting.get(String(msg.id || ""));
  if (done) { undoWaiting.delete(String(msg.id)); done(msg); }
}

/** The arguments of a call as an object. @param {any} call */
function argsOf(call) {
  let args = call ? call.args : null;
  if (typeof args === "string") { try { args = JSON.parse(args); } catch { args = null; } }
  return args && typeof args === "object" ? args : {};
}

/** The diff lines of a cell tool's call: the step's preview when it has one, else the call's new
 * source against the cell's source now (`old`: null when unknown). @param {any} call @param {any} env @param {string|null} old */
export function cellDiff(call, env, old) {
  const preview = env && env.preview;
  if (preview && Array.isArray(preview.diff)) return { diff: preview.diff, problem: String(preview.problem || ""), cut: !!preview.cut };
  const args = argsOf(call);
  const source = typeof args.source === "string" ? args.source : "";
  return { diff: lineDiff(call.name === "insert_cell" ? "" : old ?? "", source), problem: "", cut: false };
}

/** Which cell a cell tool's card is about: "new markdown cell (cell 3)", "cell c2 (cell 2)".
 * @param {any} call @param {any} env */
export function cellWhere(call, env) {
  const args = argsOf(call);
  const position = env && env.preview && env.preview.position ? ` (cell ${env.preview.position})` : "";
  if (call.name !== "insert_cell") return `cell ${String(args.cell_id || "?")}${position}`;
  const type = args.cell_type === "markdown" || args.cell_type === "raw" ? `${args.cell_type} ` : ""; // else code
  return `new ${type}cell${position}`;
}

/** Tools whose call carries code: tool name -> the argument holding it and its language. */
export const CODE_TOOLS = { run_python: { arg: "code", language: "python" } };

/** The code of a code tool's call and its other arguments, or null for any other call.
 * @param {any} call @returns {{code: string, language: string, rest: Record<string, any>}|null} */
export function codeOf(call) {
  const spec = call && Object.prototype.hasOwnProperty.call(CODE_TOOLS, call.name) ? CODE_TOOLS[call.name] : null;
  let args = call ? call.args : null;
  if (typeof args === "string") { try { args = JSON.parse(args); } catch { return null; } }
  if (!spec || !args || typeof args !== "object" || typeof args[spec.arg] !== "string") return null;
  const rest = { ...args };
  delete rest[spec.arg];
  return { code: args[spec.arg], language: spec.language, rest };
}

/** Characters that change how code reads without showing themselves: bidirectional controls
 * (Trojan Source: the code approved would not be the code read) and invisible ones (zero-width
 * spaces and joiners, word joiners, soft hyphens, the BOM, tag characters). */
const HIDDEN = /[\u00AD\u061C\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]|\uDB40[\uDC00-\uDC7F]/g;
const BIDI = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/;

/** The hidden characters in `text`, as `U+XXXX` labels in order. @param {string} text @returns {string[]} */
export function hiddenChars(text) {
  return [...String(text).matchAll(HIDDEN)].map((m) => `U+${m[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}`);
}

/** HTML (escaped text, or highlight.js spans) with each hidden character shown as a visible
 * `⟨U+202E⟩` marker instead. @param {string} html @returns {string} */
export function markHidden(html) {
  return html.replace(HIDDEN, (ch) => {
    const label = `U+${ch.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
    const kind = BIDI.test(ch) ? "bidirectional control" : "invisible character";
    return `<span class="nba-hidden-char" title="${kind} ${label}">⟨${label}⟩</span>`;
  });
}

/** @param {string} text */
function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The card's warning for hidden characters in a call, or "" when it has none. @param {string[]} found */
export function hiddenWarning(found) {
  if (!found.length) return "";
  const bidi = found.some((label) => BIDI.test(String.fromCodePoint(parseInt(label.slice(2), 16))));
  const what = bidi ? "hidden bidirectional or invisible characters" : "invisible characters";
  return `⚠ This call holds ${found.length} ${what} (shown as ⟨U+…⟩): what runs may not be what it looks like. ` +
    "Read it with them in mind before approving.";
}

/** Flash a button's label for a moment. @param {HTMLElement} btn @param {string} text */
function flash(btn, text) {
  const label = btn.dataset.label || btn.textContent || "";
  btn.dataset.label = label;
  btn.textContent = text;
  setTimeout(() => { btn.textContent = label; }, 1500);
}

const TABLE = { ALLOWED_TAGS: ["table", "thead", "tbody", "tfoot", "tr", "th", "td", "caption", "p", "br", "span", "div"],
  ALLOWED_ATTR: ["colspan", "rowspan"] };
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** The rich part of a result, or null. @param {any} display */
export function richResult(display) {
  if (!display || typeof display !== "object") return null;
  const png = display["image/png"];
  if (typeof png === "string" && BASE64.test(png)) {
    return h("img", { class: "nba-tool-image", alt: "image returned by the tool", loading: "lazy", decoding: "async", src: `data:image/png;base64,${png}` });
  }
  const html = display["text/html"];
  if (typeof html === "string" && DOMPurify.isSupported) {
    const box = h("div", { class: "nba-tool-table" });
    box.innerHTML = DOMPurify.sanitize(html, TABLE);
    return box.querySelector("table") ? box : null;
  }
  return null;
}

/** How often a running tool's elapsed time is redrawn (ms). */
export const TICK_MS = 200;

const STATUS = {
  requested: "requested", waiting: "waiting for approval", manual: "waiting for a result", running: "running",
  done: "done", error: "error", denied: "denied", canceled: "canceled",
};

/** Seconds as a badge says them: "420 ms", "2.7 s", "1 min 5 s". @param {number} s */
function shortSeconds(s) {
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${s.toFixed(1)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

/** The badge's words: the status, or for a tool stopped while it ran, for how long it ran
 * ("stopped after 2.7 s"; a call canceled before it ran stays "canceled"). @param {any} env */
export function badgeText(env) {
  const status = toolStatus(env);
  const ran = status === "canceled" && env.approval && env.approval !== "canceled" && typeof env.run_seconds === "number";
  return ran ? `stopped after ${shortSeconds(env.run_seconds)}` : STATUS[status];
}

/** How long a running tool has run at `now` (seconds since its approval, else since it was asked),
 * or null when it is not running. @param {any} env @param {number} now seconds since the epoch */
export function runningSeconds(env, now) {
  if (toolStatus(env) !== "running") return null;
  const start = typeof env.decided_at === "number" ? env.decided_at : env.created_at;
  return typeof start === "number" ? Math.max(0, now - start) : null;
}

/** nbagent's own error as a tool's text starts: its class and kind tag ("ToolError: [tool] ", "[io] "). */
const NBAGENT_ERROR = /^(?:[A-Za-z]+Error: )?\[(?:auth|rate_limit|invalid_request|context_length|server|network|timeout|protocol|tool|io|config|budget)(?: \d+)?(?: [\w.-]+)?\] /;

/** What a tool error says to a person: without nbagent's exception class and kind tag
 * ("ToolError: [tool] cell … changed" reads "cell … changed"). @param {string} text */
export function errorForPeople(text) {
  return String(text || "").replace(NBAGENT_ERROR, "") // a Python error's own class ("ZeroDivisionError: …") stays
    .replace(/: call read_notebook\b[^\n]*$/, " (the agent is told to read the notebook again)"); // the model's instruction, said for people
}

/** The scrollable boxes of a card and how each is named to a screen reader. */
const SCROLLERS = [[".nba-tool-out", "Result of"], [".nba-tool-error", "Error of"], [".nba-tool-table", "Table returned by"],
  [".nba-tool-args", "Arguments of"], [".nba-diff-body", "Diff of"], ["pre", "Code of"]];

/** The card's status from the tool step (or none yet). @param {any} env */
export function toolStatus(env) {
  if (!env) return "requested";
  const approval = env.approval;
  switch (env.status) {
    case "WAITING_FOR_USER": return approval === "manual" || approval === "result" ? "manual" : "waiting";
    case "ACTIVE": return "running";
    case "DONE": return approval === "denied" ? "denied" : "done";
    case "ERROR": case "TERMINAL_ERROR": return approval === "denied" ? "denied" : "error";
    case "CANCELED": return "canceled";
    default: return "running";
  }
}

const CHANGE_MARK = { created: "+", changed: "~", deleted: "−" };

/** What the code changed in the kernel: one line per variable. @param {any[]} changes */
export function changesList(changes) {
  return h("div", { class: "nba-changes" }, h("div", { class: "nba-tool-label", text: "Variables" }),
    h("ul", {}, ...changes.map((c) => h("li", { class: `nba-change nba-change-${c.change}`,
      text: `${CHANGE_MARK[/** @type {"created"} */ (c.change)] || "·"} ${c.name}: ${c.change}${c.type ? ` (${c.type}${c.size ? `, ${c.size}` : ""})` : ""}` }))));
}

export class ToolCard {
  /** @param {any} call @param {(msg: import("../protocol").ChatRequest) => boolean} send */
  constructor(call, send) {
    this.callId = call.id || "";
    this.send = send;
    this.badge = h("span", { class: "nba-badge" });
    this.dur = h("span", { class: "nba-tool-dur" });
    this.server = h("span", { class: "nba-tool-server" }); // the MCP server the tool belongs to
    this.args = h("pre", { class: "nba-tool-args" });
    this.codeEl = h("code", { class: "hljs" });
    this.code = "";
    this.copyBtn = h("button", { type: "button", class: "nba-tool-copy", text: "Copy", title: "Copy the code",
      onclick: () => copyText(this.code).then((ok) => flash(this.copyBtn, ok ? "Copied" : "Copy failed")) });
    this.insertBtn = h("button", { type: "button", class: "nba-insert", text: "Insert as cell below",
      title: "Insert this code as a new cell below the chat's cell", onclick: () => this.insert() });
    this.codeLang = h("span", { class: "nba-code-lang" });
    this.codeBox = h("div", { class: "nba-code nba-tool-code" },
      h("div", { class: "nba-code-head" }, this.codeLang, h("span", { class: "nba-code-btns" }, this.copyBtn, this.insertBtn)),
      h("pre", {}, this.codeEl));
    this.approve = /** @type {HTMLButtonElement} */ (h("button", { type: "button", class: "nba-btn nba-approve", text: "Approve",
      onclick: () => this.decide({ type: "approve", call_id: this.callId }) }));
    this.deny = /** @type {HTMLButtonElement} */ (h("button", { type: "button", class: "nba-btn nba-deny", text: "Deny",
      onclick: () => this.decide({ type: "deny", call_id: this.callId, reason: "denied by the user" }) }));
    this.actions = h("div", { class: "nba-tool-actions" }, this.approve, this.deny);
    this.result = h("div", { class: "nba-tool-result" });
    this.isCell = CELL_TOOLS.has(call.name);
    this.diffBox = h("div", { class: "nba-diff" });
    this.oldSource = /** @type {string|null} */ (null); // the cell's source when the call was first shown
    this.undoBtn = /** @type {HTMLButtonElement} */ (h("button", { type: "button", class: "nba-btn nba-undo", text: "Undo",
      title: "Put the cell back as it was before this call", onclick: () => this.undo() }));
    this.undone = "";
    this.writtenBy = h("div", { class: "nba-written-by" });
    this.turnNo = -1;
    this.warning = h("div", { class: "nba-tool-warning", role: "alert" }); // hidden characters in the call
    this.name = String(call.name || "tool");
    this.ticker = /** @type {any} */ (null); // the elapsed-time clock while the tool runs
    this.shown = false; // the card has been on the page
    this.el = h("div", { class: "nba-tool", "data-call-id": this.callId },
      h("div", { class: "nba-tool-head" }, h("span", { class: "nba-tool-icon", text: "⚙" }),
        h("code", { class: "nba-tool-name", text: call.name || "tool" }), this.server, this.badge, this.dur),
      this.warning, this.codeBox, this.diffBox, this.args, this.actions, this.result, h("div", { class: "nba-cell-done" }, this.writtenBy, this.undoBtn));
    this.key = "";
  }

  /** A call waits for the user: Approve gets the keyboard, unless the user is elsewhere on the page
   * (focus on the page itself, e.g. after Send disabled the box, or inside this chat, is taken). */
  focusApprove() {
    const chat = this.el.closest(".nba-chat");
    const active = document.activeElement;
    if (!chat || this.approve.disabled || this.actions.style.display === "none") return;
    if (!active || active === document.body || chat.contains(active)) this.approve.focus();
  }

  /** A cell edit was just applied: Undo gets the keyboard, when the keyboard was on this card
   * (Approve, hidden once pressed, dropped it) or nowhere. */
  focusUndo() {
    const active = document.activeElement;
    if (this.undoBtn.style.display === "none" || this.undoBtn.disabled) return;
    if (!active || active === document.body || this.el.contains(active)) this.undoBtn.focus();
  }

  /** Each box of the card that scrolls gets a Tab stop and a name (axe: scrollable-region-focusable);
   * one that fits its content gets neither Tab stop nor role. */
  markScrollers() {
    for (const [selector, label] of SCROLLERS) {
      for (const el of /** @type {HTMLElement[]} */ ([...this.el.querySelectorAll(selector)])) {
        if (el.dataset.scroller) continue;
        const scrolls = el.scrollHeight > el.clientHeight + 1 || el.scrollWidth > el.clientWidth + 1;
        if (!scrolls) continue;
        el.dataset.scroller = "1";
        el.setAttribute("tabindex", "0");
        el.setAttribute("role", "region");
        el.setAttribute("aria-label", `${label} ${this.name}`);
      }
    }
  }

  /** The duration: ticking while the tool runs, the run's length once it ended. @param {any} env */
  showDuration(env) {
    const tick = () => {
      const running = runningSeconds(env, Date.now() / 1000);
      if (running != null) this.dur.textContent = shortSeconds(running);
      if (this.el.isConnected) this.shown = true;
      return running != null && !(this.shown && this.el.isConnected === false); // a card taken off the page stops its clock
    };
    if (this.ticker) { clearInterval(this.ticker); this.ticker = null; }
    if (tick()) {
      this.ticker = setInterval(() => { if (!tick()) { clearInterval(this.ticker); this.ticker = null; } }, TICK_MS);
      return;
    }
    const secs = (env && env.run_seconds) ?? (env && env.finished_at && env.created_at ? env.finished_at - env.created_at : null);
    this.dur.textContent = fmtSeconds(secs);
  }

  /** @param {import("../protocol").ChatRequest_approve | import("../protocol").ChatRequest_deny} msg */
  decide(msg) {
    this.approve.disabled = this.deny.disabled = true;
    if (!this.send(msg)) this.approve.disabled = this.deny.disabled = false; // no kernel: nothing was decided
  }

  /** Insert the code as a new cell below the widget's cell (the button shows only where the host can). */
  insert() {
    const host = hostOf(this.el);
    if (!host) { flash(this.insertBtn, "Not available here"); return; }
    const code = this.code;
    const metadata = host.provenance ? host.provenance(this.callId, code).catch(() => ({})) : Promise.resolve({});
    metadata.then((meta) => host.insertBelow(this.el, code, meta)).then(() => flash(this.insertBtn, "Inserted"), (err) => {
      console.warn("nbagent: insert cell", err);
      flash(this.insertBtn, "Could not insert");
    });
  }

  /** Undo an applied cell edit: the kernel runs conv.undo(call_id) and answers. */
  undo() {
    const id = `u${++undoIds}`;
    this.undoBtn.disabled = true;
    this.undoBtn.textContent = "Undoing…";
    const timer = setTimeout(() => undoAnswered({ id, ok: false, text: "no answer from the kernel (is a cell running?)" }), 15000);
    undoWaiting.set(id, (msg) => {
      clearTimeout(timer);
      this.undone = msg.ok ? "Undone" : "";
      this.undoBtn.textContent = msg.ok ? "Undone" : "Undo";
      this.undoBtn.disabled = !!msg.ok;
      this.undoBtn.title = msg.ok ? "The cell was put back" : `Undo failed: ${msg.text || ""}`;
      if (!msg.ok) this.writtenBy.textContent = `Undo failed: ${msg.text || "unknown error"}`;
    });
    if (!this.send({ type: "undo", id, call_id: this.callId })) { undoWaiting.delete(id); clearTimeout(timer); this.undoBtn.disabled = false; this.undoBtn.textContent = "Undo"; }
  }

  /** The diff of a cell tool's call, highlighted. @param {any} call @param {any} env */
  showDiff(call, env) {
    const shown = this.isCell || !!(env && env.preview && Array.isArray(env.preview.diff)); // run_cell: its preview
    this.diffBox.style.display = shown ? "" : "none";
    if (!shown) return;
    const args = argsOf(call);
    if (this.oldSource == null && call.name === "edit_cell" && typeof args.cell_id === "string") {
      const host = hostOf(this.el);
      this.oldSource = host ? host.source(args.cell_id) : null;
    }
    const { diff, problem, cut } = cellDiff(call, env, this.oldSource);
    const added = diff.filter((/** @type {any} */ d) => d[0] === "+").length, removed = diff.filter((/** @type {any} */ d) => d[0] === "-").length;
    const where = cellWhere(call, env);
    const rows = diff.map((/** @type {any} */ [op, line]) => h("div", { class: `nba-diff-line ${op === "+" ? "nba-diff-add" : op === "-" ? "nba-diff-del" : "nba-diff-ctx"}`,
      text: `${op === "+" ? "+" : op === "-" ? "-" : " "} ${line}` }));
    const runs = !!(env && env.preview && env.preview.action === "run"); // run_cell: the code that runs, not a change
    const head = runs ? `runs ${where}:${cut ? " (cut)" : ""}` : `${where}: +${added} −${removed}${cut ? " (cut)" : ""}`;
    this.diffBox.replaceChildren(h("div", { class: "nba-diff-head", text: head }),
      h("pre", { class: "nba-diff-body" }, ...rows), ...(problem ? [h("div", { class: "nba-diff-problem", text: errorForPeople(problem) })] : []));
  }

  /** @param {any} call */
  showArgs(call) {
    const code = codeOf(call);
    this.codeBox.style.display = code ? "" : "none";
    if (code && code.code !== this.code) {
      this.code = code.code;
      this.codeLang.textContent = code.language;
      // escaped text in highlight.js spans (once the grammars are here); hidden characters shown as markers
      showCode(this.codeEl, code.code, code.language, markHidden);
    }
    const rest = code ? code.rest : this.isCell ? {} : call.args ?? {}; // a cell tool's source shows as its diff
    const empty = (code || this.isCell) && !Object.keys(rest).length;
    const shown = empty ? "" : pretty(rest);
    this.args.innerHTML = markHidden(escapeHtml(shown));
    this.args.style.display = empty ? "none" : "";
    const warning = hiddenWarning([...hiddenChars(code ? code.code : ""), ...hiddenChars(shown)]);
    this.warning.textContent = warning;
    this.warning.style.display = warning ? "" : "none";
  }

  /** @param {any} call @param {any} env the tool's SYSTEM -> ENVIRONMENT step, if any @param {number} [turnNo] */
  update(call, env, turnNo = -1) {
    const status = toolStatus(env);
    const key = JSON.stringify([call, turnNo, env && [env.status, env.tool_server, env.content, env.error, env.approval, env.run_seconds, env.finished_at,
      env.display ? Object.keys(env.display) : null, env.preview ? env.preview.diff : null, env.changes || null]]);
    if (key === this.key) return;
    this.key = key;
    this.showArgs(call);
    this.showDiff(call, env);
    const applied = this.isCell && status === "done";
    const wasLive = ["requested", "waiting", "running"].includes(this.el.dataset.status || "");
    this.undoBtn.style.display = applied ? "" : "none";
    this.undoBtn.setAttribute("aria-label", call.name === "insert_cell" ? "Undo the insertion of the new cell"
      : `Undo the edit of cell ${String(argsOf(call).cell_id || "?")}`);
    if (applied && wasLive) requestAnimationFrame(() => this.focusUndo());
    this.writtenBy.textContent = applied ? `written by the agent, turn ${turnNo >= 0 ? turnNo + 1 : "?"}` : ""; // people count from 1
    /** @type {HTMLElement} */ (this.writtenBy.parentElement).style.display = applied ? "" : "none";
    this.server.textContent = env && env.tool_server ? `MCP · ${env.tool_server}` : "";
    this.badge.textContent = badgeText(env);
    this.badge.className = `nba-badge nba-st-${status}`;
    const waiting = status === "waiting";
    this.actions.style.display = waiting ? "" : "none";
    if (waiting) this.approve.disabled = this.deny.disabled = false;
    if (waiting && this.el.dataset.status !== "waiting") requestAnimationFrame(() => this.focusApprove());
    this.el.dataset.status = status;
    this.showDuration(env);
    this.result.replaceChildren();
    if (env && (env.error || (env.content && status !== "waiting"))) {
      const isErr = !!env.error || status === "error";
      const rich = isErr ? null : richResult(env.display);
      const said = isErr ? errorForPeople(env.error || env.content) : pretty(env.content);
      const problem = this.diffBox.querySelector(".nba-diff-problem");
      if (isErr && problem && errorForPeople(problem.textContent || "") === said) problem.remove(); // said once, below
      const text = h("pre", { class: isErr ? "nba-tool-error" : "nba-tool-out", text: said });
      const label = isErr ? (this.isCell ? "Not applied" : "Error") : status === "denied" ? "Denied" : "Result";
      this.result.append(h("div", { class: "nba-tool-label", text: label }));
      if (rich) this.result.append(rich, h("details", { class: "nba-tool-text" }, h("summary", { text: "Text the model got" }), text));
      else this.result.append(text);
      const full = isErr && env.error && typeof env.content === "string" ? env.content.trim() : "";
      if (full && full !== env.error.trim()) { // the error's last line above; what the model got (the whole traceback) on demand
        const lines = full.split("\n").length;
        this.result.append(h("details", { class: "nba-tool-text nba-traceback" },
          h("summary", { text: `Full traceback (${lines} line${lines === 1 ? "" : "s"}, as the model got it)` }), h("pre", { class: "nba-tool-out", text: full })));
      }
    }
    const changes = env && Array.isArray(env.changes) ? env.changes : [];
    if (changes.length) this.result.append(changesList(changes));
    requestAnimationFrame(() => this.markScrollers());
  }
}
