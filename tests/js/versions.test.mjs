// Where a superseded message goes on the page, and what a group of earlier versions says.
import assert from "node:assert/strict";
import { test } from "node:test";

import { placeOf, versionWords } from "../../static/js/chat/versions.js";

test("a superseded message goes after the message its branch followed, in the version its first message names", () => {
  const message = { id: 7, superseded: true, metadata: { replaced: { after: 3, branch: 4 } } };
  assert.deepEqual(placeOf(message), { after: "3", branch: "4" });
  // A branch that began the conversation follows nothing.
  assert.deepEqual(placeOf({ ...message, metadata: { replaced: { after: null, branch: 1 } } }), { after: "", branch: "1" });
});

test("a live message, or a superseded one that does not say where it belongs, has no earlier version to go in", () => {
  assert.equal(placeOf({ id: 7, superseded: false, metadata: { replaced: { after: 3, branch: 4 } } }), null);
  assert.equal(placeOf({ id: 7, superseded: true, metadata: {} }), null);
  assert.equal(placeOf({ id: 7, superseded: true }), null);
});

test("the group counts the earlier versions; each is numbered among them and the live one, which is last", () => {
  assert.deepEqual(versionWords(1), { summary: "Previous version (1)", labels: ["Version 1 of 2"] });
  assert.deepEqual(versionWords(2), { summary: "Previous versions (2)", labels: ["Version 1 of 3", "Version 2 of 3"] });
});
