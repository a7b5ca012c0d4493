// The transcript reducer: the same events the kernel sends build the same transcript.
// Pure: apply(state, event) returns a new state; unchanged turns and steps keep their identity,
// so the renderer redraws only what changed.

/**
 * @typedef {{step_index: number, type?: string, source?: string, target?: string, status?: string,
 *   content: string, thinking?: string, tool_calls?: any[], error?: string, http_code?: number,
 *   usage_metadata?: any, approval?: string, run_seconds?: number, compaction?: any,
 *   finish_reason?: string, model?: string, preparing_tool?: string, notice?: string, created_at?: number, finished_at?: number, turn?: number}} Step
 * @typedef {{turn: number, record: any, steps: Step[]}} Turn
 * @typedef {[number, "c"|"t", number, string]} DeltaItem
 * @typedef {{turns: Turn[], running: boolean, notice: string, pending: DeltaItem[], gap: boolean,
 *   dead: string, refusals: number, gauge: any, confirm: {prompt: string, text: string, seq: number}|null}} State
 *   `dead`: why the kernel can no longer be reached ("" while it can); `refusals` counts the
 *   prompts the kernel declined (a view that sent one stops waiting); `gauge` is the context and
 *   spend trait; `confirm` an over-budget prompt the kernel asks about (`seq` counts the asks).
 * @typedef {{type: "traits", history?: any[], current?: any, running?: boolean, notice?: string, gauge?: any}
 *   | {type: "deltas", items: DeltaItem[]} | {type: "dead", reason: string} | {type: "refused", text: string}
 *   | {type: "confirm", prompt: string, text: string}} Event
 */

/** @returns {State} */
export function initialState() {
  return { turns: [], running: false, notice: "", pending: [], gap: false, dead: "", refusals: 0, gauge: null, confirm: null };
}

const FIELD = { c: "content", t: "thinking" };

/** Merge a step from the traits with the local one: a finished step from the kernel wins; while
 * it streams, the longer text (local deltas may be ahead of the last trait sync) wins. */
function mergeStep(/** @type {Step|undefined} */ local, /** @type {Step} */ remote) {
  const step = { ...remote, content: remote.content || "", thinking: remote.thinking || "" };
  if (local && (remote.status || "ACTIVE") === "ACTIVE") {
    for (const f of ["content", "thinking"]) {
      // @ts-ignore
      if ((local[f] || "").length > step[f].length) step[f] = local[f];
    }
  }
  if (local && sameStep(local, step)) return local;
  return step;
}

