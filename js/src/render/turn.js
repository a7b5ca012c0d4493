// One turn: the user's prompt, the model's steps (thinking, markdown answer, tool cards),
// compaction markers, error cards and the footer.
import { h, fmtInt } from "./dom.js";
import { IncrementalMarkdown } from "../markdown.js";
import { ThinkingBlock } from "./thinking.js";
import { ToolCard } from "./toolcard.js";
import { footerParts } from "./footer.js";

/** @param {any} s */
const isModel = (s) => s.source === "MODEL";
/** @param {any} s */
const isToolRun = (s) => s.type === "TOOL_CALL" && s.target === "ENVIRONMENT";
/** @param {any} s */
const failed = (s) => s.status === "ERROR" || s.status === "TERMINAL_ERROR";

/** @param {string} message @param {number} [code] */
export function errorCard(message, code) {
  return h("div", { class: "nba-error", role: "alert" },
    h("div", { class: "nba-error-title", text: code ? `Error · HTTP ${code}` : "Error" }),
    h("div", { class: "nba-error-msg", text: message || "the turn failed" }));
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
  }

  /** @param {any} step @param {TurnView} turn */
  update(step, turn) {
    if (isModel(step)) this.updateModel(step, turn);
    else if (step.type === "COMPACTION") this.setTail("compaction", () => {
      const c = step.compaction || {};
      const sizes = c.tokens_before ? ` · ${fmtInt(c.tokens_before)} → ${fmtInt(c.tokens_after)} tokens` : "";
      return h("div", { class: "nba-compaction", text: `History compacted${sizes}` });
    });
    else if (isToolRun(step)) {
      const call = (step.tool_calls || [])[0] || { id: "", name: "tool", args: {} };
      if (!turn.modelCalls.has(call.id)) { // not announced by a model step: its own card
        const card = turn.card(call);
        if (card.el.parentNode !== this.cards) this.cards.append(card.el);
        card.update(call, step);
        if (this.cards.parentNode !== this.el) this.el.append(this.cards);
      }
    } else if (step.type === "FINISH" || step.type === "SYSTEM_MESSAGE") {
      if (failed(step) || step.error) this.setTail("err:" + step.error, () => errorCard(step.error, step.http_code));
    }
    this.step = step;
  }

  /** @param {any} step @param {TurnView} turn */
  updateModel(step, turn) {
    const streaming = step.status === "ACTIVE" && turn.running; // a failed turn leaves steps ACTIVE
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
        card.update(call, turn.toolRuns.get(call.id));
      }
    }
    if (failed(step) && step.error) this.setTail("err:" + step.error, () => errorCard(step.error, step.http_code));
    else if (step.status === "CANCELED") this.setTail("stopped", () => h("div", { class: "nba-stopped", text: "⏹ stopped" }));
    this.el.classList.toggle("nba-active", streaming);
  }

  /** @param {string} key @param {() => HTMLElement} make */
  setTail(key, make) {
    if (key === this.tailKey) return;
    this.tailKey = key;
    this.tail.replaceChildren(make());
    if (this.tail.parentNode !== this.el) this.el.append(this.tail);
  }
}

export class TurnView {
  /** @param {(msg: any) => void} send */
  constructor(send) {
    this.send = send;
    this.prompt = h("div", { class: "nba-prompt" });
    this.body = h("div", { class: "nba-turn-body" });
    this.error = h("div", { class: "nba-turn-error" });
    this.footer = h("div", { class: "nba-footer" });
    this.el = h("div", { class: "nba-turn" }, this.prompt, this.body, this.error, this.footer);
    /** @type {Map<number, StepView>} */ this.steps = new Map();
    /** @type {Map<string, ToolCard>} */ this.cards = new Map();
    /** @type {Map<string, any>} */ this.toolRuns = new Map();
    /** @type {Set<string>} */ this.modelCalls = new Set();
    this.turn = null;
    this.shownError = false;
    this.running = true;
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
    const user = turn.steps.find((s) => s.source === "USER");
    const promptText = user ? user.content : rec ? rec.prompt : "";
    if (this.prompt.textContent !== promptText) this.prompt.textContent = promptText;
    this.prompt.style.display = promptText ? "" : "none";
    this.toolRuns = new Map(turn.steps.filter(isToolRun).map((s) => [((s.tool_calls || [])[0] || {}).id, s]));
    this.modelCalls = new Set(turn.steps.filter(isModel).flatMap((s) => (s.tool_calls || []).map((/** @type {any} */ c) => c.id)));
    this.running = rec ? rec.status === "running" : true;
    this.shownError = turn.steps.some((s) => !isToolRun(s) && !!s.error && (failed(s) || s.type === "FINISH"));
    let prev = null;
    for (const step of turn.steps) {
      if (step.source === "USER") continue;
      let view = this.steps.get(step.step_index);
      if (!view) {
        view = new StepView(step);
        this.steps.set(step.step_index, view);
        this.body.insertBefore(view.el, prev ? prev.nextSibling : this.body.firstChild);
      }
      if (view.step !== step || isModel(step) || isToolRun(step)) view.update(step, this);
      prev = view.el;
    }
    const running = this.running;
    this.el.classList.toggle("nba-running", running);
    const wantError = rec && rec.status === "error" && !this.shownError ? rec.error || "the turn failed" : "";
    if ((this.error.dataset.msg || "") !== wantError) {
      this.error.dataset.msg = wantError;
      this.error.replaceChildren(...(wantError ? [errorCard(wantError, rec.http_code)] : []));
    }
    const parts = running ? [] : footerParts(rec);
    const text = parts.join(" · ");
    if (this.footer.textContent !== text) this.footer.textContent = text;
    this.footer.style.display = text ? "" : "none";
  }
}
