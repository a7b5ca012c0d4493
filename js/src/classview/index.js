// nbagent ClassView front end (anywidget; bundled into static/widget.js with the chat, which hands a
// ClassView's model here: see ../index.js): the teacher's live view of a shared save_to folder, one
// row per student. The kernel polls the folder and sends only the rows that changed (`changed`
// events); over-budget, failing and help rows are highlighted; a click (or Enter) on a row shows
// that student's latest session read-only, with the session browser's code (../browser/shared.js).
// Kernel side and message protocol: nbagent/notebook/class_view.py.
import { h, fmtInt, fmtCost } from "../render/dom.js";
import { shortDate } from "../sessionbar.js";
import { shortModel } from "../browser/filter.js";
import { requester, serveAssets, showTranscript, usageLine } from "../browser/shared.js";

const FRESH_MS = 2500; // how long a changed row stays marked

/** @typedef {{user: string, sessions: number, turns: number, input_tokens: number, output_tokens: number,
 *   tokens: number, cost_usd: number|null, period_cost_usd: number|null, last_active: string|null,
 *   errors_in_a_row: number, over_budget: boolean, asked_for_help: boolean, last_prompt: string,
 *   model: string, latest_session: string}} StudentRow a row of class_summary (analysis/class_summary.py CLASS_COLUMNS) */

/** The row's flags, as (class, badge text, why) triples. @param {StudentRow} r @param {string} period */
export function flags(r, period) {
  /** @type {[string, string, string][]} */
  const out = [];
  if (r.asked_for_help) out.push(["nbc-help", "🙋 help", `asked for help: "${r.last_prompt}"`]);
  if (r.over_budget) out.push(["nbc-over-budget", "over budget", `spent ${fmtCost(r.period_cost_usd)} ${period === "day" ? "today" : "this week"}`]);
  if (r.errors_in_a_row > 0) out.push(["nbc-errors", `${r.errors_in_a_row} error${r.errors_in_a_row === 1 ? "" : "s"} in a row`,
    "the latest turns failed"]);
  return out;
}

/** Where the opened session scrolls to after it is drawn: a first open shows its latest turn; when
 * the student's new turn comes, a teacher at the end (following) is taken to it, one reading further up
 * stays where they read. @param {boolean} again @param {{top: number, height: number, client: number}} before
 * the box's scroll before the redraw @param {number} height its scrollHeight after */
export function followScroll(again, before, height) {
  const following = before.height - before.top - before.client < 40;
  return !again || following ? height : before.top;
}

/** The opened session's line: its usage, and the student's total where the row counts more sessions.
 * @param {StudentRow} row @param {any[]} usage */
export function detailLine(row, usage) {
  const all = row.sessions > 1 && row.cost_usd != null ? ` · all ${fmtInt(row.sessions)} sessions: ${fmtCost(row.cost_usd)}` : "";
  return `latest session: ${usageLine(usage)}${all}`;
}

