import { test } from "node:test";
import assert from "node:assert/strict";
import { savedWidgets, stubState, STATE_MIME, STUB_ESM } from "../src/saved_state.js";

const live = { _model_module: "anywidget", _model_name: "AnyModel", _model_module_version: "~0.11.*",
  _view_module: "anywidget", _view_name: "AnyView", _view_module_version: "~0.11.*", _esm: "x".repeat(150_000), current: { secret: 1 } };

test("the stub names the live model's classes and renders nothing: no transcript, no bundle", () => {
  const stub = stubState((k) => live[k]);
  assert.equal(stub.model_module, "anywidget");
  assert.equal(stub.model_name, "AnyModel");
  assert.equal(stub.state._view_name, "AnyView");
  assert.equal(stub.state._esm, STUB_ESM);
  assert.equal(stub.state.current, undefined);
  assert.ok(JSON.stringify(stub).length < 1000);
});

test("saved state: stubs of shown widgets added, stale stubs dropped, other widgets kept", () => {
  const stub = stubState((k) => live[k]);
  const other = { model_name: "IntSliderModel", state: { value: 3 } };
  const before = { [STATE_MIME]: { version_major: 2, version_minor: 0, state: { old: stub, kept: stub, slider: other } } };
  const after = savedWidgets(before, new Map([["new", stub], ["gone", stub]]), new Set(["new", "kept", "slider"]));
  assert.deepEqual(Object.keys(after[STATE_MIME].state).sort(), ["kept", "new", "slider"]);
  assert.equal(after[STATE_MIME].version_major, 2);
  assert.equal(savedWidgets(undefined, new Map(), new Set()), undefined); // nothing to save: no metadata
  assert.equal(savedWidgets({ [STATE_MIME]: { state: { old: stub } } }, new Map(), new Set()), undefined);
});
