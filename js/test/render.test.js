import { test } from "node:test";
import assert from "node:assert/strict";
import { footerParts } from "../src/render/footer.js";
import { toolStatus } from "../src/render/toolcard.js";
import { fmtSeconds, fmtCost, pretty } from "../src/render/dom.js";

test("the footer shows tokens, cost, duration, time to first token and speed", () => {
  const rec = { model: "gpt-4.1-mini", status: "done", finish_reason: "STOP", cost: 0.00123, duration: 2.5, ttft: 0.41, tps: 45.2,
    usage: { prompt_token_count: 1234, cached_content_token_count: 1000, thoughts_token_count: 56, candidates_token_count: 789 } };
  assert.deepEqual(footerParts(rec), ["gpt-4.1-mini", "in 1,234", "cached 1,000", "thinking 56", "out 789", "$0.0012",
    "2.50 s", "TTFT 410 ms", "45 tok/s"]);
  const stopped = footerParts({ status: "interrupted", usage: {}, cost: null });
  assert.deepEqual(stopped, ["in 0", "out 0", "stopped"]);
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
