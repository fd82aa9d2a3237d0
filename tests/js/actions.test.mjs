// Which run the page offers to continue: the same rule the server applies to a `continue` frame.

import assert from "node:assert/strict";
import { test } from "node:test";

import { canContinue } from "../../static/js/chat/actions.js";

test("an answer that stopped or failed can be continued", () => {
  assert.equal(canContinue({ kind: "assistant", status: "interrupted" }), true);
  assert.equal(canContinue({ kind: "assistant", status: "failed" }), true);
});

test("a complete answer cannot", () => {
  assert.equal(canContinue({ kind: "assistant", status: "complete" }), false);
  assert.equal(canContinue({ kind: "assistant", status: "streaming" }), false);
});

test("a run that ended on a tool result, or a question with no answer drawn, can", () => {
  assert.equal(canContinue({ kind: "tool" }), true);
  assert.equal(canContinue({ kind: "user", status: "complete" }), true);
});

test("an empty conversation cannot", () => {
  assert.equal(canContinue(undefined), false);
});
