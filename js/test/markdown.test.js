import { split } from "../src/mathtext.js";
import { test } from "node:test";
import assert from "node:assert/strict";
import { splitBlocks, renderMarkdown, highlight, registerGrammars } from "../src/markdown.js";
import * as grammars from "../src/grammars.js";

test("finished blocks and the growing tail cover the text exactly", () => {
  const text = "# Title\n\nFirst paragraph.\n\n- a\n- b\n\n```py\nx = 1\n```\n\nthe tail is still gro";
  const { done, tail } = splitBlocks(text);
  assert.equal(done.join("") + tail, text);
  assert.equal(tail, "the tail is still gro");
  assert.equal(done.length, 4);
});

test("an unclosed code fence stays in the tail", () => {
  const text = "Intro.\n\n```python\ndef f():\n    return 1\n";
  const { done, tail } = splitBlocks(text);
  assert.deepEqual(done, ["Intro.\n\n"]);
  assert.ok(tail.startsWith("```python"));
});

test("a single growing paragraph is all tail", () => {
  assert.deepEqual(splitBlocks("just one para"), { done: [], tail: "just one para" });
  assert.deepEqual(splitBlocks(""), { done: [], tail: "" });
});

test("splitting incrementally gives the same blocks as splitting at once", () => {
  const text = "A.\n\nB b b.\n\n1. x\n2. y\n\n> quote\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nEnd.";
  let doneLen = 0;
  const blocks = [];
  for (let i = 1; i <= text.length; i++) {
    const { done } = splitBlocks(text.slice(doneLen, i));
    for (const b of done) { blocks.push(b); doneLen += b.length; }
  }
  const final = splitBlocks(text.slice(doneLen));
  assert.equal(blocks.join("") + final.tail, text);
  assert.deepEqual([...blocks, ...final.done], splitBlocks(text).done);
});

test("raw HTML in model output is shown as text, never as markup", () => {
  const html = renderMarkdown('Hi <img src=x onerror="window.__pwned=1"> and\n\n<script>window.__pwned=1</script>\n\n<b onclick="x()">b</b>');
  assert.ok(!/<img|<script|<b\b|onerror=|onclick=/i.test(html.replace(/&lt;[^]*?&gt;/g, "")), html);
  assert.match(html, /&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;/);
  assert.match(html, /&lt;script&gt;window.__pwned=1&lt;\/script&gt;/);
});

test("javascript: links and images do not become active elements", () => {
  const html = renderMarkdown("[click](javascript:alert(1)) ![pic](http://example.com/x.png) ![d](data:image/png;base64,xx)");
  assert.ok(!html.includes("javascript:"), html);
  assert.ok(!/<img/i.test(html), html);
  assert.match(html, /<a href="http:\/\/example.com\/x.png"/);
});

test("math delimiters become math placeholders; code spans, code blocks and money do not", () => {
  const html = renderMarkdown("Euler: $e^{i\\pi} + 1 = 0$ and \\(a<b\\), costs $5 and $10.\n\n$$\\int_0^1 x\\,dx$$\n\n\\[ x^2 \\]\n\n`$not math$` and:\n\n```\n$$ also not $$\n```\n");
  const spans = [...html.matchAll(/<(span|div) class="nba-math( nba-math-display)?">([^<]*)<\/\1>/g)].map((m) => [m[3], !!m[2]]);
  assert.deepEqual(spans, [["e^{i\\pi} + 1 = 0", false], ["a&lt;b", false], ["\\int_0^1 x\\,dx", true], ["x^2", true]]);
  assert.match(html, /costs \$5 and \$10\./);
  assert.match(html, /<code>\$not math\$<\/code>/);
  assert.match(html, /\$\$ also not \$\$/);
});

test("math in a thought is split from its text; code spans stay text", () => {
  assert.deepEqual(split("so $x^2$ then \\[y\\] but `$z$` costs $5"), [
    ["so ", null], ["x^2", false], [" then ", null], ["y", true], [" but `$z$` costs $5", null]]);
  assert.deepEqual(split("no math here"), [["no math here", null]]);
});

test("the math rule: the cases Python shares (tests/test_mathtext.py reads the same file)", async () => {
  const { readFileSync } = await import("node:fs");
  const { split } = await import("../src/mathtext.js");
  const cases = JSON.parse(readFileSync(new URL("./math_cases.json", import.meta.url), "utf8"));
  for (const [text, pieces] of cases) assert.deepEqual(split(text), pieces, text);
});

test("TeX that does not parse throws (the widget then shows the TeX, not Temml's error text)", async () => {
  const { tex } = await import("../src/math.js");
  assert.match(tex("x^2", false), /<math/);
  assert.throws(() => tex("\\frac{1}{", false), /ParseError/);
});

test("python/sql/shell/yaml/json blocks show plain (marked pending) until the grammars module arrives", () => {
  const before = renderMarkdown("```sql\nSELECT a FROM t\n```");
  assert.match(before, /class="hljs language-sql nba-hl-pending">SELECT a FROM t</);
  assert.match(renderMarkdown("```python\npass\n```"), /class="hljs language-python nba-hl-pending">pass</);
  assert.doesNotMatch(renderMarkdown("```js\nlet a\n```"), /nba-hl-pending/); // no grammar for it: plain for good
  assert.equal(highlight("def f(): pass", "python"), "def f(): pass");
  registerGrammars(grammars);
  const after = renderMarkdown("```sql\nSELECT a FROM t\n```");
  assert.match(after, /class="hljs language-sql">/);
  assert.match(after, /hljs-keyword">SELECT</);
  assert.match(highlight("ls -la", "sh"), /hljs-built_in">ls</);
  assert.match(highlight("a: 1", "yml"), /hljs-attr">a:</);
});

test("code blocks are highlighted (once the grammars are here), escaped and get a copy button", () => {
  registerGrammars(grammars);
  const html = renderMarkdown("```python\ndef f(x):\n    return '<tag>'\n```");
  assert.match(html, /class="nba-copy"/);
  assert.match(html, /hljs-keyword">def</);
  assert.match(html, /&lt;tag&gt;/);
  assert.equal(highlight("<b>", "nolang"), "&lt;b&gt;");
});

