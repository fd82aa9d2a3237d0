// Tool cards: one per call, found by its id or drawn from the server's partial, with its state, input and output.

import { appendEntry, clone, findBy } from "./dom.js";
import { pretty } from "./format.js";

export class ToolCards {
  constructor(list) {
    this.list = list;
    this.labels = null; // state → its translated label, from <template id="tpl-tool-states">
  }

  find(id) {
    return findBy(this.list, ".tool-card", "tool-call-id", id);
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
}
