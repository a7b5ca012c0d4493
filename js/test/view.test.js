import { test } from "node:test";
import assert from "node:assert/strict";
import { hiddenTurns, SHOWN_TURNS, EARLIER_TURNS } from "../src/render/view.js";

test("a long chat renders its latest turns; the earlier ones wait behind a button", () => {
  assert.equal(hiddenTurns(0, null, true), null); // nothing to decide yet
  assert.equal(hiddenTurns(5, null, true), 0);
  assert.equal(hiddenTurns(200, null, true), 200 - SHOWN_TURNS);
  // new turns add to what is rendered; "Show earlier turns" lowers the count and it stays lowered
  assert.equal(hiddenTurns(201, 200 - SHOWN_TURNS, true), 200 - SHOWN_TURNS);
  const shown = 200 - SHOWN_TURNS - EARLIER_TURNS;
  assert.equal(hiddenTurns(200, shown, false), shown);
  assert.equal(hiddenTurns(200, 0, false), 0); // all of it, while the reader is up there
});

test("following the stream trims the rendered turns back to the latest once they outgrow the window", () => {
  const grown = 100 - SHOWN_TURNS - EARLIER_TURNS; // rendered: exactly SHOWN + EARLIER
  assert.equal(hiddenTurns(100, grown, true), grown);
  assert.equal(hiddenTurns(101, grown, true), 101 - SHOWN_TURNS);
  assert.equal(hiddenTurns(101, grown, false), grown); // scrolled up: nothing moves under the reader
});

test("another conversation (fewer turns, or none) starts again at its latest turns", () => {
  assert.equal(hiddenTurns(30, 180, false), 30 - SHOWN_TURNS);
  assert.equal(hiddenTurns(0, 180, false), null);
});
