// `@name` in the chat box: where a mention is being typed, which kernel variables match it,
// and the text once one is picked. Pure functions (the popup is render/mentions.js).

/** @typedef {{name: string, type: string}} Variable */

const MENTION = /(^|[^\w@.])@([A-Za-z_]\w*)?$/; // "@" after a space, bracket, start...: not an email

/** The mention being typed just before the caret, or null.
 * @param {string} text @param {number} caret @returns {{start: number, query: string}|null} */
export function mentionAt(text, caret) {
  const m = MENTION.exec(text.slice(0, caret));
  if (!m) return null;
  const query = m[2] || "";
  return { start: caret - query.length - 1, query };
}

/** Variables matching `query`: names starting with it (exact case first), then names containing
 * it, each group in the kernel's order. @param {Variable[]} names @param {string} query
 * @param {number} [limit] @returns {Variable[]} */
export function matchNames(names, query, limit = 50) {
  const q = query.toLowerCase();
  const exact = [], prefix = [], inside = [];
  for (const v of names) {
    const n = v.name.toLowerCase();
    if (v.name.startsWith(query)) exact.push(v);
    else if (n.startsWith(q)) prefix.push(v);
    else if (q && n.includes(q)) inside.push(v);
  }
  return [...exact, ...prefix, ...inside].slice(0, limit);
}

/** The text with the mention at `start`..`caret` replaced by `@name ` and the caret after it.
 * @param {string} text @param {number} start @param {number} caret @param {string} name */
export function pickMention(text, start, caret, name) {
  let end = caret;
  while (end < text.length && /\w/.test(text[end])) end++; // the rest of a word the caret was inside
  const after = text.slice(end);
  const insert = `@${name}${after.startsWith(" ") ? "" : " "}`;
  return { text: text.slice(0, start) + insert + after, caret: start + insert.length + (after.startsWith(" ") ? 1 : 0) };
}

/** The kernel's answer (`[[name, type], ...]`) as variables; anything malformed is left out.
 * @param {any} raw @returns {Variable[]} */
export function parseNames(raw) {
  if (!Array.isArray(raw)) return [];
  return raw.filter((v) => Array.isArray(v) && typeof v[0] === "string" && v[0])
    .map((v) => ({ name: v[0], type: typeof v[1] === "string" ? v[1] : "" }));
}
