// One turn: the user's prompt, the model's steps (thinking, markdown answer, tool cards),
// compaction markers, one error card and the footer.
import { h, fmtInt } from "./dom.js";
import { IncrementalMarkdown } from "../markdown.js";
import { ThinkingBlock } from "./thinking.js";
import { ToolCard } from "./toolcard.js";
import { footerParts, turnModel } from "./footer.js";

const LONG_PROMPT_CHARS = 1200; // longer prompts (or more lines) are shown collapsed
const LONG_PROMPT_LINES = 16;

/** @param {any} s */
const isModel = (s) => s.kind === "model_call";
/** @param {any} s */
/** A tool execution step: the kernel says what each step is (`kind`, from Step.kind). */
const isToolRun = (s) => s.kind === "tool_run";
/** @param {any} s */
const failed = (s) => s.status === "ERROR" || s.status === "TERMINAL_ERROR";

/** @param {string} message @param {number} [code] */
export function errorCard(message, code) {
  return h("div", { class: "nba-error", role: "alert" },
    h("div", { class: "nba-error-title", text: code ? `Error · HTTP ${code}` : "Error" }),
    h("div", { class: "nba-error-msg", text: message || "the turn failed" }));
}

/** A square "stop" mark as inline SVG (the ⏹ character has no glyph in many fonts). */
export function stopIcon() {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 10 10");
  svg.setAttribute("class", "nba-icon");
  svg.setAttribute("aria-hidden", "true");
  const rect = document.createElementNS(ns, "rect");
  for (const [k, v] of Object.entries({ x: "1", y: "1", width: "8", height: "8", rx: "1.5", fill: "currentColor" })) rect.setAttribute(k, v);
  svg.append(rect);
  return svg;
}

/** The errors a turn reports (its steps' and its record's), each message once: a failed model
 * call marks both its step and the turn's FINISH, and the record repeats it. A system message
 * (an MCP server that did not start) is shown where it happened, before the answer, not here.
 * @param {any[]} steps @param {any} rec @returns {{message: string, code: number}[]} */
export function turnErrors(steps, rec) {
  /** @type {{message: string, code: number}[]} */
  const out = [];
  const add = (/** @type {string} */ message, /** @type {number} */ code) => {
    const m = (message || "").trim();
    if (!m) return;
    const same = out.find((e) => e.message.includes(m) || m.includes(e.message));
    if (same) {
      if (m.length > same.message.length) same.message = m;
      same.code = same.code || code || 0;
    } else out.push({ message: m, code: code || 0 });
  };
  for (const s of steps) {
    if (!isToolRun(s) && s.error && (failed(s) || s.kind === "finish") && s.type !== "SYSTEM_MESSAGE") add(s.error, s.http_code);
  }
  if (rec && rec.status === "error") add(rec.error || "the turn failed", rec.http_code);
  return out;
}

/** What a system message step says in the turn: its text, then its error. @param {any} step */
export function systemNoticeText(step) {
  return [step.content, step.error].map((t) => String(t || "").trim()).filter(Boolean).join(" ");
}

/** Whether a compaction marker is worth showing: one that removed nothing is not. @param {any} c */
export function compactionShown(c) {
  return !(c && c.tokens_before && c.tokens_before === c.tokens_after);
}

/** The muted line a model step shows while it waits: the provider's latest retry, until the
 * answer starts. @param {any} step @param {boolean} streaming */
export function stepNotice(step, streaming) {
  return streaming && !step.content && !(step.tool_calls || []).length ? String(step.notice || "") : "";
}

/** What a step says of a refusal, as the saved transcript words it: a model's refusal text, or the
 * provider's notice when it blocked the prompt (on the turn's FINISH). @param {any} step */
export function refusalText(step) {
  if (!step.refusal) return "";
  if (isModel(step)) return `The model declined: ${step.refusal}`;
  return step.kind === "finish" ? String(step.refusal) : "";
}

