// The agent's record in a cell's metadata (nbagent/notebook/provenance.py): metadata.nbagent.actions,
// oldest first. Read as untrusted JSON: every field is checked, unreadable entries are skipped.

export interface CellAction {
  action: string; // "inserted" | "edited" | "ran"
  author: string; // "nbagent" for nbagent's own agent, else the MCP client's name
  turn: number; // as recorded: numbered from 0; -1 when unknown
  model: string;
  approvedBy: string;
  codeSha256: string; // SHA-256 (hex) of the cell's UTF-8 source after the action, "" when not recorded
  at: number; // seconds since the epoch
  diff: string; // unified diff of the source before -> after an edit or insert (capped by nbagent), "" when none
}

const MAX_DIFF_CHARS = 8_000; // nbagent records at most 4,000; a hand-written record is cut here

const text = (v: unknown): string => (typeof v === 'string' ? v : '');
const num = (v: unknown, dflt: number): number => (typeof v === 'number' && Number.isFinite(v) ? v : dflt);

/** The actions recorded in one cell's metadata (as provenance.recorded_actions reads them). */
export function recordedActions(metadata: unknown): CellAction[] {
  const record = (metadata as any)?.nbagent;
  const entries = record && typeof record === 'object' ? record.actions : null;
  if (!Array.isArray(entries)) return [];
  const actions: CellAction[] = [];
  for (const e of entries) {
    if (!e || typeof e !== 'object') continue;
    const kind = text(e.action) || 'edited';
    if (!['inserted', 'edited', 'ran'].includes(kind)) continue;
    actions.push({
      action: kind, author: text(e.author) || 'nbagent', turn: Math.trunc(num(e.turn, -1)), model: text(e.model),
      approvedBy: text(e.approved_by), codeSha256: text(e.code_sha256).toLowerCase(), at: num(e.at, 0),
      diff: text(e.diff).slice(0, MAX_DIFF_CHARS)
    });
  }
  return actions;
}

/** The turn as people count it (the first turn is turn 1), or "" when unknown. */
export function turnLabel(turn: number): string {
  return turn >= 0 ? `turn ${turn + 1}` : '';
}

/** SHA-256 of the source's UTF-8 bytes, hex (provenance.code_hash); null where the page has no Web Crypto
 * (an insecure origin other than localhost). */
export async function codeHash(source: string): Promise<string | null> {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) return null;
  const digest = await subtle.digest('SHA-256', new TextEncoder().encode(source));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

/** The last action that recorded a hash, to compare the source with (null: none did). */
export function lastHashed(actions: CellAction[]): CellAction | null {
  for (let i = actions.length - 1; i >= 0; i--) if (actions[i].codeSha256) return actions[i];
  return null;
}

/** One line for the badge: who wrote the cell, in which turn, with which model (actions: not empty). */
export function summary(actions: CellAction[]): string {
  const writes = actions.filter((a) => a.action !== 'ran');
  const pool = writes.length ? writes : actions; // the write that made the source, else the last run
  const last = pool[pool.length - 1];
  const verb = last.action === 'inserted' ? 'written by' : last.action === 'edited' ? 'edited by' : 'run by';
  return [`${verb} ${last.author}`, turnLabel(last.turn), last.model].filter(Boolean).join(' · ');
}

/** One line per action in the list the badge opens. */
export function actionLine(a: CellAction): string {
  const when = a.at > 0 ? new Date(a.at * 1000).toLocaleString() : '';
  const approved = a.approvedBy ? `approved by ${a.approvedBy}` : '';
  return [`${a.action} by ${a.author}`, turnLabel(a.turn), a.model, approved, when].filter(Boolean).join(' · ');
}

/** What a screen reader calls an action's diff: "diff of the edit in turn 2". */
export function diffLabel(a: CellAction): string {
  const what = a.action === 'inserted' ? 'insert' : a.action === 'edited' ? 'edit' : 'run';
  return [`diff of the ${what}`, turnLabel(a.turn)].filter(Boolean).join(' in ');
}

/** The diff's lines, each with its kind: "add" (+), "del" (-), "" (context, headers, the cut note). */
export function diffLines(diff: string): Array<[string, string]> {
  return diff.split('\n').map((line, i): [string, string] => {
    const header = i < 2 && (line.startsWith('+++ ') || line.startsWith('--- ')); // "--- before", "+++ after"
    return [header ? '' : line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : '', line];
  });
}
