// The last turn as the widget draws it, on the fake DOM of js/test (no browser): stdin is
// [messages, marks] as tests/support/step_fields.py records them; stdout the drawn turn at each mark.
import fs from "node:fs";
import { installFakeDom } from "../../js/test/support/fake_dom.js";

installFakeDom();
const { apply, initialState } = await import("../../js/src/reducer.js");
const { TurnView } = await import("../../js/src/render/turn.js");

/** Every element with what a person can see of it: tag, classes, attributes, display, text. @param {any} el */
const drawn = (el) => ({ tag: el.tagName, cls: el.className, attrs: el.attributes, data: el.dataset,
  hidden: el.style && el.style.display === "none", text: el.ownText, html: el.innerHTMLText,
  children: el.children.map(drawn) });

const [messages, marks] = JSON.parse(fs.readFileSync(0, "utf8"));
let state = initialState();
const out = [];
for (let i = 0; i < messages.length; i++) {
  const [kind, body] = messages[i];
  if (kind === "custom") state = apply(state, body);
  if (marks.includes(i + 1)) {
    const turn = state.turns[state.turns.length - 1];
    const view = new TurnView(() => true);
    if (turn) view.update(turn);
    out.push(JSON.stringify(drawn(view.el)));
  }
}
process.stdout.write(JSON.stringify(out), () => process.exit(0)); // a running tool's card ticks on a timer
