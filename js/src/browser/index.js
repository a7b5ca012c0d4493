// nbagent SessionBrowser front end (anywidget; bundled into static/widget.js with the chat, which
// hands a SessionBrowser's model here: see index.js): the saved
// conversations of a folder, searchable; the selected one read-only through the chat widget's own
// renderer (render/turn.js, markdown.js and its sanitiser); Resume shows a live chat widget for it
// (a child widget), Export writes md / html, Delete asks first and moves the file to the trash
// (its notice then has Undo, which moves it back).
// Kernel side and message protocol: nbagent/notebook/session_browser.py.
import { h, fmtInt, fmtCost } from "../render/dom.js";
import { shortDate } from "../sessionbar.js";
import { filterSessions, distinct, shortModel, shortModels } from "./filter.js";
import { requester, serveAssets, showTranscript, usageLine } from "./shared.js";

const SEARCH_DELAY_MS = 250;

/** Show the child chat widget named by `ref` ("anywidget:<id>") in `slot`.
 * @param {any} model @param {any} host @param {string} ref @param {HTMLElement} slot @param {AbortSignal} signal */
async function showChild(model, host, ref, slot, signal) {
  slot.replaceChildren();
  if (!ref) return;
  if (host && typeof host.getWidget === "function") { // anywidget >= 0.11
    const child = await host.getWidget(ref);
    if (!signal.aborted) await child.render({ el: slot, signal });
    return;
  }
  const manager = model.widget_manager; // older anywidget: the ipywidgets manager
  const child = await manager.get_model(ref.replace(/^anywidget:/, ""));
  const view = await manager.create_view(child);
  if (signal.aborted) { view.remove(); return; }
  slot.append(view.el);
  signal.addEventListener("abort", () => view.remove());
}

class BrowserView {
  /** @param {any} model @param {HTMLElement} el @param {any} host */
  constructor(model, el, host) {
    this.model = model;
    this.host = host;
    this.rpc = requester(model);
    serveAssets(this.rpc); // math.js, grammars.js for the shown session
    this.selected = "";
    /** @type {Set<string>|null} */ this.fullText = null;
    this.search = /** @type {HTMLInputElement} */ (h("input", { type: "search", class: "nbb-search", placeholder: "Search titles…", "aria-label": "Search" }));
    this.deep = /** @type {HTMLInputElement} */ (h("input", { type: "checkbox", class: "nbb-fulltext" }));
    this.modelSel = /** @type {HTMLSelectElement} */ (h("select", { class: "nbb-model", "aria-label": "Model" }));
    this.userSel = /** @type {HTMLSelectElement} */ (h("select", { class: "nbb-user", "aria-label": "User" }));
    this.count = h("span", { class: "nbb-count" });
    this.rows = h("tbody");
    this.table = h("table", { class: "nbb-table" },
      h("thead", {}, h("tr", {}, ...["Title", "Updated", "Models", "Turns", "Tokens", "Cost", "User"].map((t) => h("th", { text: t })))), this.rows);
    this.title = h("div", { class: "nbb-title" });
    this.status = h("div", { class: "nbb-status", role: "status" });
    this.confirm = h("div", { class: "nbb-confirm" });
    this.usage = h("div", { class: "nbb-usage" });
    this.turns = h("div", { class: "nba-turns nbb-transcript" });
    const btn = (/** @type {string} */ cls, /** @type {string} */ text, /** @type {() => void} */ fn) =>
      h("button", { type: "button", class: `nba-btn ${cls}`, text, onclick: fn });
    this.actions = h("div", { class: "nbb-actions" },
      btn("nbb-resume", "Resume", () => this.resume()), btn("nbb-export-md", "Export md", () => this.exportAs("md")),
      btn("nbb-export-html", "Export html", () => this.exportAs("html")), btn("nbb-delete", "Delete", () => this.askDelete()));
    this.detail = h("div", { class: "nbb-detail" }, h("div", { class: "nbb-head" }, this.title, this.actions), this.confirm, this.status, this.usage, this.turns);
    this.chatSlot = h("div", { class: "nbb-chat" });
    this.notice = h("div", { class: "nba-notice", role: "status" });
    this.root = h("div", { class: "nba-chat nbb-browser" },
      h("div", { class: "nbb-toolbar" }, this.search, h("label", { class: "nbb-fulltext-label" }, this.deep, " full text"), this.modelSel, this.userSel, this.count,
        h("button", { type: "button", class: "nba-btn nbb-refresh", text: "Refresh", title: "List the folder again", onclick: () => this.refresh() })),
      h("div", { class: "nbb-list" }, this.table), this.detail, this.notice);
    el.append(this.root, this.chatSlot);
    /** @type {any} */ this.timer = null;
    this.search.addEventListener("input", () => this.onSearch());
    this.deep.addEventListener("change", () => this.onSearch());
    this.modelSel.addEventListener("change", () => this.renderRows());
    this.userSel.addEventListener("change", () => this.renderRows());
    this.rows.addEventListener("click", (e) => {
      const tr = /** @type {HTMLElement} */ (e.target).closest?.("tr");
      if (tr && tr.dataset.path && !tr.classList.contains("nbb-unreadable")) this.open(tr.dataset.path);
    });
    this.childAbort = new AbortController();
    this.onSessions = () => this.renderSessions();
    this.onChat = () => this.renderChat();
    this.onNotice = () => this.renderNotice();
    model.on("change:sessions", this.onSessions);
    model.on("change:chat", this.onChat);
    model.on("change:notice", this.onNotice);
    this.renderSessions();
    this.renderNotice();
    this.renderChat();
  }