class ClassViewUI {
  /** @param {any} model @param {HTMLElement} el */
  constructor(model, el) {
    this.model = model;
    this.rpc = requester(model);
    serveAssets(this.rpc);
    /** @type {Map<string, StudentRow>} */ this.students = new Map();
    /** @type {Map<string, number>} */ this.fresh = new Map(); // user -> until when the row is marked
    this.selected = /** @type {string|null} */ (null);
    this.count = h("span", { class: "nbb-count nbc-count" });
    this.rows = h("tbody");
    const heads = ["Student", "Sessions", "Turns", "Tokens in / out", "Cost", "Last active", "Flags"];
    this.table = h("table", { class: "nbb-table nbc-table" }, h("thead", {}, h("tr", {}, ...heads.map((t) => h("th", { text: t })))), this.rows);
    this.title = h("div", { class: "nbb-title" });
    this.status = h("div", { class: "nbb-status", role: "status" });
    this.usage = h("div", { class: "nbb-usage" });
    this.turns = h("div", { class: "nba-turns nbb-transcript" });
    this.detail = h("div", { class: "nbb-detail" }, h("div", { class: "nbb-head" }, this.title), this.status, this.usage, this.turns);
    this.notice = h("div", { class: "nba-notice", role: "status" });
    const budget = model.get("budget_usd");
    this.root = h("div", { class: "nba-chat nbc-class" },
      h("div", { class: "nbb-toolbar" }, h("span", { class: "nbc-folder", text: `Class: ${model.get("folder")}` }),
        budget == null ? null : h("span", { class: "nbb-count", text: `budget ${fmtCost(budget)} a ${model.get("period")}` }), this.count),
      h("div", { class: "nbb-list" }, this.table), this.detail, this.notice);
    el.append(this.root);
    this.rows.addEventListener("click", (e) => this.pick(/** @type {HTMLElement} */ (e.target)));
    this.rows.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); this.pick(/** @type {HTMLElement} */ (e.target)); } });
    this.onMsg = (/** @type {any} */ msg) => { if (msg && msg.type === "changed") this.changed(msg); };
    model.on("msg:custom", this.onMsg);
    this.timer = setInterval(() => this.unmark(), 1000);
    this.renderRows();
    this.rpc.call({ type: "rows" }).then((reply) => {
      if (!reply.ok) { this.setNotice(reply.error); return; }
      for (const r of reply.rows || []) this.students.set(r.user, r);
      this.setNotice(reply.notice || "");
      this.renderRows();
    });
  }

  /** @param {string} text */
  setNotice(text) {
    this.notice.textContent = text;
    this.notice.style.display = text ? "" : "none";
  }

  /** Sessions saved: merge the changed rows, drop the removed ones. @param {import("../protocol").ClassEvent_changed} msg */
  changed(msg) {
    const until = Date.now() + FRESH_MS;
    for (const user of msg.removed || []) this.students.delete(user);
    let reopen = false;
    for (const r of /** @type {StudentRow[]} */ (msg.rows || [])) {
      const old = this.students.get(r.user);
      this.students.set(r.user, r);
      this.fresh.set(r.user, until);
      if (r.user === this.selected && (!old || old.latest_session !== r.latest_session || old.turns !== r.turns)) reopen = true;
    }
    this.setNotice(msg.notice || "");
    this.renderRows();
    if (this.selected !== null && !this.students.has(this.selected)) this.select(null);
    else if (reopen && this.selected !== null) this.open(this.selected, true);
  }

  unmark() {
    const now = Date.now();
    for (const [user, until] of this.fresh) {
      if (until > now) continue;
      this.fresh.delete(user);
      for (const tr of this.rows.querySelectorAll(".nbc-fresh")) if (/** @type {HTMLElement} */ (tr).dataset.user === user) tr.classList.remove("nbc-fresh");
    }
  }

  renderRows() {
    const all = [...this.students.values()].sort((a, b) => a.user.localeCompare(b.user));
    const period = this.model.get("period") || "day";
    this.rows.replaceChildren(...all.map((r) => {
      const marks = flags(r, period);
      const tr = h("tr", { class: ["nbb-row", "nbc-row", ...marks.map((m) => m[0]), r.user === this.selected ? "nbb-selected" : "",
        this.fresh.has(r.user) ? "nbc-fresh" : ""].filter(Boolean).join(" "), tabindex: "0",
        title: r.last_prompt ? `last prompt: ${r.last_prompt}` : "" });
      tr.dataset.user = r.user;
      const cost = fmtCost(r.cost_usd) + (this.model.get("budget_usd") != null && r.period_cost_usd !== r.cost_usd
        ? ` (${fmtCost(r.period_cost_usd)} ${period === "day" ? "today" : "this week"})` : "");
      tr.append(h("td", { class: "nbb-name nbc-user", text: r.user || "(no name)" }),
        h("td", { class: "nbb-num nbc-sessions", text: fmtInt(r.sessions) }),
        h("td", { class: "nbb-num nbc-turns", text: fmtInt(r.turns) }),
        h("td", { class: "nbb-num nbc-tokens", text: `${fmtInt(r.input_tokens)} / ${fmtInt(r.output_tokens)}` }),
        h("td", { class: "nbb-num nbc-cost", text: cost }),
        h("td", { class: "nbc-last", text: shortDate(r.last_active), title: shortModel(r.model) }),
        h("td", { class: "nbc-flags" }, ...marks.map(([cls, text, why]) => h("span", { class: `nbc-badge ${cls}-badge`, text, title: why }))));
      return tr;
    }));
    const n = (/** @type {(r: StudentRow) => boolean} */ f) => all.filter(f).length;
    const parts = [`${all.length} student${all.length === 1 ? "" : "s"}`];
    const help = n((r) => r.asked_for_help), over = n((r) => r.over_budget), errs = n((r) => r.errors_in_a_row > 0);
    if (help) parts.push(`${help} asking for help`);
    if (over) parts.push(`${over} over budget`);
    if (errs) parts.push(`${errs} with errors`);
    this.count.textContent = parts.join(" · ");
  }

  /** @param {HTMLElement} target */
  pick(target) {
    const tr = /** @type {HTMLElement|null} */ (target.closest?.("tr"));
    if (tr && tr.dataset.user != null) this.open(tr.dataset.user);
  }

  /** @param {string|null} user */
  select(user) {
    this.selected = user;
    this.detail.classList.toggle("nbb-open", user !== null);
    if (user === null) { this.turns.replaceChildren(); this.usage.textContent = ""; this.title.textContent = ""; this.status.textContent = ""; }
    for (const tr of this.rows.querySelectorAll("tr")) tr.classList.toggle("nbb-selected", /** @type {HTMLElement} */ (tr).dataset.user === user);
  }

  /** Show the student's latest session; `again`: the same student's row changed (keep the place).
   * @param {string} user @param {boolean} [again] */
  async open(user, again = false) {
    const row = this.students.get(user);
    if (!row) return;
    this.select(user);
    this.title.textContent = `${user || "(no name)"} — latest session`;
    if (!again) this.status.textContent = "Loading…";
    const reply = await this.rpc.call({ type: "open", path: row.latest_session });
    if (this.selected !== user) return;
    this.status.classList.toggle("nbb-error", !reply.ok);
    if (!reply.ok) { this.status.textContent = reply.error; return; }
    this.status.textContent = "";
    this.usage.textContent = detailLine(this.students.get(user) || row, reply.usage || []);
    const box = this.turns, before = { top: box.scrollTop, height: box.scrollHeight, client: box.clientHeight };
    showTranscript(box, reply.turns || []);
    const top = followScroll(again, before, box.scrollHeight);
    box.scrollTop = top;
    if (top === box.scrollHeight) { // to the end: again once turns scrolled into view have their real height
      const toEnd = () => { if (this.selected === user) box.scrollTop = box.scrollHeight; };
      requestAnimationFrame(() => { toEnd(); requestAnimationFrame(toEnd); });
    }
  }

  dispose() {
    clearInterval(this.timer);
    this.rpc.dispose();
    this.model.off("msg:custom", this.onMsg);
  }
}

export const classWidget = {
  /** @param {{model: any, el: HTMLElement}} ctx */
  render({ model, el }) {
    const view = new ClassViewUI(model, el);
    return () => view.dispose();
  },
};
