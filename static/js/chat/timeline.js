// The conversation itself: what `ready` and the history API say is there, then the live frames in order
// (those `ready` already covered are dropped), as messages, streaming answers and, through the other modules,
// tool cards, confirmations, notices and the composer's state.

import { decorateMarkdown } from "./code-blocks.js";
import { appendEntry, clone, findBy, setSanitizedHTML } from "./dom.js";
import { pretty } from "./format.js";
import { gettext } from "./i18n.js";
import { admit, answerAfter, finishedAnswer, outcomeState, seenFromReady, shownAnswer } from "./live.js";
import { answerEnding, noticeText } from "./notices.js";
import { streamedText, streamText } from "./streaming.js";
import { placeOf, Versions } from "./versions.js";

const HISTORY_PAGE_SIZE = 500;

/** An answer on the page as live.js sees it: {status, text}, or null. */
function answerOf(item) {
  return item ? { status: item.dataset.status, text: streamedText(item.querySelector(".msg-body")) } : null;
}

export class Timeline {
  constructor(list, { historyUrl, cards, confirmations, composer, uploads, notices, conversation, onError, onChange }) {
    this.list = list;
    this.historyUrl = historyUrl;
    this.cards = cards;
    this.confirmations = confirmations;
    this.composer = composer;
    this.uploads = uploads;
    this.notices = notices;
    this.conversation = conversation;
    this.onError = onError;
    this.onChange = onChange;
    this.syncing = false; // between `ready` and the end of its history check: frames wait in the queue
    this.queue = [];
    this.seen = null; // {runId, seq}: the newest run frame applied
    this.live = { list, cards, readonly: false }; // where the live branch is drawn; earlier versions have their own
    this.versions = new Versions(list);
    // Whoever reads at the end stays there when the list's box shrinks: a phone's keyboard opening, the window
    // turned or resized, the message box growing by a line.
    this.atEnd = true;
    list.addEventListener("scroll", () => (this.atEnd = this.nearEnd()), { passive: true });
    new ResizeObserver(() => this.atEnd && this.scrollToEnd(true)).observe(list);
  }

  receive(frame) {
    if (this.syncing) this.queue.push(frame);
    else this.apply(frame);
  }

  /** The socket closed: what waited for a `ready` that will not finish is dropped. */
  closed() {
    this.syncing = false;
    this.queue = [];
  }

  async ready(frame, reconnected) {
    this.syncing = true;
    try {
      await this.syncHistory(reconnected);
    } catch {
      // The page keeps what it shows; the live frames below still apply.
    }
    const run = frame.run;
    this.seen = seenFromReady(run);
    this.composer.setRunning(Boolean(run));
    if (run && run.message_id) {
      const bubble = this.streamingBubble(run.message_id);
      streamText(bubble.body, run.content || "");
      bubble.item.classList.toggle("thinking", !run.content);
    }
    if (!run) this.finishStreaming();
    for (const call of run?.tools || []) {
      const card = this.cards.card(call.tool_call_id, call.tool, call.input);
      this.cards.setState(card, call.background ? "background" : "running");
      if (call.decision) this.cards.setDecision(card, call.decision);
    }
    this.confirmations.sync(frame.pending_confirmations || []);
    this.syncing = false;
    const queued = this.queue;
    this.queue = [];
    for (const item of queued) this.apply(item);
    this.composer.update();
    this.onChange();
    this.scrollToEnd(true);
  }

  /** What was stored while this page was not listening: drawn again from the history API when it differs. */
  async syncHistory(force) {
    const messages = await this.fetchHistory();
    // Earlier versions are compared too, and whether each message is shown as one.
    const stored = messages.filter(
      (message) => message.status !== "streaming" && (!message.superseded || placeOf(message)),
    );
    const branch = (node) => (node.closest(".versions") ? "earlier" : "live");
    const shown = Array.from(this.list.querySelectorAll("[data-message-id]"))
      .filter((node) => node.dataset.status !== "streaming")
      .map((node) => `${node.dataset.messageId}:${node.dataset.status}:${branch(node)}`);
    const results = Array.from(this.list.querySelectorAll(".tool-card[data-result-id]")).map(
      (node) => `${node.dataset.resultId}:tool:${branch(node)}`,
    );
    const branchOf = (message) => (message.superseded ? "earlier" : "live");
    const expected = stored
      .filter((message) => message.role === "user" || (message.role === "assistant" && message.content))
      .map((message) => `${message.id}:${message.status}:${branchOf(message)}`);
    const expectedResults = stored
      .filter((message) => message.role === "tool")
      .map((message) => `${message.id}:tool:${branchOf(message)}`);
    const same = (a, b) => a.length === b.length && a.every((value, index) => value === b[index]);
    if (!force && same(shown.sort(), expected.sort()) && same(results.sort(), expectedResults.sort())) return;
    this.list.replaceChildren();
    this.versions = new Versions(this.list);
    for (const message of messages) this.renderMessage(message);
    if (!messages.length) document.getElementById("empty-chat")?.remove();
  }

