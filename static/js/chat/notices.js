// The notice bar above the conversation, and the plain words for the server's error and notice codes.

import { clone } from "./dom.js";
import { fill, gettext } from "./i18n.js";

const ERRORS = {
  BUSY: () => gettext("This conversation is busy: the agent is still answering. Wait for it to finish, or press Stop."),
  RATE_LIMITED: () => gettext("You are sending messages too fast. Wait a moment and try again."),
  TOO_LARGE: () => gettext("That is too large to send."),
  CHECKPOINT_EXPIRED: () =>
    gettext("This approval request is no longer open: it was already decided, replaced by a newer message, or it expired."),
  PROVIDER_ERROR: () => gettext("The language model could not answer. Try again in a moment."),
  AUTH_REQUIRED: () => gettext("You are signed out. Sign in again to continue."),
  FORBIDDEN: () => gettext("You are not allowed to do that."),
  NOT_FOUND: () => gettext("That no longer exists in this conversation."),
};

const NOTICES = {
  CONTEXT_TRIMMED: () => gettext("Older messages were left out so that the conversation fits what the model can read."),
  MESSAGE_TRUNCATED: () => gettext("Your message was too long and was shortened."),
  PROVIDER_RETRY: () => gettext("The model's answer could not be used, so it was asked again."),
  JOB_WAITING: () => gettext("A slow tool is waiting for the background worker. Is the worker running?"),
  JOB_RETRIED: () => gettext("The background worker stopped while running a tool, so it runs again."),
};

const DEMO_NOTE_DISMISSED = "agentchat.demoNoteDismissed";

/** What an `error` frame says to a person; `demo`: the server answers with its built-in demo model. */
export function errorText(code, message, refused, demo = false) {
  if (refused) return message; // the server's own words say why it closes the socket
  if (code === "PROVIDER_ERROR" && demo) {
    return gettext(
      "The demo model could not answer: it runs on this server's processor, which may be busy. Try again in a moment.",
    );
  }
  if (code === "INVALID") return fill(gettext("That was not accepted: %(detail)s"), { detail: message });
  // Several limits give this code (frames, messages a minute, the daily budget): the server's words say which, and when.
  if (code === "RATE_LIMITED" && message) return message;
  return (ERRORS[code] || (() => gettext("Something went wrong.")))();
}

export function noticeText(code) {
  return NOTICES[code] ? NOTICES[code]() : gettext("Note from the server.");
}

/** The note that the demo model answers: shown until it is dismissed, in this browser, once. */
export function demoNote(node) {
  if (!node) return;
  if (localStorage.getItem(DEMO_NOTE_DISMISSED)) node.hidden = true;
  node.querySelector(".dismiss").addEventListener("click", () => {
    node.hidden = true;
    localStorage.setItem(DEMO_NOTE_DISMISSED, "1");
    document.getElementById("message")?.focus();
  });
}

/** How an answer that did not end well says so under it: "limit", "interrupted", "failed", or "" for none. The
 * answer the agent stores when it used all of its steps is marked: the page says so in the reader's language, on
 * the answer's status line, instead of showing the agent's words. */
export function answerEnding(message) {
  if (message.status === "interrupted" && message.metadata?.stop === "step_limit") return "limit";
  return message.status === "interrupted" || message.status === "failed" ? message.status : "";
}

export class Notices {
  constructor(node) {
    this.node = node;
  }

  /**
   * Shows `text` (kind: info or error) at the end, in place of an older notice about the same `topic` (an error or
   * notice code, or by default the same words); at most four at a time.
   */
  show(text, kind, topic = text) {
    this.dismiss(topic);
    const item = clone("notice");
    item.className = `notice notice-${kind}`;
    item.setAttribute("role", kind === "error" ? "alert" : "status");
    item.dataset.topic = topic;
    item.dataset.kind = kind;
    item.querySelector("span").textContent = text;
    item.querySelector(".dismiss").addEventListener("click", () => item.remove());
    this.node.append(item);
    while (this.node.children.length > 4) this.node.firstElementChild.remove();
  }

  /** Takes away the notice about `topic` (only when it is of `kind`, if given). */
  dismiss(topic, kind) {
    for (const item of this.node.children) {
      if (item.dataset.topic === topic && (!kind || item.dataset.kind === kind)) item.remove();
    }
  }

  /** The notices of one part of the page, all about one topic: each replaces the one before. */
  about(topic) {
    return { show: (text, kind) => this.show(text, kind, topic), clear: () => this.clear() };
  }

  clear() {
    this.node.replaceChildren();
  }
}
