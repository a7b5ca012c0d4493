// The footer of a turn: tokens (or that they were not reported), cost, duration, time to first
// token, tokens/s, how it ended.
import { fmtInt, fmtSeconds, fmtCost } from "./dom.js";

/** A model as the chat names it: "provider:model", or the model alone where the provider adds
 * nothing (widget_usage.py's model_label). @param {string} provider @param {string} model */
export function modelLabel(provider, model) {
  const p = String(provider || ""), m = String(model || "");
  return !p || p === m || p === "mock" || m.startsWith(`${p}:`) ? m : `${p}:${m}`;
}

/** The model that answered a turn, labelled ("" when the record has none). @param {any} rec */
export const turnModel = (rec) => (rec && rec.model ? modelLabel(rec.provider, rec.model) : "");

/** @param {any} rec a TurnRecord dict (with cost, duration, ttft, tps) @returns {string[]} */
export function footerParts(rec) {
  if (!rec) return [];
  const u = rec.usage || {};
  const parts = [];
  if (rec.model) parts.push(rec.model);
  const known = !!(u.prompt_token_count || u.candidates_token_count || u.total_token_count);
  if (known) {
    parts.push(`in ${fmtInt(u.prompt_token_count || 0)}`); // a count left out is 0
    if (u.cached_content_token_count) parts.push(`cached ${fmtInt(u.cached_content_token_count)}`);
    if (u.thoughts_token_count) parts.push(`thinking ${fmtInt(u.thoughts_token_count)}`);
    parts.push(`out ${fmtInt(u.candidates_token_count || 0)}`);
  } else if (rec.status !== "error") {
    parts.push("tokens not reported"); // e.g. stopped before the model sent its usage: not zero
  }
  const cost = fmtCost(rec.cost);
  if (cost && known) parts.push(cost);
  if (rec.duration != null) parts.push(fmtSeconds(rec.duration));
  if (rec.ttft != null) parts.push(`TTFT ${fmtSeconds(rec.ttft)}`);
  if (rec.tps) parts.push(`${rec.tps.toFixed(rec.tps < 10 ? 1 : 0)} tok/s`);
  if (rec.lost) parts.push("interrupted: the kernel went away");
  else if (rec.status === "interrupted") parts.push("stopped");
  else if (rec.finish_reason && !["STOP", "TOOL_CALLS"].includes(rec.finish_reason)) parts.push(rec.finish_reason.toLowerCase());
  return parts;
}
