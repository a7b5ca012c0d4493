// The chat's usage footer: the model the next message goes to, tokens in context vs the model's window (a bar, amber near full, red
// over), spend vs budget and the rules file in the system prompt (a course's AGENTS.md, the tutor preset), from the
// `gauge` trait (widget_usage.py); and the over-budget ask.
import { h, fmtInt, fmtCost } from "./dom.js";

export const NEAR_FULL = 0.8; // the bar turns amber from here

/** @param {any} g the gauge trait @returns {{text: string, fill: number|null, level: string, spend: string, overBudget: boolean}} */
export function gaugeParts(g) {
  g = g || {};
  const tokens = g.tokens || 0, window = g.window || 0;
  const fill = window ? tokens / window : null;
  const level = fill == null ? "" : fill > 1 ? "over" : fill >= NEAR_FULL ? "near" : "ok";
  const text = window ? `context ${fmtInt(tokens)} / ${fmtInt(window)} (${Math.round(fill * 100)}%)`
    : tokens ? `context ${fmtInt(tokens)} tokens` : "";
  let spend = g.spent || g.budget != null ? (fmtCost(g.spent || 0) || "$0") : "";
  if (g.budget != null) spend += ` of ${fmtCost(g.budget) || "$0"}`;
  if (spend && g.unpriced) spend += ` (${g.unpriced} unpriced)`;
  const overBudget = g.budget != null && (g.spent || 0) > g.budget;
  return { text, fill, level, spend, overBudget };
}

export class GaugeView {
  constructor() {
    this.bar = h("span", { class: "nba-gauge-fill" });
    this.label = h("span", { class: "nba-gauge-text" });
    this.spend = h("span", { class: "nba-spend" });
    this.model = h("span", { class: "nba-model", title: "The model the next message goes to" });
    this.rules = h("span", { class: "nba-rules", title: "Rules added to the system prompt" });
    // not a live region: a screen reader should read the answers, not every change of these numbers
    this.el = h("div", { class: "nba-gauge", "aria-live": "off" }, this.model, this.rules,
      h("span", { class: "nba-gauge-bar", "aria-hidden": "true" }, this.bar), this.label, this.spend);
    this.key = "";
  }

  /** @param {any} g */
  update(g) {
    const p = gaugeParts(g), model = String((g && g.model) || ""), rules = String((g && g.rules) || "");
    const key = JSON.stringify([p, model, rules]);
    if (key === this.key) return;
    this.key = key;
    this.el.style.display = p.text || p.spend || model || rules ? "" : "none";
    this.model.textContent = model;
    this.model.style.display = model ? "" : "none";
    this.rules.textContent = rules ? `rules: ${rules}` : "";
    this.rules.style.display = rules ? "" : "none";
    this.bar.parentElement.style.display = p.fill == null ? "none" : "";
    this.bar.style.width = `${Math.min(100, Math.round((p.fill || 0) * 100))}%`;
    this.el.dataset.level = p.level;
    this.label.textContent = p.text;
    this.spend.textContent = p.spend;
    this.spend.classList.toggle("nba-over-budget", p.overBudget);
  }
}

/** The over-budget ask: the estimate (text only) with "Send anyway" and "Cancel". */
export class ConfirmView {
  /** @param {(prompt: string) => void} onSend @param {(prompt: string) => void} onCancel */
  constructor(onSend, onCancel) {
    this.text = h("div", { class: "nba-confirm-text" });
    this.prompt = "";
    this.seq = 0;
    const go = h("button", { type: "button", class: "nba-btn nba-send nba-anyway", text: "Send anyway", onclick: () => { this.hide(); onSend(this.prompt); } });
    const no = h("button", { type: "button", class: "nba-btn nba-cancel", text: "Cancel", onclick: () => { this.hide(); onCancel(this.prompt); } });
    this.el = h("div", { class: "nba-confirm", role: "alertdialog" }, this.text, h("div", { class: "nba-confirm-buttons" }, go, no));
    this.hide();
  }

  /** @param {{prompt: string, text: string, seq: number}|null} c */
  update(c) {
    if (!c || c.seq === this.seq) return;
    this.seq = c.seq;
    this.prompt = c.prompt;
    this.text.textContent = c.text;
    this.el.style.display = "";
  }

  hide() { this.el.style.display = "none"; }
}
