// Tool cards: one per call, found by its id or drawn from the server's partial, with its state, input and output,
// and for a call that went to its owner, the record of what they decided.

import { appendEntry, clone, findBy, localizeTimes } from "./dom.js";
import { pretty } from "./format.js";
import { gettext } from "./i18n.js";

export class ToolCards {
  constructor(list) {
    this.list = list;
    this.labels = null; // state → its translated label, from <template id="tpl-tool-states">
  }

  /** The call's card among the list's own rows (an earlier version's cards are in its own list). */
  find(id) {
    return findBy(this.list, ":scope > .tool-card", "tool-call-id", id);
  }

  /** The call's card, drawn at the end of the conversation when it is not there yet. */
  card(id, name, args) {
    let card = this.find(id);
    if (card) {
      if (args !== undefined && !card.querySelector(".tool-input pre").textContent) this.setInput(card, args);
      return card;
    }
    card = clone("tool-card");
    if (id !== undefined && id !== null) card.dataset.toolCallId = id;
    card.querySelector(".tool-name").textContent = name || "";
    this.setState(card, "running");
    if (args !== undefined) this.setInput(card, args);
    appendEntry(this.list, card);
    return card;
  }

  setInput(card, args) {
    card.querySelector(".tool-input pre").textContent = pretty(args ?? {});
  }

  setOutput(card, text) {
    const output = card.querySelector(".tool-output");
    output.querySelector("pre").textContent = text ?? "";
    output.hidden = false;
  }

  setState(card, state) {
    card.dataset.state = state;
    card.querySelector(".tool-state").textContent = this.label(state);
  }

  label(state) {
    if (!this.labels) {
      const template = document.getElementById("tpl-tool-states").content;
      this.labels = new Map(Array.from(template.querySelectorAll("[data-state]"), (node) => [node.dataset.state, node.textContent.trim()]));
    }
    return this.labels.get(state) ?? this.labels.get("running");
  }

  /**
   * The record of the owner's decision (`decision` as the history API gives it), from the empty records of
   * <template id="tpl-decisions">. A record already on the card is filled anew, not replaced, so the focus it
   * holds stays.
   */
  setDecision(card, decision) {
    const variant = decision.status === "rejected" && decision.reason ? "rejected-reason" : decision.status;
    const empty = document.getElementById("tpl-decisions").content.querySelector(`[data-decision="${CSS.escape(variant)}"]`);
    if (!empty) return null;
    const record = empty.cloneNode(true);
    const who = record.querySelector(".decision-who");
    if (who) who.textContent = decision.decided_by || gettext("someone");
    const when = record.querySelector(".decision-when");
    if (when && decision.decided_at) {
      when.setAttribute("datetime", decision.decided_at);
      when.textContent = decision.decided_at;
      localizeTimes(record);
    }
    const reason = record.querySelector(".decision-reason");
    if (reason) reason.textContent = decision.reason;
    const args = record.querySelector(".decision-args");
    if (args) args.textContent = pretty(decision.args ?? {});
    const shown = card.querySelector(".tool-decision");
    if (!shown) {
      card.querySelector(".tool-head").after(record);
      return record;
    }
    shown.dataset.decision = variant;
    shown.replaceChildren(...record.childNodes);
    return shown;
  }
}
