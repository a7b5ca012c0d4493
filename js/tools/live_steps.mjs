// Replays a recorded kernel -> front end message log through the reducer, in order, and prints the
// running turn's steps at each mark. Used by tests/test_step_fields.py (each Step field the widget
// shows must reach the view's state). stdin: {"messages": [["update", {...}] | ["custom", content]], "marks": [n, ...]}
import { initialState, apply } from "../src/reducer.js";

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const { messages, marks } = JSON.parse(Buffer.concat(chunks).toString("utf8"));
/** @type {Record<string, any>} */
const attrs = { running: false, notice: "", finished: 0 };
let state = initialState();
const out = [];
messages.forEach((/** @type {[string, any]} */ [kind, body], /** @type {number} */ i) => {
  if (kind === "update") {
    Object.assign(attrs, body);
    state = apply(state, { type: "traits", ...attrs });
  } else state = apply(state, body);
  for (const m of marks) if (m === i + 1) out.push(state.turns.length ? state.turns[state.turns.length - 1].steps : []);
});
process.stdout.write(JSON.stringify(out));
