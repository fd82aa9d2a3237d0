// The page's handling of live frames, on plain values: which frames apply after `ready`, and the text of a
// streaming answer as tokens, retries, the stored message and the run's end come in.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  admit,
  afterReady,
  answerAfter,
  answerIdOf,
  applyFrames,
  finishedAnswer,
  outcomeState,
  seenFromReady,
  shownAnswer,
} from "../../static/js/chat/live.js";

const RUN = "7b0c4d52-0000-4000-8000-000000000001";
const OTHER_RUN = "7b0c4d52-0000-4000-8000-000000000002";
const token = (seq, delta, { run = RUN, id = 41 } = {}) => ({ type: "token", run_id: run, seq, message_id: id, delta });
const ready = (run) => ({ type: "ready", run, pending_confirmations: [] });
const liveRun = (seq, content) => ({ run_id: RUN, seq, message_id: 41, status: "streaming", content, tools: [] });
const empty = { seen: null, answers: {} };

describe("seq handling", () => {
  test("ready remembers its run and seq, or nothing when no run goes", () => {
    assert.deepEqual(seenFromReady(liveRun(7, "Hel")), { runId: RUN, seq: 7 });
    assert.equal(seenFromReady(null), null);
  });

  test("frames of ready's run that it already covered are dropped; later ones apply", () => {
    const seen = seenFromReady(liveRun(7, "Hel"));
    for (const seq of [1, 6, 7]) assert.deepEqual(admit(seen, token(seq, "x")), { apply: false, seen });
    assert.deepEqual(admit(seen, token(8, "x")), { apply: true, seen: { runId: RUN, seq: 8 } });
  });

  test("a frame that comes twice applies once", () => {
    let seen = seenFromReady(liveRun(3, ""));
    const verdicts = [token(4, "a"), token(4, "a"), token(5, "b"), token(4, "a")].map((frame) => {
      const verdict = admit(seen, frame);
      seen = verdict.seen;
      return verdict.apply;
    });
    assert.deepEqual(verdicts, [true, false, true, false]);
    assert.deepEqual(seen, { runId: RUN, seq: 5 });
  });

  test("a frame of another run applies and counts from its own seq (run ids say nothing of their order)", () => {
    const seen = seenFromReady(liveRun(9, ""));
    const verdict = admit(seen, token(2, "x", { run: OTHER_RUN }));
    assert.deepEqual(verdict, { apply: true, seen: { runId: OTHER_RUN, seq: 2 } });
    // From then on, the first run's frames are no longer measured against ready's seq.
    assert.equal(admit(verdict.seen, token(5, "x")).apply, true);
  });

  test("with no run at ready, every run frame applies", () => {
    assert.deepEqual(admit(null, token(1, "x")), { apply: true, seen: { runId: RUN, seq: 1 } });
  });

  test("frames outside a run always apply and leave the count alone", () => {
    const seen = { runId: RUN, seq: 4 };
    for (const frame of [
      { type: "error", code: "BUSY", message: "busy" },
      { type: "message", message: { id: 1, role: "user", content: "hi" }, client_id: "c1" },
      { type: "token", run_id: RUN, message_id: 41, delta: "x" }, // no seq
    ]) {
      assert.deepEqual(admit(seen, frame), { apply: true, seen });
    }
  });
});

