import { test } from "node:test";
import assert from "node:assert/strict";
import { footerParts } from "../src/render/footer.js";
import { toolStatus } from "../src/render/toolcard.js";
import { fmtSeconds, fmtCost, pretty } from "../src/render/dom.js";
import { turnErrors, compactionShown, stepNotice, systemNoticeText } from "../src/render/turn.js";

test("the footer shows tokens, cost, duration, time to first token and speed", () => {
  const rec = { model: "gpt-4.1-mini", status: "done", finish_reason: "STOP", cost: 0.00123, duration: 2.5, ttft: 0.41, tps: 45.2,
    usage: { prompt_token_count: 1234, cached_content_token_count: 1000, thoughts_token_count: 56, candidates_token_count: 789 } };
  assert.deepEqual(footerParts(rec), ["gpt-4.1-mini", "in 1,234", "cached 1,000", "thinking 56", "out 789", "$0.0012",
    "2.50 s", "TTFT 410 ms", "45 tok/s"]);
});

test("a turn stopped before the model reported usage says so instead of showing zero tokens", () => {
  const stopped = footerParts({ status: "interrupted", usage: { prompt_token_count: 0, candidates_token_count: 0 }, cost: 0, duration: 1.2 });
  assert.deepEqual(stopped, ["tokens not reported", "1.20 s", "stopped"]);
  const lost = footerParts({ status: "interrupted", lost: true, usage: {} });
  assert.deepEqual(lost, ["tokens not reported", "interrupted: the kernel went away"]);
  assert.deepEqual(footerParts({ status: "error", usage: {}, finish_reason: "ERROR" }), ["error"]);
});

test("a failed turn reports each error once (model step, FINISH and record repeat it)", () => {
  const msg = "[network openai] could not reach api.openai.com (after 3 attempts)";
  const steps = [
    { step_index: 0, source: "USER", type: "TEXT_RESPONSE", status: "DONE", content: "hi" },
    { step_index: 1, source: "MODEL", type: "TEXT_RESPONSE", status: "ERROR", error: msg, content: "Partial" },
    { step_index: 2, source: "SYSTEM", type: "FINISH", status: "ERROR", error: msg, http_code: 0 },
    { step_index: 3, kind: "tool_run", source: "SYSTEM", type: "TOOL_CALL", target: "ENVIRONMENT", status: "ERROR", error: "tool broke" },
  ];
  assert.deepEqual(turnErrors(steps, { status: "error", error: msg }), [{ message: msg, code: 0 }]);
  assert.deepEqual(turnErrors(steps.slice(0, 1), { status: "error", error: "rate limited", http_code: 429 }),
    [{ message: "rate limited", code: 429 }]);
  assert.deepEqual(turnErrors(steps.slice(0, 1), { status: "done" }), []); // tool errors stay in their card
});

test("an MCP server that did not start is said where it happened, not in the error card after the answer", () => {
  const error = "[tool] MCP server 'quitter' exited or closed its output while starting (its stderr ends: '[nbagent] the server exited with status 3')";
  const note = { step_index: 1, kind: "other", source: "SYSTEM", type: "SYSTEM_MESSAGE", status: "ERROR", error,
    content: "The tools of 'quitter' are not available in this turn." };
  const steps = [{ step_index: 0, source: "USER", type: "TEXT_RESPONSE", status: "DONE", content: "hi" }, note,
    { step_index: 2, kind: "model_call", source: "MODEL", type: "TEXT_RESPONSE", status: "DONE", content: "The answer." }];
  assert.deepEqual(turnErrors(steps, { status: "done", error }), []);
  assert.equal(systemNoticeText(note), `The tools of 'quitter' are not available in this turn. ${error}`);
});

test("a compaction that removed nothing is not shown", () => {
  assert.equal(compactionShown({ tokens_before: 12835, tokens_after: 12835, budget: 10000 }), false);
  assert.equal(compactionShown({ tokens_before: 12000, tokens_after: 3000, budget: 10000 }), true);
  assert.equal(compactionShown(null), true);
});

test("tool card status follows the tool step and its approval", () => {
  assert.equal(toolStatus(undefined), "requested");
  assert.equal(toolStatus({ status: "WAITING_FOR_USER", approval: "pending" }), "waiting");
  assert.equal(toolStatus({ status: "WAITING_FOR_USER", approval: "manual" }), "manual");
  assert.equal(toolStatus({ status: "ACTIVE" }), "running");
  assert.equal(toolStatus({ status: "DONE", approval: "approved" }), "done");
  assert.equal(toolStatus({ status: "DONE", approval: "denied" }), "denied");
  assert.equal(toolStatus({ status: "ERROR" }), "error");
  assert.equal(toolStatus({ status: "CANCELED" }), "canceled");
});