function sameStep(/** @type {any} */ a, /** @type {any} */ b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** remote turn object -> [the local turn it was merged with, the result]: unchanged traits keep
 * their objects, so a long history is not compared again on every sync. @type {WeakMap<any, [any, Turn]>} */
const merged = new WeakMap();

/** @param {Turn|undefined} local @param {any} remote @param {Set<number>} known @returns {Turn} */
function mergeTurn(local, remote, known) {
  const hit = merged.get(remote);
  if (hit && hit[0] === local && local === hit[1]) return local;
  const turn = mergeTurnSlow(local, remote, known);
  merged.set(remote, [turn, turn]);
  return turn;
}

/** @param {Turn|undefined} local @param {any} remote @param {Set<number>} known @returns {Turn} */
function mergeTurnSlow(local, remote, known) {
  const byIndex = new Map((local ? local.steps : []).map((s) => [s.step_index, s]));
  const steps = (remote.steps || []).map((/** @type {Step} */ s) => mergeStep(byIndex.get(s.step_index), s));
  // steps only known from deltas (their structural sync is on its way) are kept
  for (const s of local ? local.steps : []) {
    if (!known.has(s.step_index)) steps.push(s);
  }
  steps.sort((a, b) => a.step_index - b.step_index);
  const turn = remote.record ? remote.record.turn : (local ? local.turn : -1);
  const record = local && sameStep(local.record, remote.record) ? local.record : remote.record;
  if (local && local.record === record && local.steps.length === steps.length && local.steps.every((s, i) => s === steps[i])) {
    return local;
  }
  return { turn, record, steps };
}

/** @param {State} state @param {Event} event @returns {State} */
export function apply(state, event) {
  if (event.type === "traits") {
    const byTurn = new Map(state.turns.map((t) => [t.turn, t]));
    const remote = [...(event.history || [])];
    if (event.current) remote.push(event.current);
    const turnOf = (/** @type {any} */ r) => (r.record ? r.record.turn : -1);
    remote.sort((a, b) => turnOf(a) - turnOf(b));
    const known = new Set(remote.flatMap((r) => (r.steps || []).map((/** @type {Step} */ s) => s.step_index)));
    const turns = remote.map((r) => mergeTurn(byTurn.get(r.record ? r.record.turn : -1), r, known));
    const gauge = sameStep(state.gauge, event.gauge || null) ? state.gauge : event.gauge || null;
    const next = { ...state, turns, running: !!event.running, notice: event.notice || "", pending: [], gap: false, gauge };
    if (state.dead) return markDead({ ...next, dead: "" }, state.dead);
    // deltas that ran ahead of this sync may apply now
    return state.pending.length ? applyDeltas(next, state.pending) : next;
  }
  if (event.type === "deltas") return applyDeltas(state, event.items);
  if (event.type === "refused") return { ...state, notice: event.text || "", refusals: state.refusals + 1 };
  if (event.type === "confirm") { // answered like a refusal (the view unlocks), plus the ask
    const seq = state.confirm ? state.confirm.seq + 1 : 1;
    return { ...state, refusals: state.refusals + 1, confirm: { prompt: String(event.prompt || ""), text: String(event.text || ""), seq } };
  }
  if (event.type === "dead") return state.dead ? state : markDead(state, event.reason);
  return state;
}

/** The kernel is gone: nothing runs any more; a turn that was running ends as interrupted.
 * @param {State} state @param {string} reason @returns {State} */
function markDead(state, reason) {
  const turns = state.turns.map((t) => (t.record && t.record.status === "running"
    ? { ...t, record: { ...t.record, status: "interrupted", lost: true } } : t));
  return { ...state, turns, running: false, dead: reason || "disconnected", pending: [], gap: false };
}

/** @param {State} state @param {DeltaItem[]} items @returns {State} */
function applyDeltas(state, items) {
  let turns = state.turns;
  /** @type {DeltaItem[]} */
  const pending = [...state.pending];
  for (const item of items) {
    const [index, f, offset, text] = item;
    const field = /** @type {"content"|"thinking"} */ (FIELD[f]);
    let ti = -1, si = -1;
    for (let i = turns.length - 1; i >= 0 && si < 0; i--) {
      si = turns[i].steps.findIndex((s) => s.step_index === index);
      if (si >= 0) ti = i;
    }
    if (si < 0 && offset > 0) { pending.push(item); continue; } // its sync has not arrived yet
    // a new step while the last turn has ended belongs to a turn whose sync has not arrived
    // (its deltas go out just before it): never give it to the finished turn
    const last = turns[turns.length - 1];
    if (si < 0 && last && last.record && last.record.status !== "running") { pending.push(item); continue; }
    if (turns === state.turns) turns = [...turns];
    if (si < 0) { // a new step streaming model text to the user; its sync follows
      if (!turns.length) turns.push({ turn: -1, record: null, steps: [] });
      ti = turns.length - 1;
      turns[ti] = { ...turns[ti], steps: [...turns[ti].steps, { step_index: index, kind: "model_call", type: "TEXT_RESPONSE", source: "MODEL", target: "USER", status: "ACTIVE", content: "", thinking: "" }] };
      si = turns[ti].steps.length - 1;
    }
    const step = turns[ti].steps[si];
    const have = step[field] || "";
    if (offset > have.length) { pending.push(item); continue; } // a gap: wait for a sync
    if (offset + text.length <= have.length) continue; // already have it
    const steps = [...turns[ti].steps];
    steps[si] = { ...step, [field]: have + text.slice(have.length - offset) };
    turns[ti] = { ...turns[ti], steps };
  }
  if (turns === state.turns && pending.length === state.pending.length) return state;
  return { ...state, turns, pending, gap: pending.length > 0 };
}

/** A plain view of the transcript (for tests and the Python mirror check). @param {State} state */
export function transcript(state) {
  return state.turns.map((t) => ({
    turn: t.turn,
    status: t.record ? t.record.status : null,
    steps: t.steps.map((s) => ({ step_index: s.step_index, status: s.status || "ACTIVE", content: s.content || "", thinking: s.thinking || "" })),
  }));
}