  async fetchHistory() {
    const get = async (url) => {
      const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (!response.ok) throw new Error(String(response.status));
      return response.json();
    };
    const last = await get(`${this.historyUrl}?page=last&page_size=${HISTORY_PAGE_SIZE}`);
    let messages = last.results || [];
    if (last.previous && messages.length < Math.min(last.count, HISTORY_PAGE_SIZE)) {
      const previous = await get(last.previous);
      messages = [...(previous.results || []), ...messages].slice(-HISTORY_PAGE_SIZE);
    }
    return messages;
  }

  apply(frame) {
    const verdict = admit(this.seen, frame);
    if (!verdict.apply) return;
    this.seen = verdict.seen;
    // Whether the list follows the end is decided before the frame draws: a tall card would put it out of reach.
    const following = this.nearEnd();
    switch (frame.type) {
      case "message":
        this.onMessage(frame.message, frame.client_id);
        break;
      case "run_started":
        this.composer.setRunning(true);
        if (frame.message_id) this.streamingBubble(frame.message_id);
        break;
      case "token":
        this.onToken(frame);
        break;
      case "tool_start": {
        const card = this.cards.card(frame.tool_call_id, frame.tool, frame.input);
        this.cards.setInput(card, frame.input);
        this.cards.setState(card, frame.background ? "background" : "running");
        if (frame.decision) this.cards.setDecision(card, frame.decision);
        this.confirmations.remove(frame.tool_call_id);
        break;
      }
      case "tool_end": {
        const card = this.cards.card(frame.tool_call_id, frame.tool);
        this.cards.setOutput(card, pretty(frame.output));
        this.cards.setState(card, "ok");
        break;
      }
      case "tool_error": {
        const card = this.cards.card(frame.tool_call_id, frame.tool);
        this.cards.setOutput(card, frame.error);
        this.cards.setState(card, outcomeState(frame.outcome));
        this.confirmations.remove(frame.tool_call_id);
        break;
      }
      case "confirm_required":
        this.confirmations.require(frame);
        break;
      case "notice":
        if (frame.message_id) this.restartAnswer(frame);
        this.notices.show(noticeText(frame.code), "info", frame.code);
        break;
      case "run_finished":
        this.composer.setRunning(false);
        this.finishStreaming();
        this.conversation.refresh();
        break;
      case "error":
        this.onError(frame.code, frame.message);
        break;
      default:
        break;
    }
    this.onChange();
    this.scrollToEnd(following);
  }

  // --- messages ----------------------------------------------------------------------------------

  /** A message's row on the live branch. */
  findMessage(id) {
    return findBy(this.list, ":scope > ", "message-id", id);
  }

  onMessage(message, clientId) {
    const firstUserMessage = message.role === "user" && this.conversation.untitled;
    this.renderMessage(message, clientId);
    if (firstUserMessage) this.conversation.refresh();
  }

  renderMessage(message, clientId) {
    if (message.superseded) {
      // Replaced by a regenerated answer or an edited question: it leaves the live branch for its earlier version.
      (message.role === "tool" ? this.cards.find(message.tool_call_id) : this.findMessage(message.id))?.remove();
      for (const call of message.tool_calls || []) this.cards.find(call.id)?.remove();
      if (message.tool_call_id) this.confirmations.remove(message.tool_call_id);
      this.versions.add(message, (view) => this.draw(message, view));
      return;
    }
    this.draw(message, this.live);
    this.composer.echoed(clientId);
  }

