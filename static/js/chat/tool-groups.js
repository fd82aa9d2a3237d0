// An agent that calls one tool again and again (eight lookups in a row) would bury the conversation in identical
// cards. Consecutive calls of one tool fold into one row, "lookup × 8" with how they went, which opens to show
// them. The cards stay where they are, as the list's items; only their row is added, and they are hidden.

import { clone } from "./dom.js";
import { fill, ngettext } from "./i18n.js";

const SMALLEST_GROUP = 3;
// The state a group shows: the first of these that one of its calls is in.
const STATE_ORDER = ["running", "background", "error", "unknown", "rejected", "cancelled", "ok"];

/** The runs of at least three equal names in a row, as [start, end) index pairs; null breaks a run. */
export function toolRuns(names) {
  const runs = [];
  let start = 0;
  for (let index = 1; index <= names.length; index += 1) {
    if (index < names.length && names[index] !== null && names[index] === names[start]) continue;
    if (names[start] !== null && index - start >= SMALLEST_GROUP) runs.push([start, index]);
    start = index;
  }
  return runs;
}

/** What a group of calls in these states shows. */
export function groupState(states) {
  return STATE_ORDER.find((state) => states.includes(state)) ?? "ok";
}

export class ToolGroups {
  /** `label(state)`: a card state's translated words. */
  constructor(list, label) {
    this.list = list;
    this.label = label;
    this.opened = new Set(); // the first call id of each group the person opened
    this.frame = 0;
    list.addEventListener("click", (event) => {
      const toggle = event.target.closest(".tool-group-toggle");
      if (!toggle) return;
      const key = toggle.closest(".tool-group").dataset.key;
      if (!this.opened.delete(key)) this.opened.add(key);
      this.draw();
    });
  }

  /** Groups again once the conversation has changed, at the next animation frame. */
  refresh() {
    if (!this.frame) {
      this.frame = requestAnimationFrame(() => {
        this.frame = 0;
        this.draw();
      });
    }
  }

  draw() {
    const entries = Array.from(this.list.children).filter((node) => !node.classList.contains("tool-group"));
    // A call that waits for a decision is never folded away.
    const names = entries.map((node) =>
      node.matches(".tool-card:not([data-state='waiting'])") && !node.querySelector(".confirm-card")
        ? node.querySelector(".tool-name").textContent
        : null,
    );
    const heads = new Map(Array.from(this.list.querySelectorAll(":scope > .tool-group"), (head) => [head.dataset.key, head]));
    const grouped = new Set();
    for (const [start, end] of toolRuns(names)) {
      const cards = entries.slice(start, end);
      const key = cards[0].dataset.toolCallId;
      const head = heads.get(key) || clone("tool-group");
      heads.delete(key);
      const open = this.opened.has(key);
      this.drawHead(head, key, names[start], cards, open);
      if (head.nextElementSibling !== cards[0]) cards[0].before(head);
      for (const card of cards) {
        card.hidden = !open;
        card.dataset.grouped = "";
        grouped.add(card);
      }
    }
    for (const head of heads.values()) head.remove();
    for (const card of this.list.querySelectorAll(":scope > .tool-card[data-grouped]")) {
      if (grouped.has(card)) continue;
      card.hidden = false;
      delete card.dataset.grouped;
    }
  }

  drawHead(head, key, name, cards, open) {
    const state = groupState(cards.map((card) => card.dataset.state));
    head.dataset.key = key;
    head.dataset.state = state;
    head.querySelector(".tool-group-toggle").setAttribute("aria-expanded", String(open));
    head.querySelector(".tool-name").textContent = name;
    head.querySelector(".tool-count").textContent = `× ${cards.length}`;
    head.querySelector(".tool-calls").textContent = fill(ngettext("%(count)s call", "%(count)s calls", cards.length), { count: cards.length });
    head.querySelector(".tool-state").textContent = this.label(state);
  }
}
