// A line diff for the cell tools' cards (edit_cell, insert_cell): [op, line] pairs, old to new,
// op " " (kept), "-" (removed) or "+" (added). The kernel's preview (Step.preview.diff) is used
// when the step has one; this computes the same from two sources otherwise.

const MAX_CELLS = 4_000_000; // an LCS table larger than this: every old line removed, every new one added

/** @param {string} text */
const linesOf = (text) => (text ? text.replace(/\n$/, "").split("\n") : []);

/** The line diff from `before` to `after` (longest common subsequence).
 * @param {string} before @param {string} after @returns {[string, string][]} */
export function lineDiff(before, after) {
  const a = linesOf(before), b = linesOf(after);
  if (a.length * b.length > MAX_CELLS) return [...a.map((l) => /** @type {[string, string]} */ (["-", l])), ...b.map((l) => /** @type {[string, string]} */ (["+", l]))];
  const n = a.length, m = b.length;
  const table = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) table[i][j] = a[i] === b[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
  }
  /** @type {[string, string][]} */
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { out.push([" ", a[i]]); i++; j++; }
    else if (table[i + 1][j] >= table[i][j + 1]) out.push(["-", a[i++]]);
    else out.push(["+", b[j++]]);
  }
  while (i < n) out.push(["-", a[i++]]);
  while (j < m) out.push(["+", b[j++]]);
  return out;
}