  /** A message's row (or its call's card) in `view`: the live branch, or an earlier version, read-only. */
  draw(message, view) {
    if (message.role === "user") {
      if (findBy(view.list, ":scope > ", "message-id", message.id)) return;
      const item = clone("user-message");
      item.dataset.messageId = message.id;
      item.dataset.status = message.status;
      item.querySelector(".msg-text").textContent = message.content;
      if (view.readonly) item.querySelector('[data-action="edit"]').remove();
      const chips = this.fileChips(message);
      if (chips) item.querySelector(".bubble").append(chips);
      appendEntry(view.list, item);
    } else if (message.role === "assistant") {
      this.renderAssistant(message, view);
    } else if (message.role === "tool") {
      const card = view.cards.card(message.tool_call_id, message.tool_name);
      card.dataset.resultId = message.id;
      view.cards.setOutput(card, pretty(message.content));
      view.cards.setState(card, outcomeState(message.outcome));
      if (message.decision) view.cards.setDecision(card, message.decision);
      this.confirmations.remove(message.tool_call_id);
    }
  }

  fileChips(message) {
    const files = message.files && message.files.length
      ? message.files
      : (message.attachments || []).map((id) => ({ id, ...(this.uploads.nameOf(id) || { name: gettext("attached file"), kind: "" }) }));
    if (!files.length) return null;
    const list = clone("attached-files");
    for (const file of files) {
      const chip = clone("file-chip");
      if (file.id !== undefined && file.id !== null) chip.dataset.attachmentId = file.id;
      if (file.kind) chip.querySelector(".chip-kind").textContent = String(file.kind).toUpperCase();
      else chip.querySelector(".chip-kind").remove();
      chip.querySelector(".chip-name").textContent = file.name;
      list.append(chip);
    }
    return list;
  }

  renderAssistant(message, view) {
    let item = findBy(view.list, ":scope > ", "message-id", message.id);
    const shown = shownAnswer(message);
    if (!shown) {
      item?.remove();
    } else {
      if (!item) {
        item = this.assistantItem(message.id);
        appendEntry(view.list, item);
      }
      item.dataset.status = shown.status;
      item.classList.remove("thinking");
      const body = item.querySelector(".msg-body");
      if (shown.status === "streaming") {
        body.className = "msg-body markdown streaming";
        streamText(body, shown.text);
      } else {
        item.removeAttribute("aria-busy");
        body.className = "msg-body markdown";
        const ending = answerEnding(message);
        setSanitizedHTML(body, ending === "limit" ? "" : message.html || "");
        decorateMarkdown(body);
        item.querySelector(".msg-status")?.remove();
        if (ending) {
          const status = clone(`status-${ending}`);
          const error = status.querySelector(".msg-error");
          if (error) error.textContent = message.error || "";
          item.querySelector(".msg-actions").before(status);
        }
      }
    }
    for (const call of message.tool_calls || []) view.cards.card(call.id, call.name, call.args);
  }

  assistantItem(id) {
    const item = clone("assistant-message");
    item.dataset.messageId = id;
    return item;
  }

  streamingBubble(id) {
    let item = this.findMessage(id);
    if (!item) {
      item = this.assistantItem(id);
      item.classList.add("thinking");
      appendEntry(this.list, item);
    }
    return { item, body: item.querySelector(".msg-body") };
  }

  onToken(frame) {
    const { item, body } = this.streamingBubble(frame.message_id);
    const before = answerOf(item);
    const after = answerAfter(before, frame);
    if (after === before) return; // the answer is final: late tokens change nothing
    item.classList.remove("thinking");
    streamText(body, after.text);
  }

  /** The model was asked again: the text it had streamed for this answer is dropped. */
  restartAnswer(frame) {
    const item = this.findMessage(frame.message_id);
    if (!item) return;
    const before = answerOf(item);
    const after = answerAfter(before, frame);
    if (after.text !== before.text) streamText(item.querySelector(".msg-body"), after.text);
  }

  /** After a run: answers that never got a word go; any still marked streaming is final as it stands. */
  finishStreaming() {
    for (const item of this.list.querySelectorAll(':scope > .msg-assistant[data-status="streaming"]')) {
      if (!finishedAnswer(answerOf(item))) item.remove();
    }
  }

  nearEnd() {
    return this.list.scrollHeight - this.list.scrollTop - this.list.clientHeight < 160;
  }

  scrollToEnd(force = false) {
    if (force || this.nearEnd()) this.list.scrollTop = this.list.scrollHeight;
  }
}
