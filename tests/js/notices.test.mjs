// How an answer that did not end well says so, and the plain words for the server's codes.
import assert from "node:assert/strict";
import { test } from "node:test";

import { answerEnding, errorText, noticeText } from "../../static/js/chat/notices.js";

test("a stopped or failed answer says so under it; the step limit in words of the page's own", () => {
  assert.equal(answerEnding({ status: "interrupted", content: "Half an ans", error: "You pressed Stop." }), "interrupted");
  assert.equal(answerEnding({ status: "failed", content: "", error: "The provider refused the key." }), "failed");
  const limit = { content: "Reached maximum iteration limit", metadata: { run_id: "r", stop: "step_limit" } };
  assert.equal(answerEnding({ ...limit, status: "interrupted", error: "The agent used all of its 8 steps." }), "limit");
  // The words alone are not the mark: a model may write them.
  assert.equal(answerEnding({ status: "interrupted", content: limit.content, metadata: {}, error: "You pressed Stop." }), "interrupted");
  assert.equal(answerEnding({ status: "complete", content: limit.content, metadata: {} }), "");
});

test("codes become sentences; a refusal keeps the server's words", () => {
  assert.match(errorText("BUSY", "…", false), /still answering/);
  const budget = "You have used today's budget of 1,000 tokens. It resets at midnight (UTC), in 3 h 12 min.";
  assert.equal(errorText("RATE_LIMITED", budget, false), budget);
  assert.match(errorText("RATE_LIMITED", "", false), /too fast/);
  assert.equal(errorText("FORBIDDEN", "This account has been deactivated.", true), "This account has been deactivated.");
  assert.equal(errorText("INVALID", "There is no answer to regenerate yet.", false), "That was not accepted: There is no answer to regenerate yet.");
  assert.equal(noticeText("NO_SUCH_CODE"), "Note from the server.");
});