class StepView {
  /** @param {any} step */
  constructor(step) {
    this.el = h("div", { class: "nba-step", "data-step": step.step_index });
    /** @type {ThinkingBlock|null} */ this.thinking = null;
    /** @type {IncrementalMarkdown|null} */ this.md = null;
    this.cards = h("div", { class: "nba-cards" });
    this.tail = h("div", { class: "nba-step-tail" });
    this.step = null;
    this.tailKey = "";
    /** @type {HTMLElement|null} */ this.notice = null;
    /** @type {HTMLElement|null} */ this.refusal = null;
  }

  /** @param {any} step @param {TurnView} turn */
  update(step, turn) {
    if (isModel(step)) this.updateModel(step, turn);
    else if (step.kind === "compaction" && compactionShown(step.compaction)) {
      const c = step.compaction || {};
      const sizes = c.tokens_before ? ` · ${fmtInt(c.tokens_before)} → ${fmtInt(c.tokens_after)} tokens` : "";
      this.setTail(`compaction${sizes}`, () => h("div", { class: "nba-compaction", text: `History compacted${sizes}` }));
    }
    else if (step.type === "SYSTEM_MESSAGE") { // e.g. an MCP server that did not start: said before the answer
      const text = systemNoticeText(step);
      this.setTail(`system:${text}`, () => h("div", { class: `nba-system-notice${failed(step) ? " nba-system-error" : ""}`,
        role: failed(step) ? "alert" : "note", text }));
    }
    else if (isToolRun(step)) {
      const call = (step.tool_calls || [])[0] || { id: "", name: "tool", args: {} };
      if (!turn.modelCalls.has(call.id)) { // not announced by a model step: its own card
        const card = turn.card(call);
        if (card.el.parentNode !== this.cards) this.cards.append(card.el);
        card.update(call, step, turn.turnNo());
        if (this.cards.parentNode !== this.el) this.el.append(this.cards);
      }
    }
    this.showRefusal(refusalText(step));
    this.step = step;
  }

  /** @param {string} text */
  showRefusal(text) {
    if (!this.refusal) {
      if (!text) return;
      this.refusal = h("div", { class: "nba-refusal", role: "note" });
      this.el.insertBefore(this.refusal, this.cards.parentNode === this.el ? this.cards : null);
    }
    if (this.refusal.textContent !== text) this.refusal.textContent = text;
    this.refusal.style.display = text ? "" : "none";
  }

  /** @param {any} step @param {TurnView} turn */
  updateModel(step, turn) {
    const streaming = step.status === "ACTIVE" && turn.running; // a failed turn leaves steps ACTIVE
    this.showNotice(stepNotice(step, streaming));
    if (step.thinking) {
      if (!this.thinking) { this.thinking = new ThinkingBlock(); this.el.prepend(this.thinking.el); }
      const tokens = step.usage_metadata ? step.usage_metadata.thoughts_token_count : 0;
      this.thinking.update(step.thinking, !streaming || !!step.content || (step.tool_calls || []).length > 0, tokens);
    }
    if (step.content) {
      if (!this.md) {
        const box = h("div", { class: "nba-md" });
        this.el.insertBefore(box, this.cards.parentNode === this.el ? this.cards : null);
        this.md = new IncrementalMarkdown(box);
      }
      this.md.set(step.content);
      if (!streaming) this.md.flush();
    }
    if ((step.tool_calls || []).length) {
      if (this.cards.parentNode !== this.el) this.el.append(this.cards);
      for (const call of step.tool_calls) {
        const card = turn.card(call);
        if (card.el.parentNode !== this.cards) this.cards.append(card.el);
        card.update(call, turn.toolRuns.get(call.id), turn.turnNo());
      }
    }
    if (step.status === "CANCELED") this.setTail("stopped", () => h("div", { class: "nba-stopped" }, stopIcon(), " stopped"));
    this.el.classList.toggle("nba-active", streaming);
  }

  /** @param {string} text */
  showNotice(text) {
    if (!this.notice) {
      if (!text) return;
      this.notice = h("div", { class: "nba-step-notice", role: "status" });
      this.el.prepend(this.notice);
    }
    if (this.notice.textContent !== text) this.notice.textContent = text;
    this.notice.style.display = text ? "" : "none";
  }

  /** @param {string} key @param {() => HTMLElement} make */
  setTail(key, make) {
    if (key === this.tailKey) return;
    this.tailKey = key;
    this.tail.replaceChildren(make());
    if (this.tail.parentNode !== this.el) this.el.append(this.tail);
  }
}

