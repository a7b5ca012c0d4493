import { test } from "node:test";
import assert from "node:assert/strict";
import { gaugeParts } from "../src/render/gauge.js";
import { initialState, apply } from "../src/reducer.js";

test("the gauge shows context vs window with a level, and spend vs budget", () => {
  assert.deepEqual(gaugeParts({ tokens: 1200, window: 8000, spent: 0.0123, budget: 0.5, unpriced: 0 }),
    { text: "context 1,200 / 8,000 (15%)", fill: 0.15, level: "ok", spend: "$0.012 of $0.500", overBudget: false });
  assert.equal(gaugeParts({ tokens: 7000, window: 8000 }).level, "near");
  const over = gaugeParts({ tokens: 9000, window: 8000, spent: 0, budget: null });
  assert.equal(over.level, "over");
  assert.equal(over.spend, ""); // nothing spent, no budget: no spend shown
  assert.deepEqual(gaugeParts({ tokens: 50, window: null, spent: 0.5, budget: null, unpriced: 2 }),
    { text: "context 50 tokens", fill: null, level: "", spend: "$0.500 (2 unpriced)", overBudget: false });
  assert.equal(gaugeParts({ tokens: 0, window: 100, spent: 0, budget: 0 }).spend, "$0 of $0");
  assert.deepEqual(gaugeParts(null), { text: "", fill: null, level: "", spend: "", overBudget: false });
});

test("spend over the budget is flagged (the footer highlights it)", () => {
  const over = gaugeParts({ tokens: 10, window: 100, spent: 0.051, budget: 0.05 });
  assert.equal(over.spend, "$0.051 of $0.050");
  assert.equal(over.overBudget, true);
  assert.equal(gaugeParts({ spent: 0.05, budget: 0.05 }).overBudget, false); // at the budget, not over
  assert.equal(gaugeParts({ spent: 3, budget: null }).overBudget, false); // no budget, nothing to be over
});

test("an over-budget ask unlocks the view like a refusal and carries the estimate", () => {
  let s = apply(initialState(), { type: "traits", running: false, gauge: { tokens: 5, window: 10 } });
  assert.deepEqual(s.gauge, { tokens: 5, window: 10 });
  const before = s.refusals;
  s = apply(s, { type: "confirm", prompt: "<b>hi</b>", text: "Estimate: ~9 input tokens" });
  assert.equal(s.refusals, before + 1);
  assert.deepEqual(s.confirm, { prompt: "<b>hi</b>", text: "Estimate: ~9 input tokens", seq: 1 });
  s = apply(s, { type: "confirm", prompt: "again", text: "t" });
  assert.equal(s.confirm.seq, 2);
  const same = apply(s, { type: "traits", running: false, gauge: { tokens: 5, window: 10 } });
  assert.equal(same.gauge, s.gauge); // an equal gauge keeps its identity
});

test("the gauge names the model the next message goes to; a turn after a switch is marked", async () => {
  const { modelLabel, turnModel } = await import("../src/render/footer.js");
  assert.equal(modelLabel("demo", "demo"), "demo");
  assert.equal(modelLabel("openai", "gpt-4.1"), "openai:gpt-4.1");
  assert.equal(turnModel({ provider: "local", model: "SmolLM2" }), "local:SmolLM2");
  assert.equal(turnModel(null), "");
});