test("number formats", () => {
  assert.equal(fmtSeconds(0.0123), "12 ms");
  assert.equal(fmtSeconds(75), "1 min 15 s");
  assert.equal(fmtSeconds(null), "");
  assert.equal(fmtCost(NaN), "");
  assert.equal(fmtCost(0), "$0");
  assert.equal(fmtCost(1.5), "$1.50");
  assert.equal(pretty('{"a":1}'), '{\n  "a": 1\n}');
  assert.equal(pretty("plain"), "plain");
});

test("a model step shows the provider's retry while it waits, and drops it once the answer starts", () => {
  const notice = "no reply from api.openai.com within 60 s (first_byte_timeout) — retrying in 1 s, 2 of 3";
  const waiting = { step_index: 1, source: "MODEL", type: "TEXT_RESPONSE", status: "ACTIVE", content: "", notice };
  assert.equal(stepNotice(waiting, true), notice);
  assert.equal(stepNotice({ ...waiting, content: "Hello" }, true), "");
  assert.equal(stepNotice({ ...waiting, status: "DONE" }, false), "");
  assert.equal(stepNotice({ ...waiting, notice: undefined }, true), "");
});

test("a tool call's hidden bidirectional and invisible characters are shown as markers, with a warning", async () => {
  const { hiddenChars, markHidden, hiddenWarning } = await import("../src/render/toolcard.js");
  // Trojan Source: the RLO/LRI/PDI make `if access_level != "user"` read as a comment in an editor
  const code = 'access_level = "user"\nif access_level != "user\u202E \u2066# Check if admin\u2069 \u2066":\n    print("admin")\nx\u200B = 1';
  assert.deepEqual(hiddenChars(code), ["U+202E", "U+2066", "U+2069", "U+2066", "U+200B"]);
  const html = markHidden(code.replace(/&/g, "&amp;").replace(/</g, "&lt;"));
  assert.ok(!/[\u202E\u2066\u2069\u200B]/.test(html), "no hidden character is left raw");
  assert.equal((html.match(/class="nba-hidden-char"/g) || []).length, 5);
  assert.ok(html.includes('title="bidirectional control U+202E">⟨U+202E⟩</span>'));
  assert.ok(html.includes('title="invisible character U+200B">⟨U+200B⟩</span>'));
  assert.match(hiddenWarning(hiddenChars(code)), /^⚠ This call holds 5 hidden bidirectional or invisible characters/);
  assert.equal(hiddenWarning(hiddenChars("print('plain')")), "");
  assert.equal(markHidden("x = '\u00e9\u4e2d'"), "x = '\u00e9\u4e2d'"); // ordinary non-ASCII text is left alone
});

test("an @name attachment is split off the prompt and labelled as a chip", async () => {
  const { splitAttachments, attachmentLabel } = await import("../src/render/turn.js");
  const desc = "sales: DataFrame, 8 rows × 3 columns (month: str, region: str, revenue: int64), 356 B\ncolumns (name: dtype, non-null count):\n- month: str";
  const prompt = `look at @sales and @targets\n\n[Attached notebook variables: @sales, @targets]\n--- @sales ---\n${desc}\n--- @targets ---\ntargets: dict, length 2, 184 B\n{'Q1': 700, 'Q2': 800}`;
  const { text, attached } = splitAttachments(prompt);
  assert.equal(text, "look at @sales and @targets");
  assert.deepEqual(attached.map((a) => a.label), ["📎 sales · DataFrame 8×3", "📎 targets · dict, length 2"]);
  assert.equal(attached[0].text, desc);
  assert.equal(attached[1].text, "targets: dict, length 2, 184 B\n{'Q1': 700, 'Q2': 800}");
  assert.deepEqual(splitAttachments("a plain [prompt]"), { text: "a plain [prompt]", attached: [] });
  assert.equal(attachmentLabel("x", "x: int, 28 B"), "📎 x · int");
  assert.equal(attachmentLabel("t", "[variable t]\n```\nt: dict, length 2, 184 B\n{}\n```"), "📎 t · dict, length 2"); // fenced as data
});