export const ATTACH_HEADER = "Attached notebook variables"; // nbagent/notebook/variables.py

/** A prompt split into what the user typed and the `@name` variables attached to it (variables.py's
 * attach_variables: a header line, then `--- @name ---` and its description for each).
 * @param {string} prompt @returns {{text: string, attached: {name: string, text: string, label: string}[]}} */
export function splitAttachments(prompt) {
  const marker = `\n\n[${ATTACH_HEADER}: `;
  const at = prompt.indexOf(marker);
  const close = at < 0 ? -1 : prompt.indexOf("]\n", at);
  if (close < 0) return { text: prompt, attached: [] };
  const body = prompt.slice(close + 2);
  const heads = [...body.matchAll(/^--- @([A-Za-z_][A-Za-z0-9_]*) ---$/gm)];
  if (!heads.length) return { text: prompt, attached: [] };
  const attached = heads.map((m, i) => {
    const start = /** @type {number} */ (m.index) + m[0].length + 1;
    const text = body.slice(start, i + 1 < heads.length ? heads[i + 1].index : undefined).trimEnd();
    return { name: m[1], text, label: attachmentLabel(m[1], text) };
  });
  return { text: prompt.slice(0, at), attached };
}

/** "📎 sales · DataFrame 8×3": the name, its type and shape from the description's first line
 * ("sales: DataFrame, 8 rows × 3 columns (…)"), found below the "[variable sales]" line and the
 * fence the description comes in. @param {string} name @param {string} text */
