import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import path from "node:path";
import fs from "node:fs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.join(here, "..");

test("the front end type-checks (tsc --checkJs) against the generated protocol types", () => {
  const tsc = path.join(root, "node_modules", "typescript", "bin", "tsc");
  const run = spawnSync(process.execPath, [tsc, "-p", path.join(root, "tsconfig.json")], { encoding: "utf8" });
  assert.equal(run.status, 0, run.stdout + run.stderr);
});

test("the generated types and schema declare the same messages", () => {
  const schema = JSON.parse(fs.readFileSync(path.join(root, "src", "protocol.json"), "utf8"));
  const dts = fs.readFileSync(path.join(root, "src", "protocol.d.ts"), "utf8");
  for (const [widget, prefix] of [["chat", "Chat"], ["session_browser", "Browser"], ["class_view", "Class"]]) {
    for (const [table, what] of [["requests", "Request"], ["events", "Event"]]) {
      for (const kind of Object.keys(schema[widget][table])) {
        assert.match(dts, new RegExp(`interface ${prefix}${what}_${kind} \\{ type: "${kind}";`));
      }
    }
  }
});
