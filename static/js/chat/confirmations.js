// Confirmation cards: a call waits for the owner, who approves it, runs it with edited JSON arguments, or
// rejects it with a reason. One decision at a time is on its way; an error frame may answer it.

import { appendEntry, clone, findBy } from "./dom.js";
import { pretty } from "./format.js";
import { fill, gettext } from "./i18n.js";

export class Confirmations {
  constructor(list, cards, socket) {
    this.list = list;
    this.cards = cards;
    this.socket = socket;
    this.pending = null; // the confirmation id whose decision was sent last, until its answer
  }

  find(confirmationId) {
    return findBy(this.list, ".confirm-card", "confirmation-id", confirmationId);
  }

  /** The open confirmations as `ready` lists them: the others go, these are drawn (each after its call's card). */
  sync(open) {
    const ids = new Set(open.map((item) => item.confirmation_id));
    for (const card of this.list.querySelectorAll(".confirm-card")) {
      if (!ids.has(card.dataset.confirmationId)) card.remove();
    }
    for (const item of open) this.require(item);
  }

  /** A call waiting for the owner: `confirm_required`, or an open confirmation of `ready`. */
  require(item) {
    this.cards.setState(this.cards.card(item.tool_call_id, item.tool, item.input), "waiting");
    this.render(item);
  }

  remove(toolCallId) {
    const card = findBy(this.list, ".confirm-card", "tool-call-id", toolCallId);
    if (card) {
      if (this.pending === card.dataset.confirmationId) this.pending = null;
      card.remove();
    }
  }

  render(item) {
    if (this.find(item.confirmation_id)) return;
    const card = clone("confirm-card");
    const id = `confirm-${item.confirmation_id}`;
    const argsText = pretty(item.input ?? {});
    card.dataset.confirmationId = item.confirmation_id;
    card.dataset.toolCallId = item.tool_call_id;
    card.setAttribute("aria-labelledby", id);
    card.querySelector(".confirm-title").id = id;
    card.querySelector(".tool-name").textContent = item.tool;
    card.querySelector(".confirm-args").textContent = argsText;

    const editForm = card.querySelector(".confirm-edit");
    const editor = editForm.querySelector("textarea");
    const jsonError = editForm.querySelector(".field-error");
    const runEdited = editForm.querySelector("button[type=submit]");
    editor.id = `${id}-args`;
    editor.rows = Math.min(Math.max(argsText.split("\n").length, 3), 16);
    editor.value = argsText;
    jsonError.id = `${id}-json-error`;
    editor.setAttribute("aria-describedby", jsonError.id);
    editForm.querySelector("label").htmlFor = editor.id;

    const rejectForm = card.querySelector(".confirm-reject");
    const reason = rejectForm.querySelector("input");
    reason.id = `${id}-reason`;
    rejectForm.querySelector("label").htmlFor = reason.id;

    const checkJson = () => {
      try {
        const value = JSON.parse(editor.value);
        if (value === null || typeof value !== "object" || Array.isArray(value)) throw new Error(gettext("the arguments must be a JSON object"));
        jsonError.textContent = "";
        editor.removeAttribute("aria-invalid");
        runEdited.disabled = false;
        return value;
      } catch (problem) {
        jsonError.textContent = fill(gettext("Not valid JSON: %(problem)s"), { problem: problem.message });
        editor.setAttribute("aria-invalid", "true");
        runEdited.disabled = true;
        return null;
      }
    };
    editor.addEventListener("input", checkJson);
    card.querySelector(".approve").addEventListener("click", () => this.decide(card, "approve"));
    card.querySelector(".edit").addEventListener("click", () => this.openPanel(card, editForm));
    card.querySelector(".reject").addEventListener("click", () => this.openPanel(card, rejectForm));
    for (const cancel of card.querySelectorAll(".cancel")) cancel.addEventListener("click", () => this.openPanel(card, null));
    editForm.addEventListener("submit", (event) => {
      event.preventDefault();
      const args = checkJson();
      if (args) this.decide(card, "edit", { args });
    });
    rejectForm.addEventListener("submit", (event) => {
      event.preventDefault();
      this.decide(card, "reject", { reason: reason.value.trim() });
    });

    const toolCard = this.cards.find(item.tool_call_id);
    if (toolCard) toolCard.after(card);
    else appendEntry(this.list, card);
  }

  openPanel(card, panel) {
    for (const form of card.querySelectorAll(".confirm-panel")) form.hidden = form !== panel;
    card.querySelector(".edit").setAttribute("aria-expanded", String(panel?.classList.contains("confirm-edit") || false));
    card.querySelector(".reject").setAttribute("aria-expanded", String(panel?.classList.contains("confirm-reject") || false));
    panel?.querySelector("textarea, input")?.focus();
  }

  decide(card, decision, extra = {}) {
    const error = card.querySelector(".confirm-error");
    error.textContent = "";
    const sent = this.socket.send({ type: "confirm", confirmation_id: card.dataset.confirmationId, decision, ...extra });
    if (!sent) {
      error.textContent = gettext("Not connected: your decision was not sent. Try again when the connection is back.");
      return;
    }
    this.pending = card.dataset.confirmationId;
    card.classList.add("deciding");
    for (const button of card.querySelectorAll("button")) button.disabled = true;
  }

  /**
   * An error frame while a decision is on its way answers that decision: it is shown on its card, which can
   * be used again. True when nothing else is to be said (a refusal, which closes the socket, is said too).
   */
  failed(code, text, refused) {
    if (!this.pending) return false;
    const card = this.find(this.pending);
    this.pending = null;
    if (!card) return false;
    card.classList.remove("deciding");
    for (const button of card.querySelectorAll("button")) button.disabled = false;
    card.querySelector(".confirm-error").textContent = text;
    if (code === "CHECKPOINT_EXPIRED") card.classList.add("expired");
    return !refused;
  }
}
