// The session browser's filters, pure: text (title, or the kernel's full-text matches), model, user.

/** @typedef {{path: string, title?: string, models?: string, user?: string, error?: string, created?: string|null,
 *   updated?: string|null, turns?: number, tokens?: number, cost_usd?: number|null}} SessionRow
 *   a row of the `sessions` trait (nbagent/notebook/session_rows.py ROW_FIELDS) */

/** Sessions shown for the given filters (order kept). An unreadable session shows while no model
 * or user is chosen and its file name matches the text.
 * @param {SessionRow[]} rows @param {{text?: string, model?: string, user?: string, paths?: Set<string>|null}} f */
export function filterSessions(rows, f) {
  const text = (f.text || "").trim().toLowerCase();
  return rows.filter((r) => {
    if (f.model && !(r.models || "").split(",").map((m) => m.trim()).includes(f.model)) return false;
    if (f.user && (r.user || "") !== f.user) return false;
    if (!text) return true;
    if (f.paths && f.paths.has(r.path)) return true;
    return (r.error ? r.path : r.title || "").toLowerCase().includes(text);
  });
}

/** The distinct values of a column, sorted ("models" is split at commas); unreadable rows skipped.
 * @param {SessionRow[]} rows @param {"models"|"user"} key @returns {string[]} */
export function distinct(rows, key) {
  const out = new Set();
  for (const r of rows) {
    if (r.error) continue;
    const v = r[key] || "";
    if (key === "models") { for (const m of v.split(",")) if (m.trim()) out.add(m.trim()); } else out.add(v);
  }
  return [...out].sort();
}

/** How a model reads in the browser: "provider:name" with the provider dropped where the name
 * says it already ("demo:demo" is "demo", "local:local" is "local"). @param {string} model */
export function shortModel(model) {
  const m = String(model || "").trim();
  const at = m.indexOf(":");
  return at > 0 && m.slice(0, at) === m.slice(at + 1) ? m.slice(0, at) : m;
}

/** A comma-separated models cell, each model labelled (shortModel). @param {string} models */
export function shortModels(models) {
  return String(models || "").split(",").map((m) => shortModel(m)).filter(Boolean).join(", ");
}
