// What the page makes of the socket's frames, without the DOM: which run frames are new, and how an answer
// grows while it streams. The timeline takes these steps on the page; tests/js runs them on plain values.

/** The newest run frame that `ready` covered: {runId, seq}, or null when no run was going. */
export function seenFromReady(run) {
  return run ? { runId: run.run_id, seq: run.seq } : null;
}

/**
 * Whether `frame` is still to be applied, and the newest run frame seen once it is. A frame of the run seen
 * last whose seq is already covered came with `ready`'s snapshot or twice: it is dropped. The page cannot
 * tell an older run from a newer one (run ids are random), so a frame of another run is applied and its
 * seq becomes the one to beat. Frames outside runs (no run_id or seq) always apply.
 */
export function admit(seen, frame) {
  if (!frame.run_id || typeof frame.seq !== "number") return { apply: true, seen };
  if (seen && seen.runId === frame.run_id && frame.seq <= seen.seq) return { apply: false, seen };
  return { apply: true, seen: { runId: frame.run_id, seq: frame.seq } };
}

/** A stored or streaming assistant message as the page shows it: {status, text}, or null when it shows nothing. */
export function shownAnswer(message) {
  if (!message.content && !message.error && message.status !== "streaming") return null;
  return { status: message.status, text: message.content || "" };
}

/** Once a run is over: an answer that never got a word is dropped; one still streaming is final as it stands. */
export function finishedAnswer(answer) {
  return answer && answer.status === "streaming" && !answer.text ? null : answer;
}

/** The answer `frame` is about, or null. run_finished is about every answer. */
export function answerIdOf(frame) {
  if (frame.type === "message") return frame.message?.role === "assistant" ? frame.message.id : null;
  if (frame.type === "run_started" || frame.type === "token" || frame.type === "notice") return frame.message_id ?? null;
  return null;
}

/**
 * An answer after one frame. Tokens add to the text only while it streams (they create the answer when the
 * page has none yet); a provider retry starts the text again; the stored message replaces whatever streamed.
 */
export function answerAfter(answer, frame) {
  switch (frame.type) {
    case "run_started":
      return answer ?? { status: "streaming", text: "" };
    case "token":
      if (!answer) return { status: "streaming", text: frame.delta };
      return answer.status === "streaming" ? { ...answer, text: answer.text + frame.delta } : answer;
    case "notice":
      return frame.code === "PROVIDER_RETRY" && answer?.status === "streaming" ? { ...answer, text: "" } : answer;
    case "message":
      return shownAnswer(frame.message);
    case "run_finished":
      return finishedAnswer(answer);
    default:
      return answer;
  }
}

/** What `ready` leaves: its seq, and the running answer's text so far (or, with no run, the answers finished). */
export function afterReady(state, ready) {
  const run = ready.run;
  let answers = { ...state.answers };
  if (run && run.message_id) {
    answers[run.message_id] = { status: answers[run.message_id]?.status ?? "streaming", text: run.content || "" };
  }
  if (!run) answers = finishAll(answers);
  return { seen: seenFromReady(run), answers };
}

/** The page's live state, {seen, answers: {id: {status, text}}}, after `frames` in the order they came. */
export function applyFrames(state, frames) {
  let { seen, answers } = state;
  for (const frame of frames) {
    const verdict = admit(seen, frame);
    if (!verdict.apply) continue;
    seen = verdict.seen;
    if (frame.type === "run_finished") {
      answers = finishAll(answers);
      continue;
    }
    const id = answerIdOf(frame);
    if (id === null || (frame.type === "run_started" && !frame.message_id)) continue;
    const next = answerAfter(answers[id] ?? null, frame);
    answers = { ...answers };
    if (next) answers[id] = next;
    else delete answers[id];
  }
  return { seen, answers };
}

function finishAll(answers) {
  return Object.fromEntries(Object.entries(answers).filter(([, answer]) => finishedAnswer(answer)));
}

// How a call that ended is shown, by its outcome; every outcome not named here is a failure.
const OUTCOME_STATES = { done: "ok", rejected: "rejected", cancelled: "cancelled", unknown: "unknown" };

export const outcomeState = (outcome) => OUTCOME_STATES[outcome] || "error";
