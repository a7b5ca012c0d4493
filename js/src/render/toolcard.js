// A tool call as a card: name, pretty arguments, live status, result or error, duration,
// and Approve / Deny while it waits for the user's decision.
import { h, fmtSeconds, pretty } from "./dom.js";

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
    this.args = h("pre", { class: "nba-tool-args" });
    this.approve = /** @type {HTMLButtonElement} */ (h("button", { type: "button", class: "nba-btn nba-approve", text: "Approve",
      onclick: () => this.decide({ type: "approve", call_id: this.callId }) }));
    this.deny = /** @type {HTMLButtonElement} */ (h("button", { type: "button", class: "nba-btn nba-deny", text: "Deny",
      onclick: () => this.decide({ type: "deny", call_id: this.callId, reason: "denied by the user" }) }));
    this.actions = h("div", { class: "nba-tool-actions" }, this.approve, this.deny);
    this.result = h("div", { class: "nba-tool-result" });
    this.el = h("div", { class: "nba-tool", "data-call-id": this.callId },
      h("div", { class: "nba-tool-head" }, h("span", { class: "nba-tool-icon", text: "⚙" }),
        h("code", { class: "nba-tool-name", text: call.name || "tool" }), this.badge, this.dur),
      this.args, this.actions, this.result);
    this.key = "";
  }

  /** @param {any} msg */
  decide(msg) {
    this.approve.disabled = this.deny.disabled = true;
    if (!this.send(msg)) this.approve.disabled = this.deny.disabled = false; // no kernel: nothing was decided
  }

  /** @param {any} call @param {any} env the tool's SYSTEM -> ENVIRONMENT step, if any */
  update(call, env) {
    const status = toolStatus(env);
    const key = JSON.stringify([call, env && [env.status, env.content, env.error, env.approval, env.run_seconds, env.finished_at]]);
    if (key === this.key) return;
    this.key = key;
    this.args.textContent = pretty(call.args ?? {});
    this.badge.textContent = STATUS[status];
    this.badge.className = `nba-badge nba-st-${status}`;
    this.el.dataset.status = status;
    const waiting = status === "waiting";
    this.actions.style.display = waiting ? "" : "none";
    if (waiting) this.approve.disabled = this.deny.disabled = false;
    const secs = (env && env.run_seconds) ?? (env && env.finished_at && env.created_at ? env.finished_at - env.created_at : null);
    this.dur.textContent = fmtSeconds(secs);
    this.result.replaceChildren();
    if (env && (env.error || (env.content && status !== "waiting"))) {
      const isErr = !!env.error || status === "error";
      this.result.append(h("div", { class: "nba-tool-label", text: isErr ? "Error" : status === "denied" ? "Denied" : "Result" }),
        h("pre", { class: isErr ? "nba-tool-error" : "nba-tool-out", text: env.error || pretty(env.content) }));
    }
  }
}