  renderNotice() {
    const text = this.model.get("notice") || "";
    this.notice.textContent = text;
    this.notice.style.display = text ? "" : "none";
  }

  /** @returns {any[]} */
  sessions() { return this.model.get("sessions") || []; }

  renderSessions() {
    const all = this.sessions();
    for (const [sel, key, label] of /** @type {const} */ ([[this.modelSel, "models", "All models"], [this.userSel, "user", "All users"]])) {
      const keep = sel.value;
      const values = distinct(all, key);
      sel.replaceChildren(h("option", { value: "", text: label }), ...values.map((v) => h("option", { value: v, text: (key === "models" ? shortModel(v) : v) || "(none)" })));
      sel.value = values.includes(keep) ? keep : "";
    }
    if (this.selected && !all.some((s) => s.path === this.selected)) this.select("");
    this.renderRows();
  }

  renderRows() {
    const all = this.sessions();
    const shown = filterSessions(all, { text: this.search.value, model: this.modelSel.value, user: this.userSel.value, paths: this.fullText });
    this.rows.replaceChildren(...shown.map((s) => {
      const tr = h("tr", { class: "nbb-row" + (s.error ? " nbb-unreadable" : "") + (s.path === this.selected ? " nbb-selected" : ""),
        title: s.error ? `Unreadable: ${s.error}` : s.path });
      tr.dataset.path = s.path;
      if (s.error) {
        tr.append(h("td", { class: "nbb-name", text: s.path.split(/[\\/]/).pop() || s.path }),
          h("td", { class: "nbb-reason", colspan: 6, text: `unreadable: ${s.error}` }));
      } else {
        tr.append(h("td", { class: "nbb-name", text: s.title || "(empty)" }), h("td", { text: shortDate(s.updated) }),
          h("td", { text: shortModels(s.models), title: s.models || "" }), h("td", { class: "nbb-num", text: fmtInt(s.turns) }),
          h("td", { class: "nbb-num", text: fmtInt(s.tokens) }), h("td", { class: "nbb-num", text: s.cost_usd == null ? "" : fmtCost(s.cost_usd) }),
          h("td", { text: s.user || "" }));
      }
      return tr;
    }));
    this.count.textContent = `${shown.length} of ${all.length}`;
  }

  async refresh() {
    const reply = await this.rpc.call({ type: "refresh" });
    if (!reply.ok) this.flash(reply.error);
  }

  onSearch() {
    clearTimeout(this.timer);
    const text = this.search.value.trim();
    if (!this.deep.checked || !text) { this.fullText = null; this.renderRows(); return; }
    this.timer = setTimeout(async () => {
      const reply = await this.rpc.call({ type: "search", text });
      if (reply.ok && this.search.value.trim() === text) { this.fullText = new Set(reply.paths || []); this.renderRows(); }
    }, SEARCH_DELAY_MS);
    this.renderRows();
  }

