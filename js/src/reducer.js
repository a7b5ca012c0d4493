// The transcript reducer: the same events the kernel sends build the same transcript.
// Pure: apply(state, event) returns a new state; unchanged turns and steps keep their identity,
// so the renderer redraws only what changed. The decoder of nbagent/notebook/turn_codec.py: what a
// live turn's patches leave out it fills in by PATCH_RULES, declared once in protocol.py.
import { CHAT_EVENT_FIELDS, PATCH_RULES } from "./protocol_data.js";

/**
 * @typedef {import("./protocol").WireStep & {content: string}} Step  a step as the kernel sends it (the
 *   generated js/src/protocol.d.ts, from the Step fields' roles), its text filled in from the deltas;
 *   `n`: the lengths of content and thinking the kernel has (a bare step: its text came as deltas)
 * @typedef {{turn: number, record: any, steps: Step[], done?: boolean}} Turn
 *   `done`: its end came (an ended patch, "turn" or "turns"): a late patch of it is stale
 * @typedef {import("./protocol").ChatEvent_deltas["items"][number]} DeltaItem  a 5th `true`: replace from offset
 * @typedef {NonNullable<import("./protocol").ChatEvent_deltas["patches"]>[number]} Patch  what changed in a
 *   running turn's structure (protocol.py Patch)
 * @typedef {{turns: Turn[], running: boolean, notice: string, pending: DeltaItem[], gap: boolean,
 *   dead: string, refusals: number, gauge: any, confirm: {prompt: string, text: string, seq: number}|null,
 *   finished: number}} State
 *   `dead`: why the kernel can no longer be reached ("" while it can); `refusals` counts the
 *   prompts the kernel declined (a view that sent one stops waiting); `gauge` is the context and
 *   spend trait; `confirm` an over-budget prompt the kernel asks about (`seq` counts the asks);
 *   `finished` how many finished turns the kernel has; `gap`: text or turns are missing (the
 *   view asks for a resync).
 * @typedef {import("./protocol").ChatEvent_deltas | import("./protocol").ChatEvent_turn
 *   | import("./protocol").ChatEvent_turns | import("./protocol").ChatEvent_refused | import("./protocol").ChatEvent_confirm
 *   | {type: "traits", running?: boolean, notice?: string, gauge?: any, finished?: number}
 *   | {type: "dead", reason: string}} Event
 * The kernel's messages (declared in nbagent/notebook/protocol.py), and two of the view's own: its
 * traits changed, the kernel is gone. The running turn's structure arrives as
 * patches (what changed since the last one) with the text's deltas, a finished turn that changed
 * as "turn" (bare), a resync's turns as "turns" (whole).
 */

/** The first field of a kernel message that its declaration (protocol.py) does not have, or of an
 * unknown kind its type: a view drops such a message, as the schema rejects it ("" when it is declared).
 * @param {any} msg @returns {string} */
export function undeclaredField(msg) {
  const fields = msg && typeof msg === "object" ? CHAT_EVENT_FIELDS[msg.type] : undefined;
  if (!fields) return "type";
  return Object.keys(msg).find((k) => !fields.includes(k)) || "";
}

/** @returns {State} */
export function initialState() {
  return { turns: [], running: false, notice: "", pending: [], gap: false, dead: "", refusals: 0, gauge: null, confirm: null, finished: 0 };
}

const FIELD = { c: "content", t: "thinking" };

/** Merge a step from the kernel with the local one. A bare step (`n`) keeps the local text (it came
 * as deltas); a whole finished step wins; while it streams, the longer text wins (local deltas
 * may be ahead of the last sync). */
