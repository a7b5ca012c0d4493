// The real js/src/reducer.js as a line-oriented process (tests/test_turn_codec_pair.py): each input line
// is a JSON list of kernel messages, applied in order (null: a new view); each output line the view's
// turns after them.
import { createInterface } from "node:readline";
import { apply, initialState } from "../../js/src/reducer.js";

let state = initialState();
for await (const line of createInterface({ input: process.stdin })) {
  const events = JSON.parse(line);
  if (events === null) state = initialState();
  for (const event of events || []) state = apply(state, event);
  const turns = state.turns.map((t) => ({ turn: t.turn, record: t.record, steps: t.steps, done: !!t.done }));
  process.stdout.write(JSON.stringify({ turns, gap: state.gap, pending: state.pending.length }) + "\n");
}
