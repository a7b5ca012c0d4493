// The class view's detail as a teacher follows a student (#48 rough edges).
import { test } from "node:test";
import assert from "node:assert/strict";
import { followScroll, detailLine } from "../src/classview/index.js";

test("following a student brings their new turn into view; reading further up keeps the place", () => {
  assert.equal(followScroll(false, { top: 0, height: 0, client: 0 }, 2400), 2400); // opened: the latest turn
  assert.equal(followScroll(true, { top: 1600, height: 2000, client: 400 }, 2600), 2600); // at the end: follows
  assert.equal(followScroll(true, { top: 300, height: 2000, client: 400 }, 2600), 300); // reading above: stays
});

test("the detail's cost says it is the latest session's, beside the row's total of all sessions", () => {
  const row = { user: "ana", sessions: 3, cost_usd: 0.149 };
  const usage = [{ input_tokens: 100, output_tokens: 20, cost: 0.0447, model: "demo" }];
  const line = detailLine(/** @type {any} */ (row), usage);
  assert.match(line, /^latest session: 1 turn · 100 in · 20 out · \$0\.045/);
  assert.match(line, /all 3 sessions: \$0\.149$/);
  assert.doesNotMatch(detailLine(/** @type {any} */ ({ ...row, sessions: 1 }), usage), /all/);
});