describe("an answer's text", () => {
  test("tokens add up, in order, to the answer", () => {
    const state = applyFrames(empty, [
      { type: "run_started", run_id: RUN, seq: 1, message_id: 41 },
      token(2, "Hel"),
      token(3, "lo, "),
      token(4, "world"),
    ]);
    assert.deepEqual(state.answers, { 41: { status: "streaming", text: "Hello, world" } });
    assert.deepEqual(state.seen, { runId: RUN, seq: 4 });
  });

  test("after ready, the text so far is kept and only newer tokens are added: nothing lost, nothing twice", () => {
    const joined = afterReady(empty, ready(liveRun(3, "Hello")));
    assert.deepEqual(joined.answers, { 41: { status: "streaming", text: "Hello" } });
    // The backlog repeats tokens 2 and 3, which ready's text already holds.
    const state = applyFrames(joined, [token(2, "l"), token(3, "o"), token(4, ", "), token(4, ", "), token(5, "world")]);
    assert.equal(state.answers[41].text, "Hello, world");
  });

  test("a token for an answer the page does not show yet starts it", () => {
    assert.deepEqual(answerAfter(null, token(1, "Hi")), { status: "streaming", text: "Hi" });
    assert.deepEqual(applyFrames(empty, [token(1, "Hi", { id: 42 })]).answers, { 42: { status: "streaming", text: "Hi" } });
  });

  test("tokens of one answer do not touch another", () => {
    const state = applyFrames(empty, [token(1, "a", { id: 1 }), token(2, "b", { id: 2 }), token(3, "c", { id: 1 })]);
    assert.deepEqual(state.answers, { 1: { status: "streaming", text: "ac" }, 2: { status: "streaming", text: "b" } });
  });

  test("a provider retry starts the answer's text again", () => {
    const state = applyFrames(empty, [
      token(1, "{not json"),
      { type: "notice", run_id: RUN, seq: 2, code: "PROVIDER_RETRY", message_id: 41 },
      token(3, "Second time lucky."),
    ]);
    assert.equal(state.answers[41].text, "Second time lucky.");
  });

  test("other notices leave the text alone", () => {
    const answer = { status: "streaming", text: "so far" };
    assert.equal(answerAfter(answer, { type: "notice", code: "CONTEXT_TRIMMED", message_id: 41 }), answer);
  });

  test("the stored message replaces the streamed text, and late tokens change nothing", () => {
    const stored = { id: 41, role: "assistant", status: "complete", content: "Hello, world." };
    const state = applyFrames(empty, [token(1, "Hello"), { type: "message", run_id: RUN, seq: 2, message: stored }, token(3, " again")]);
    assert.deepEqual(state.answers[41], { status: "complete", text: "Hello, world." });
    const final = state.answers[41];
    assert.equal(answerAfter(final, token(4, "more")), final);
  });

  test("a stored answer without text is not shown", () => {
    const stored = { id: 41, role: "assistant", status: "complete", content: "", tool_calls: [{ id: "c1" }] };
    assert.deepEqual(applyFrames(empty, [token(1, ""), { type: "message", message: stored }]).answers, {});
    assert.equal(shownAnswer(stored), null);
    assert.deepEqual(shownAnswer({ ...stored, status: "streaming" }), { status: "streaming", text: "" });
  });

  test("a failed answer without text is shown, for what went wrong", () => {
    const failed = { id: 42, role: "assistant", status: "failed", content: "", error: "The provider is down." };
    assert.deepEqual(shownAnswer(failed), { status: "failed", text: "" });
  });

  test("at the run's end an answer without a word goes; one with text stays as it stands", () => {
    const state = applyFrames(empty, [
      { type: "run_started", run_id: RUN, seq: 1, message_id: 1 },
      token(2, "partial", { id: 2 }),
      { type: "run_finished", run_id: RUN, seq: 3, status: "cancelled" },
    ]);
    assert.deepEqual(state.answers, { 2: { status: "streaming", text: "partial" } });
    assert.equal(finishedAnswer({ status: "streaming", text: "" }), null);
    assert.equal(finishedAnswer(null), null);
  });

  test("ready without a run ends the answers that were streaming", () => {
    const before = { seen: { runId: RUN, seq: 5 }, answers: { 1: { status: "streaming", text: "" }, 2: { status: "streaming", text: "x" } } };
    assert.deepEqual(afterReady(before, ready(null)), { seen: null, answers: { 2: { status: "streaming", text: "x" } } });
  });

  test("which answer a frame is about", () => {
    assert.equal(answerIdOf(token(1, "x", { id: 9 })), 9);
    assert.equal(answerIdOf({ type: "message", message: { id: 3, role: "user" } }), null);
    assert.equal(answerIdOf({ type: "message", message: { id: 4, role: "assistant" } }), 4);
    assert.equal(answerIdOf({ type: "tool_start", tool_call_id: "c1" }), null);
  });
});

test("a call's outcome gives its card's state; any other outcome is a failure", () => {
  assert.deepEqual(["done", "rejected", "cancelled", "unknown", "error", "denied", undefined].map(outcomeState), [
    "ok",
    "rejected",
    "cancelled",
    "unknown",
    "error",
    "error",
    "error",
  ]);
});
