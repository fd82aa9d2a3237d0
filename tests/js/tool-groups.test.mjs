// Which calls fold into one row, and what that row says of them.
import assert from "node:assert/strict";
import { test } from "node:test";

import { groupState, toolRuns } from "../../static/js/chat/tool-groups.js";

test("three or more calls of one tool in a row fold; fewer, or others between, do not", () => {
  assert.deepEqual(toolRuns(["lookup", "lookup", "lookup", "lookup"]), [[0, 4]]);
  assert.deepEqual(toolRuns(["lookup", "lookup", "search", "lookup", "lookup"]), []);
  assert.deepEqual(toolRuns(["a", "a", "a", null, "a", "a", "a", "b", "b", "b"]), [[0, 3], [4, 7], [7, 10]]);
  assert.deepEqual(toolRuns([null, null, null]), []);
  assert.deepEqual(toolRuns([]), []);
});

test("a group shows a call still running first, then a failure, else that all went well", () => {
  assert.equal(groupState(["ok", "ok", "running"]), "running");
  assert.equal(groupState(["ok", "error", "ok"]), "error");
  assert.equal(groupState(["ok", "cancelled", "ok"]), "cancelled");
  assert.equal(groupState(["ok", "ok", "ok"]), "ok");
});