  /** @param {string} path */
  select(path) {
    this.selected = path;
    this.detail.classList.toggle("nbb-open", !!path);
    this.confirm.replaceChildren();
    this.setStatus("");
    if (!path) { this.turns.replaceChildren(); this.usage.replaceChildren(); this.title.textContent = ""; }
    for (const tr of this.rows.querySelectorAll("tr")) tr.classList.toggle("nbb-selected", /** @type {HTMLElement} */ (tr).dataset.path === path);
  }

  /** @param {string} text @param {boolean} [error] */
  setStatus(text, error = false) {
    this.status.textContent = text;
    this.status.classList.toggle("nbb-error", error);
  }

  /** @param {string} path */
  async open(path) {
    this.select(path);
    const row = this.sessions().find((s) => s.path === path);
    this.title.textContent = row ? row.title || "(empty)" : path;
    this.setStatus("Loading…");
    const reply = await this.rpc.call({ type: "open", path });
    if (this.selected !== path) return;
    if (!reply.ok) { this.setStatus(reply.error, true); return; }
    this.setStatus("");
    this.usage.textContent = usageLine(reply.usage || []);
    showTranscript(this.turns, reply.turns || []);
    this.turns.scrollTop = 0;
  }

  async resume() {
    if (!this.selected) return;
    this.setStatus("Resuming…");
    const reply = await this.rpc.call({ type: "resume", path: this.selected });
    this.setStatus(reply.ok ? "Resumed: the live chat is below." : reply.error, !reply.ok);
  }

  /** @param {string} fmt */
  async exportAs(fmt) {
    if (!this.selected) return;
    const reply = await this.rpc.call({ type: "export", path: this.selected, fmt });
    this.setStatus(reply.ok ? `Exported to ${reply.written}` : reply.error, !reply.ok);
  }

  askDelete() {
    if (!this.selected) return;
    const path = this.selected;
    const yes = h("button", { type: "button", class: "nba-btn nba-deny nbb-delete-yes", text: "Move to trash", onclick: () => this.remove(path) });
    const no = h("button", { type: "button", class: "nba-btn nbb-delete-no", text: "Cancel", onclick: () => this.confirm.replaceChildren() });
    this.confirm.replaceChildren(h("span", { text: "Delete this session? It moves to the folder's .trash." }), yes, no);
  }

  /** @param {string} path */
  async remove(path) {
    this.confirm.replaceChildren();
    const reply = await this.rpc.call({ type: "trash", path });
    if (!reply.ok) { this.setStatus(reply.error, true); return; }
    this.select(""); this.setStatus("");
    this.flash(`Moved to ${reply.moved} `);
    if (reply.undo) {
      this.notice.append(h("button", { type: "button", class: "nba-btn nbb-undo", text: "Undo",
        title: "Move the session back from the trash", onclick: () => this.undo(reply.undo) }));
    }
  }

  /** Undo a Delete: the file back from the trash (the kernel lists it again). @param {string} trashed */
  async undo(trashed) {
    const reply = await this.rpc.call({ type: "restore", path: trashed });
    this.flash(reply.ok ? `Restored ${reply.restored}` : reply.error);
    if (reply.ok && reply.restored) this.open(reply.restored);
  }

  /** @param {string} text */
  flash(text) {
    this.notice.textContent = text;
    this.notice.style.display = "";
  }

  renderChat() {
    this.childAbort.abort();
    this.childAbort = new AbortController();
    const ref = this.model.get("chat") || "";
    showChild(this.model, this.host, ref, this.chatSlot, this.childAbort.signal)
      .catch((err) => { console.warn("nbagent: the resumed chat cannot be shown", err); this.flash(`The resumed chat cannot be shown here: ${err}`); });
  }

  dispose() {
    this.childAbort.abort();
    this.rpc.dispose();
    this.model.off("change:sessions", this.onSessions);
    this.model.off("change:chat", this.onChat);
    this.model.off("change:notice", this.onNotice);
  }
}

export const browserWidget = {
  /** @param {{model: any, el: HTMLElement, host?: any}} ctx */
  render({ model, el, host }) {
    const view = new BrowserView(model, el, host);
    return () => view.dispose();
  },
};
