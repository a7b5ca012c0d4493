// A tool call as a card: name, pretty arguments, live status, result or error, duration,
// and Approve / Deny while it waits for the user's decision. A result with a rich display
// (the step's `display`: a table as text/html, a figure or image as image/png) shows that,
// with the text the model got folded away below it. A tool whose argument is code (CODE_TOOLS)
// shows that code highlighted, from the moment it is asked for (while it waits for Approve),
// with Copy and, where the host allows (see ../host.js), Insert as cell below.
import DOMPurify from "dompurify";
import { h, fmtSeconds, pretty } from "./dom.js";
import { highlight, codeClass } from "../markdown.js";
import { hostOf, copyText } from "../host.js";

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

const STATUS = {
  requested: "requested", waiting: "waiting for approval", manual: "waiting for a result", running: "running",
  done: "done", error: "error", denied: "denied", canceled: "canceled",
};

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

export class ToolCard {
  /** @param {any} call @param {(msg: any) => boolean} send */
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
    this.el = h("div", { class: "nba-tool", "data-call-id": this.callId },
      h("div", { class: "nba-tool-head" }, h("span", { class: "nba-tool-icon", text: "⚙" }),
        h("code", { class: "nba-tool-name", text: call.name || "tool" }), this.server, this.badge, this.dur),
      this.codeBox, this.args, this.actions, this.result);
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

  /** @param {any} msg */
  decide(msg) {
    this.approve.disabled = this.deny.disabled = true;
    if (!this.send(msg)) this.approve.disabled = this.deny.disabled = false; // no kernel: nothing was decided
  }

  /** Insert the code as a new cell below the widget's cell (the button shows only where the host can). */
  insert() {
    const host = hostOf(this.el);
    if (!host) { flash(this.insertBtn, "Not available here"); return; }
    host.insertBelow(this.el, this.code).then(() => flash(this.insertBtn, "Inserted"), (err) => {
      console.warn("nbagent: insert cell", err);
      flash(this.insertBtn, "Could not insert");
    });
  }

  /** @param {any} call */
  showArgs(call) {
    const code = codeOf(call);
    this.codeBox.style.display = code ? "" : "none";
    if (code && code.code !== this.code) {
      this.code = code.code;
      this.codeLang.textContent = code.language;
      this.codeEl.className = codeClass(code.language);
      this.codeEl.innerHTML = highlight(code.code, code.language); // escaped text in highlight.js spans
    }
    const rest = code ? code.rest : call.args ?? {};
    const empty = code && !Object.keys(rest).length;
    this.args.textContent = empty ? "" : pretty(rest);
    this.args.style.display = empty ? "none" : "";
  }

  /** @param {any} call @param {any} env the tool's SYSTEM -> ENVIRONMENT step, if any */
  update(call, env) {
    const status = toolStatus(env);
    const key = JSON.stringify([call, env && [env.status, env.tool_server, env.content, env.error, env.approval, env.run_seconds, env.finished_at,
      env.display ? Object.keys(env.display) : null]]);
    if (key === this.key) return;
    this.key = key;
    this.showArgs(call);
    this.server.textContent = env && env.tool_server ? `MCP · ${env.tool_server}` : "";
    this.badge.textContent = STATUS[status];
    this.badge.className = `nba-badge nba-st-${status}`;
    const waiting = status === "waiting";
    this.actions.style.display = waiting ? "" : "none";
    if (waiting) this.approve.disabled = this.deny.disabled = false;
    if (waiting && this.el.dataset.status !== "waiting") requestAnimationFrame(() => this.focusApprove());
    this.el.dataset.status = status;
    const secs = (env && env.run_seconds) ?? (env && env.finished_at && env.created_at ? env.finished_at - env.created_at : null);
    this.dur.textContent = fmtSeconds(secs);
    this.result.replaceChildren();
    if (env && (env.error || (env.content && status !== "waiting"))) {
      const isErr = !!env.error || status === "error";
      const rich = isErr ? null : richResult(env.display);
      const text = h("pre", { class: isErr ? "nba-tool-error" : "nba-tool-out", text: env.error || pretty(env.content) });
      this.result.append(h("div", { class: "nba-tool-label", text: isErr ? "Error" : status === "denied" ? "Denied" : "Result" }));
      if (rich) this.result.append(rich, h("details", { class: "nba-tool-text" }, h("summary", { text: "Text the model got" }), text));
      else this.result.append(text);
      const full = isErr && env.error && typeof env.content === "string" ? env.content.trim() : "";
      if (full && full !== env.error.trim()) { // the error's last line above; what the model got (the whole traceback) on demand
        const lines = full.split("\n").length;
        this.result.append(h("details", { class: "nba-tool-text nba-traceback" },
          h("summary", { text: `Full traceback (${lines} line${lines === 1 ? "" : "s"}, as the model got it)` }), h("pre", { class: "nba-tool-out", text: full })));
      }
    }
  }
}
