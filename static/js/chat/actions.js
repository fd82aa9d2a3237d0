// What a person can do with the messages: copy any of them, edit and resend their own, and, when the agent is
// idle, regenerate the latest answer or continue one that stopped. The server decides; a refusal shows as a notice.

import { clone } from "./dom.js";
import { newClientId } from "./format.js";
import { gettext } from "./i18n.js";

const COPIED_FOR_MS = 1500;

/** Whether the run that wrote the conversation's last entry can be picked up again with `continue`. */
export function canContinue(last) {
  if (!last) return false;
  if (last.kind === "assistant") return last.status === "interrupted" || last.status === "failed";
  return last.kind === "tool" || last.kind === "user";
}

/** Puts `text` on the clipboard; `button` says "Copied" for a moment, or `notices` why it could not. */
export async function copyText(text, button, notices) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    notices.show(gettext("The browser did not allow copying. Select the text and copy it instead."), "error");
    return;
  }
  const label = button.textContent;
  button.textContent = gettext("Copied");
  setTimeout(() => {
    button.textContent = label;
  }, COPIED_FOR_MS);
}

export class MessageActions {
  constructor(list, { socket, composer, notices, archived }) {
    this.list = list;
    this.socket = socket;
    this.composer = composer;
    this.notices = notices;
    this.archived = archived;
    this.bar = document.getElementById("turn-actions");
    this.list.addEventListener("click", (event) => this.onListClick(event));
    this.list.addEventListener("submit", (event) => this.onEditSubmit(event));
    this.list.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && event.target.closest(".edit-form")) this.closeEdit(event.target.closest(".msg"));
    });
    this.bar.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-action]");
      if (button) this.answerAgain(button.dataset.action);
    });
  }

  /** Which actions fit now: none while the agent works, the socket is down or the conversation is archived. */
  refresh() {
    const idle = !this.archived && this.socket.connected && !this.composer.running;
    for (const button of this.list.querySelectorAll('.msg-user [data-action="edit"]')) button.hidden = !idle;
    // The live branch's rows: earlier versions, in their own lists, are read-only.
    const entries = this.list.querySelectorAll(":scope > .msg, :scope > .tool-card");
    const lastNode = entries[entries.length - 1];
    const last = lastNode && { kind: this.kindOf(lastNode), status: lastNode.dataset.status };
    const asked = Boolean(this.list.querySelector(".msg-user"));
    const deciding = Boolean(this.list.querySelector(".confirm-card"));
    this.bar.hidden = !(idle && asked);
    this.bar.querySelector('[data-action="continue"]').hidden = deciding || !canContinue(last);
    // A failed answer offers Retry while it is the last thing in the conversation and a run can go on from it.
    for (const retry of this.list.querySelectorAll('[data-action="retry"]')) {
      retry.hidden = !(idle && !deciding && canContinue(last) && retry.closest(".msg") === lastNode);
    }
  }

  kindOf(node) {
    if (node.classList.contains("tool-card")) return "tool";
    return node.classList.contains("msg-user") ? "user" : "assistant";
  }

  answerAgain(type) {
    if (this.socket.send({ type, client_id: newClientId() })) {
      this.notices.clear();
      this.bar.hidden = true;
      this.composer.input.focus();
    } else {
      this.notices.show(gettext("Not connected. Try again when the connection is back."), "error");
    }
  }

  onListClick(event) {
    const button = event.target.closest("button[data-action]");
    const item = button?.closest(".msg");
    if (!item) return;
    if (button.dataset.action === "copy") this.copy(item, button);
    else if (button.dataset.action === "edit") this.openEdit(item);
    else if (button.dataset.action === "cancel-edit") this.closeEdit(item);
    else if (button.dataset.action === "retry") this.answerAgain("continue");
  }

  copy(item, button) {
    // The message's text, without the language and Copy button drawn over its code blocks.
    item.classList.add("copying");
    const text = (item.querySelector(".msg-text") || item.querySelector(".msg-body")).innerText;
    item.classList.remove("copying");
    copyText(text, button, this.notices);
  }

  openEdit(item) {
    if (item.querySelector(".edit-form")) return;
    const text = item.querySelector(".msg-text");
    const form = clone("edit-form");
    const box = form.querySelector("textarea");
    box.value = text.textContent;
    text.hidden = true;
    item.querySelector(".msg-actions").hidden = true;
    text.after(form);
    box.focus();
    box.setSelectionRange(box.value.length, box.value.length);
  }

  closeEdit(item) {
    item.querySelector(".edit-form")?.remove();
    item.querySelector(".msg-text").hidden = false;
    item.querySelector(".msg-actions").hidden = false;
    item.querySelector('[data-action="edit"]')?.focus();
  }

  onEditSubmit(event) {
    const form = event.target.closest(".edit-form");
    if (!form) return;
    event.preventDefault();
    const item = form.closest(".msg");
    const content = form.querySelector("textarea").value;
    if (!content.trim()) return;
    const frame = { type: "edit", message_id: Number(item.dataset.messageId), content, client_id: newClientId() };
    if (this.socket.send(frame)) {
      // The form stays until the server answers: replaced, the message leaves the page; refused, it says why.
      this.notices.clear();
      form.querySelector('button[type="submit"]').disabled = true;
      this.composer.input.focus();
    } else {
      this.notices.show(gettext("Not connected. Try again when the connection is back."), "error");
    }
  }

  /** A refused edit can be tried again. */
  refused() {
    for (const button of this.list.querySelectorAll('.edit-form button[type="submit"]')) button.disabled = false;
  }
}
