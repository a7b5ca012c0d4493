import { test } from "node:test";
import assert from "node:assert/strict";
import { transcriptsBeside } from "../src/transcript_beside.js";

// A tiny element tree: class names, children, parent and next sibling, and the two selector
// queries transcriptsBeside makes (one class name each).
class El {
  /** @param {string} cls @param {El[]} kids */
  constructor(cls = "", kids = []) {
    this.cls = cls.split(" ").filter(Boolean);
    this.children = kids;
    this.parentElement = null;
    for (const k of kids) k.parentElement = this;
  }
  get nextElementSibling() {
    const sibs = this.parentElement ? this.parentElement.children : [];
    return sibs[sibs.indexOf(this) + 1] || null;
  }
  /** @param {string} sel */
  matches(sel) { return this.cls.includes(sel.slice(1)); }
  /** @param {string} sel @returns {El|null} */
  querySelector(sel) {
    for (const k of this.children) {
      if (k.matches(sel)) return k;
      const hit = k.querySelector(sel);
      if (hit) return hit;
    }
    return null;
  }
}

test("the transcript output displayed after the widget is found: VS Code-like and HTML-manager-like layouts", () => {
  // an output list: [widget output, transcript output] (VS Code, Colab: each output in its own box)
  const el = new El("widget-el");
  const transcriptOut = new El("output", [new El("markdown", [new El("nbagent-transcript")])]);
  new El("cell-outputs", [new El("output", [new El("output-inner", [el])]), transcriptOut]);
  assert.deepEqual(transcriptsBeside(el), [transcriptOut]);
  // the transcript div itself right after the widget's element (a static page)
  const el2 = new El("widget-el");
  const div = new El("nbagent-transcript");
  new El("page", [el2, div]);
  assert.deepEqual(transcriptsBeside(el2), [div]);
});

test("nothing else is taken for the transcript: another chat's output, an output before the widget, a far one", () => {
  // the next output holds a chat widget too (a second widget with its own transcript)
  const el = new El("widget-el");
  new El("cell-outputs", [new El("output", [el]), new El("output", [new El("nba-chat"), new El("nbagent-transcript")])]);
  assert.deepEqual(transcriptsBeside(el), []);
  // the transcript comes before the widget: not the live widget's (it is displayed after it)
  const el2 = new El("widget-el");
  new El("cell-outputs", [new El("output", [new El("nbagent-transcript")]), new El("output", [el2])]);
  assert.deepEqual(transcriptsBeside(el2), []);
  // a transcript more than five levels up (another cell's output): left alone
  const el3 = new El("widget-el");
  let node = el3;
  for (let i = 0; i < 6; i++) node = new El("wrap", [node]);
  new El("notebook", [node, new El("cell", [new El("nbagent-transcript")])]);
  assert.deepEqual(transcriptsBeside(el3), []);
  // no transcript at all (marimo, a console)
  const el4 = new El("widget-el");
  new El("page", [new El("wrap", [el4]), new El("other")]);
  assert.deepEqual(transcriptsBeside(el4), []);
});

test("every transcript output after the widget is found: the head and one per finished turn, up to another chat", () => {
  const el = new El("widget-el");
  const md = () => new El("output", [new El("markdown", [new El("nbagent-transcript")])]);
  const head = md(), turn1 = md(), turn2 = md(), other = md();
  const printed = new El("output", [new El("stream")]); // something the cell printed between them
  new El("cell-outputs", [new El("output", [new El("output-inner", [el])]), head, turn1, printed, turn2,
    new El("output", [new El("nba-chat")]), other]);
  assert.deepEqual(transcriptsBeside(el), [head, turn1, turn2]); // not the next chat's transcript
});