export function attachmentLabel(name, text) {
  const lines = text.split("\n", 3);
  const first = lines.find((line) => line.startsWith(`${name}: `)) || lines[0];
  const type = (first.startsWith(`${name}: `) ? first.slice(name.length + 2) : "").split(/[,(]/, 1)[0].trim();
  const shape = first.match(/(\d[\d,]*) rows × (\d[\d,]*) columns/);
  const length = first.match(/, length (\d+(?:,\d{3})*)/);
  const size = shape ? ` ${shape[1]}×${shape[2]}` : length ? `, length ${length[1]}` : "";
  return `📎 ${name}${type ? ` · ${type}${size}` : ""}`;
}

/** The user's prompt; a long one is collapsed with a "Show all" toggle; attached variables are
 * chips that open their description. */
class PromptView {
  constructor() {
    this.text = h("div", { class: "nba-prompt-text" });
    this.chips = h("div", { class: "nba-attachments" });
    this.el = h("div", { class: "nba-prompt" }, this.text, this.chips);
    /** @type {HTMLButtonElement|null} */ this.more = null;
    this.value = null;
  }

  /** @param {string} prompt */
  set(prompt) {
    if (prompt === this.value) return;
    this.value = prompt;
    const { text, attached } = splitAttachments(prompt);
    this.text.textContent = text;
    this.chips.replaceChildren(...attached.map((a) => h("details", { class: "nba-attachment" },
      h("summary", { text: a.label, title: `What the model got about @${a.name}` }), h("pre", { text: a.text }))));
    this.chips.style.display = attached.length ? "" : "none";
    this.el.style.display = prompt ? "" : "none";
    let lines = 1;
    for (let i = text.indexOf("\n"); i >= 0 && lines <= LONG_PROMPT_LINES; i = text.indexOf("\n", i + 1)) lines++;
    const long = text.length > LONG_PROMPT_CHARS || lines > LONG_PROMPT_LINES;
    this.el.classList.toggle("nba-long", long);
    if (long && !this.more) {
      this.more = /** @type {HTMLButtonElement} */ (h("button", { type: "button", class: "nba-more", onclick: () => this.toggle() }));
      this.el.append(this.more);
    }
    if (this.more) this.more.style.display = long ? "" : "none";
    this.collapse(long);
  }

  toggle() { this.collapse(!this.el.classList.contains("nba-collapsed")); }

  /** @param {boolean} collapsed */
  collapse(collapsed) {
    this.el.classList.toggle("nba-collapsed", collapsed);
    if (this.more) {
      this.more.textContent = collapsed ? `Show all (${fmtInt((this.value || "").length)} characters)` : "Show less";
      this.more.setAttribute("aria-expanded", String(!collapsed));
    }
  }
}

export class TurnView {
  /** @param {(msg: import("../protocol").ChatRequest) => boolean} send */
  constructor(send) {
    this.send = send;
    this.prompt = new PromptView();
    this.body = h("div", { class: "nba-turn-body" });
    this.error = h("div", { class: "nba-turn-error" });
    this.footer = h("div", { class: "nba-footer" });
    this.switched = h("div", { class: "nba-switch", role: "note" });
    this.switched.style.display = "none";
    this.el = h("div", { class: "nba-turn" }, this.switched, this.prompt.el, this.body, this.error, this.footer);
    /** @type {Map<number, StepView>} */ this.steps = new Map();
    /** @type {Map<string, ToolCard>} */ this.cards = new Map();
    /** @type {Map<string, any>} */ this.toolRuns = new Map();
    /** @type {Set<string>} */ this.modelCalls = new Set();
    this.turn = null;
    this.running = true;
    this.errorKey = "";
  }

  /** This turn's number as conv.turns counts it (-1 while unknown). */
  turnNo() {
    const rec = this.turn && this.turn.record;
    if (rec && Number.isInteger(rec.turn)) return rec.turn;
    const step = this.turn && this.turn.steps.find((s) => Number.isInteger(s.turn) && s.turn >= 0);
    return step ? step.turn : -1;
  }

  /** Mark a model switch above this turn: `before` answered the turn before it ("" for none).
   * @param {string} before */
  markSwitch(before) {
    const now = turnModel(this.turn && this.turn.record);
    const text = before && now && before !== now ? `Model switched: ${before} → ${now}` : "";
    if (this.switched.textContent !== text) this.switched.textContent = text;
    this.switched.style.display = text ? "" : "none";
  }

  /** @param {any} call */
  card(call) {
    const id = call.id || `${call.name}:${JSON.stringify(call.args)}`;
    let card = this.cards.get(id);
    if (!card) { card = new ToolCard(call, this.send); this.cards.set(id, card); }
    return card;
  }

  /** @param {import("../reducer.js").Turn} turn */
  update(turn) {
    if (turn === this.turn) return;
    this.turn = turn;
    const rec = turn.record;
    const user = turn.steps.find((s) => s.kind === "prompt");
    this.prompt.set(user ? user.content : rec ? rec.prompt : "");
    this.toolRuns = new Map(turn.steps.filter(isToolRun).map((s) => [((s.tool_calls || [])[0] || {}).id, s]));
    this.modelCalls = new Set(turn.steps.filter(isModel).flatMap((s) => (s.tool_calls || []).map((/** @type {any} */ c) => c.id)));
    this.running = rec ? rec.status === "running" : true;
    let prev = null;
    const present = new Set(turn.steps.map((s) => s.step_index));
    for (const [index, view] of this.steps) { // a step the turn no longer has (it moved to its own turn)
      if (!present.has(index)) { view.el.remove(); this.steps.delete(index); }
    }
    for (const step of turn.steps) {
      if (step.kind === "prompt") continue;
      let view = this.steps.get(step.step_index);
      if (!view) {
        view = new StepView(step);
        this.steps.set(step.step_index, view);
        this.body.insertBefore(view.el, prev ? prev.nextSibling : this.body.firstChild);
      }
      if (view.step !== step || isModel(step) || isToolRun(step)) view.update(step, this);
      prev = view.el;
    }
    this.el.classList.toggle("nba-running", this.running);
    this.showErrors(turnErrors(turn.steps, rec));
    const parts = this.running ? [] : footerParts(rec);
    const text = parts.join(" · ");
    if (this.footer.textContent !== text) this.footer.textContent = text;
    this.footer.style.display = text ? "" : "none";
  }

  /** One card for the turn's errors, after its partial answer. @param {{message: string, code: number}[]} errors */
  showErrors(errors) {
    const key = JSON.stringify(errors);
    if (key === this.errorKey) return;
    this.errorKey = key;
    const message = errors.map((e) => e.message).join("\n");
    this.error.replaceChildren(...(errors.length ? [errorCard(message, errors.find((e) => e.code)?.code)] : []));
  }
}
