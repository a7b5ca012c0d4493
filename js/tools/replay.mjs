// Replays a recorded kernel -> front end message log through the reducer and prints the
// transcript as JSON. Used by tests/test_widget.py to check both sides build the same transcript.
// stdin: {"messages": [["update", {trait: value}] | ["custom", content], ...], "reorder": bool}
// With reorder, each state update is applied after the custom message that follows it
// (ipywidgets applies updates asynchronously while custom messages fire at once).
import { initialState, apply, carriedTraits, transcript } from "../src/reducer.js";

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const { messages, reorder } = JSON.parse(Buffer.concat(chunks).toString("utf8"));
/** @type {Record<string, any>} */
const attrs = { running: false, notice: "", finished: 0 };
let state = initialState();
const traits = () => ({ type: "traits", running: attrs.running, notice: attrs.notice,
  finished: attrs.finished });
let held = null;
for (const [kind, body] of messages) {
  if (kind === "update") {
    if (held) { Object.assign(attrs, held); state = apply(state, traits()); }
    held = body;
    if (!reorder) { Object.assign(attrs, held); held = null; state = apply(state, traits()); }
  } else if (["deltas", "turn", "turns"].includes(body.type)) {
    state = apply(state, body);
    if (held) { Object.assign(attrs, held); held = null; state = apply(state, traits()); }
    if (body.state) { Object.assign(attrs, carriedTraits((n) => attrs[n], body.state)); state = apply(state, traits()); }
  }
}
if (held) { Object.assign(attrs, held); state = apply(state, traits()); }
process.stdout.write(JSON.stringify({ transcript: transcript(state), gap: state.gap }));