function mergeStep(/** @type {Step|undefined} */ local, /** @type {Step} */ remote) {
  const step = { ...remote, content: remote.content || "", thinking: remote.thinking || "" };
  if (remote.n) {
    step.content = local ? local.content || "" : "";
    step.thinking = local ? local.thinking || "" : "";
  } else if (local && (remote.status || "ACTIVE") === "ACTIVE") {
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

/** remote turn object -> [the local turn it was merged with, the result]: an unchanged trait keeps
 * its object, so it is not compared again on every sync. @type {WeakMap<any, [any, Turn]>} */
const merged = new WeakMap();

/** @param {Turn|undefined} local @param {any} remote @param {boolean} done @returns {Turn} */
function mergeTurn(local, remote, done) {
  const hit = merged.get(remote);
  if (hit && hit[0] === local && local === hit[1] && !!local.done === done) return local;
  const turn = mergeTurnSlow(local, remote, done);
  merged.set(remote, [turn, turn]);
  return turn;
}

/** @param {Turn|undefined} local @param {any} remote @param {boolean} done @returns {Turn} */
function mergeTurnSlow(local, remote, done) {
  const byIndex = new Map((local ? local.steps : []).map((s) => [s.step_index, s]));
  const steps = (remote.steps || []).map((/** @type {Step} */ s) => mergeStep(byIndex.get(s.step_index), s));
  steps.sort((a, b) => a.step_index - b.step_index);
  const turn = turnOf(remote);
  const record = local && sameStep(local.record, remote.record) ? local.record : remote.record;
  if (local && local.record === record && !!local.done === done && local.steps.length === steps.length
      && local.steps.every((s, i) => s === steps[i])) {
    return local;
  }
  return done ? { turn, record, steps, done } : { turn, record, steps };
}

const turnOf = (/** @type {any} */ r) => (r.record ? r.record.turn : -1);

/** The turns with `remote` merged in at its place (by turn number). @param {Turn[]} turns @param {any} remote
 * @param {boolean} done @returns {Turn[]} */
function upsert(turns, remote, done) {
  const n = turnOf(remote);
  const i = turns.findIndex((t) => t.turn === n);
  if (i >= 0 && turns[i].done && !done) return turns; // a late sync of a turn that has ended
  const turn = mergeTurn(i >= 0 ? turns[i] : undefined, remote, done);
  if (i >= 0) {
    if (turn === turns[i]) return turns;
    const next = [...turns];
    next[i] = turn;
    return next;
  }
  return [...turns, turn].sort((a, b) => a.turn - b.turn);
}

/** Some text or some finished turns the kernel has are missing here. @param {State} state */
function missing(state) {
  if (state.pending.length) return true;
  if (state.turns.some((t) => t.steps.some((s) => !s.type))) return true; // a patch changed a step never seen here
  if (state.turns.filter((t) => t.done).length < state.finished) return true;
  return state.turns.some((t) => t.steps.some((s) => s.n && ((s.content || "").length < s.n[0] || (s.thinking || "").length < s.n[1])));
}

/** Deltas that ran ahead of the turn they belong to apply now; `gap` says what is still missing.
 * @param {State} state @returns {State} */
function settle(state) {
  const pending = state.pending;
  const next = pending.length ? applyDeltas({ ...state, pending: [] }, pending) : state;
  const gap = missing(next);
  return gap === next.gap ? next : { ...next, gap };
}

/** @param {State} state @param {Event} event @returns {State} */
export function apply(state, event) {
  if (event.type === "traits") {
    const gauge = sameStep(state.gauge, event.gauge || null) ? state.gauge : event.gauge || null;
    const next = { ...state, running: !!event.running, notice: event.notice || "", gauge, finished: event.finished || 0 };
    if (state.dead) return markDead({ ...next, dead: "" }, state.dead);
    return settle(next);
  }
  if (event.type === "turn") return settle({ ...state, turns: upsert(state.turns, event.turn, true) });
  if (event.type === "turns") { // a resync: every turn whole, in pages; the first drops what was here
    const old = new Map(state.turns.map((t) => [t.turn, t]));
    const turns = event.first ? [] : [...state.turns];
    for (const t of event.turns || []) {
      const i = turns.findIndex((x) => x.turn === turnOf(t));
      const turn = mergeTurn(i >= 0 ? turns[i] : old.get(turnOf(t)), t, !t.record || t.record.status !== "running");
      if (i >= 0) turns[i] = turn;
      else turns.push(turn);
    }
    turns.sort((a, b) => a.turn - b.turn);
    const next = { ...state, turns };
    return state.dead ? markDead({ ...next, dead: "" }, state.dead) : settle(next);
  }
  if (event.type === "deltas") { // the running turn's structure first (patches), then the text
    let next = state;
    for (const p of event.patches || []) next = patchTurn(next, p);
    next = applyDeltas(next, event.items || []);
    return state.dead && next !== state ? markDead({ ...next, dead: "" }, state.dead) : settle(next);
  }
  if (event.type === "refused") return { ...state, notice: event.text || "", refusals: state.refusals + 1 };
  if (event.type === "confirm") { // answered like a refusal (the view unlocks), plus the ask
    const seq = state.confirm ? state.confirm.seq + 1 : 1;
    return { ...state, refusals: state.refusals + 1, confirm: { prompt: String(event.prompt || ""), text: String(event.text || ""), seq } };
  }
  if (event.type === "dead") return state.dead ? state : markDead(state, event.reason);
  return state;
}

/** The trait values a ``deltas`` message carries (`state`: running, finished, the gauge's changed
 * keys), as the model's attributes they replace: the kernel set them without a state update.
 * `finished` left out grows by the turns the message ended (its ended patches), as the kernel's did.
 * @param {(name: string) => any} get the model's current value @param {Record<string, any>|undefined} carried
 * @param {number} [ended] how many ended patches the message has
 * @returns {Record<string, any>} */
export function carriedTraits(get, carried, ended = 0) {
  /** @type {Record<string, any>} */
  const out = {};
  for (const [name, value] of Object.entries(carried || {})) {
    out[name] = name === "gauge" ? { ...(get("gauge") || {}), ...value } : value;
  }
  if (ended && !("finished" in out)) out.finished = (get("finished") || 0) + ended;
  return out;
}

/** A step's usual type, source and target for its kind: a patch's new step leaves them out when they
 * are these. @type {Record<string, {type: string, source: string, target: string}>} */
export const USUAL_SHAPES = PATCH_RULES.usual_shapes;

/** A patch's new step with what the patch left out to derive (PATCH_RULES): its `status` (done for
 * `done_kinds`, else active); its `created_at`, the end (or start) of the step before it; its
 * `finished_at` when it is not active, its `created_at`; the record's field of `from_record` (a model
 * call's model, a finish's finish reason). A field the patch names (null: absent) stays.
 * @param {any} step @param {any} fields @param {any} before @param {any} record */
function derived(step, fields, before, record) {
  const out = { ...step };
  const active = PATCH_RULES.step_status;
  if (!("status" in fields)) out.status = PATCH_RULES.done_kinds.includes(out.kind) ? PATCH_RULES.ended_status : active;
  if (!("created_at" in fields) && before) {
    const start = before.finished_at ?? before.created_at;
    if (start != null) out.created_at = start;
  }
  if (!("finished_at" in fields) && (out.status || active) !== active && out.created_at != null) out.finished_at = out.created_at;
  const name = /** @type {Record<string, string>} */ (PATCH_RULES.from_record)[out.kind];
  if (name && !(name in fields) && record && record[name] != null) out[name] = record[name];
  return out;
}

/** A usage's counts in a patch, in this order. */
export const USAGE_FIELDS = PATCH_RULES.usage_fields;

/** A patch's usage counts (a list in USAGE_FIELDS order) as the dict the kernel has: its non-zero counts.
 * @param {any} value */
function usageOf(value) {
  if (!Array.isArray(value)) return value;
  /** @type {Record<string, number>} */
  const out = {};
  value.forEach((n, i) => { if (n && i < USAGE_FIELDS.length) out[USAGE_FIELDS[i]] = n; });
  return out;
}

/** `fields` over `old`: a null field is removed; a step's text is not a patch's (it comes as deltas);
 * usage counts (a list) become their dict. @param {any} old @param {any} fields */
function patched(old, fields) {
  const out = { ...old, ...fields };
  for (const k of ["usage", "usage_metadata"]) if (Array.isArray(out[k])) out[k] = usageOf(out[k]);
  for (const k of Object.keys(fields)) if (fields[k] === null) delete out[k];
  if (old) for (const k of ["content", "thinking"]) if (k in old) out[k] = old[k];
  return out;
}

/** What a view takes a running turn's record to be before its first patch: PATCH_RULES.new_record, with
 * the `carried_over` fields of the latest turn before it. @param {Turn[]} turns @param {number} n */
function newRecord(turns, n) {
  /** @type {any} */
  const out = { turn: n, ...PATCH_RULES.new_record };
  const before = turns.reduce((/** @type {Turn|null} */ b, t) => (t.record && t.turn < n && (!b || t.turn > b.turn) ? t : b), null);
  for (const k of PATCH_RULES.carried_over) if (before && before.record[k] != null) out[k] = before.record[k];
  return out;
}

/** A record at its turn's end, before the ended patch's fields: PATCH_RULES.ended_record (its
 * finish_reason only when it has none). @param {any} record */
const endedRecord = (record) => ({ ...record, ...PATCH_RULES.ended_record, finish_reason: record.finish_reason || PATCH_RULES.ended_record.finish_reason });

/** A step at its turn's end, before the ended patch's fields: an active step has PATCH_RULES.ended_status.
 * @param {Step} step @returns {Step} */
const endedStep = (step) => ((step.status || PATCH_RULES.step_status) === PATCH_RULES.step_status
  ? /** @type {Step} */ ({ ...step, status: PATCH_RULES.ended_status }) : step);

/** A running turn's patch: its record's changed fields, its new steps whole, its changed steps'
 * fields; the text stays (it comes as deltas). @param {State} state @param {Patch} event @returns {State} */
function patchTurn(state, event) {
  const i = state.turns.findIndex((t) => t.turn === event.turn);
  const local = i >= 0 ? state.turns[i] : undefined;
  if (local && local.done && !event.ended) return state; // a late patch of a turn that has ended
  // a new record (newRecord) unless the patch says otherwise; at its end it is done, its steps too
  let base = local && local.record ? local.record : newRecord(state.turns, event.turn);
  const ending = event.ended && !(local && local.done);
  if (ending) base = endedRecord(base);
  const record = event.record ? patched(base, event.record) : local && local.record && !ending ? local.record : base;
  const steps = local ? (ending ? local.steps.map(endedStep) : [...local.steps]) : [];
  for (const entry of event.steps || []) {
    // a new step that is all its kind says comes as [step_index, kind]
    const fields = Array.isArray(entry) ? { step_index: entry[0], kind: entry[1] } : entry;
    const at = steps.findIndex((s) => s.step_index === fields.step_index);
    if (at >= 0) { steps[at] = patched(steps[at], fields); continue; }
    const fresh = { content: "", thinking: "", ...(fields.type ? {} : USUAL_SHAPES[fields.kind] || {}) };
    const before = steps.reduce((/** @type {any} */ b, s) => (s.step_index < fields.step_index && (!b || s.step_index > b.step_index) ? s : b), null);
    steps.push(derived(patched(fresh, fields), fields, before, record));
  }
  steps.sort((a, b) => a.step_index - b.step_index);
  /** @type {Turn} */
  const turn = { turn: event.turn, record, steps };
  if (event.ended || (local && local.done)) turn.done = true;
  const turns = [...state.turns];
  if (i >= 0) turns[i] = turn;
  else { turns.push(turn); turns.sort((a, b) => a.turn - b.turn); }
  return { ...state, turns };
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
    const [index, f, offset, text, replace] = item;
    const field = /** @type {"content"|"thinking"} */ (FIELD[f]);
    let ti = -1, si = -1;
    for (let i = turns.length - 1; i >= 0 && si < 0; i--) {
      si = turns[i].steps.findIndex((s) => s.step_index === index);
      if (si >= 0) ti = i;
    }
    // a step the view does not know yet: its turn's sync follows (it goes out after the deltas)
    if (si < 0) { pending.push(item); continue; }
    const step = turns[ti].steps[si];
    const have = step[field] || "";
    if (offset > have.length) { pending.push(item); continue; } // a gap: wait for a sync
    if (!replace && offset + text.length <= have.length) continue; // already have it
    if (turns === state.turns) turns = [...turns];
    const steps = [...turns[ti].steps];
    steps[si] = { ...step, [field]: replace ? have.slice(0, offset) + text : have + text.slice(have.length - offset) };
    turns[ti] = { ...turns[ti], steps };
  }
  if (turns === state.turns && pending.length === state.pending.length) return state;
  return { ...state, turns, pending };
}

/** A plain view of the transcript (for tests and the Python mirror check). @param {State} state */
export function transcript(state) {
  return state.turns.map((t) => ({
    turn: t.turn,
    status: t.record ? t.record.status : null,
    steps: t.steps.map((s) => ({ step_index: s.step_index, status: s.status || "ACTIVE", content: s.content || "", thinking: s.thinking || "" })),
  }));
}
