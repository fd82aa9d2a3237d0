// What a regenerate or an edit replaced stays on the page, read-only: just before what replaced it, a row
// "Previous versions (n)" opens to show each earlier version. A superseded message says where it belongs in its
// metadata "replaced": `after`, the message its branch followed (null at the start), and `branch`, the branch's
// first message. Drawn in the history's order, this arranges them as conversations.views does on the server.

import { clone, findBy } from "./dom.js";
import { fill, gettext, ngettext } from "./i18n.js";
import { ToolCards } from "./tool-cards.js";

/** Where a superseded message goes: {after, branch} as the keys the page uses, or null when it says nothing. */
export function placeOf(message) {
  const replaced = message.superseded ? message.metadata?.replaced : null;
  if (!replaced || replaced.branch === undefined || replaced.branch === null) return null;
  return { after: String(replaced.after ?? ""), branch: String(replaced.branch) };
}

/** The words of a group of `count` earlier versions, and of each one's label, the live one being the last. */
export function versionWords(count) {
  return {
    summary: fill(ngettext("Previous version (%(counter)s)", "Previous versions (%(counter)s)", count), { counter: count }),
    labels: Array.from({ length: count }, (_, index) =>
      fill(gettext("Version %(number)s of %(total)s"), { number: index + 1, total: count + 1 }),
    ),
  };
}

export class Versions {
  constructor(list) {
    this.list = list;
    this.placed = new Map(); // a message drawn into a version → that version's list
  }

  /**
   * Draws a superseded message into its version with `draw(view)`, where view is {list, cards, readonly}; one
   * that does not say where it belongs is not shown. The versions that replaced what followed it move with it.
   */
  add(message, draw) {
    const place = placeOf(message);
    if (!place) return;
    const list = this.version(this.group(place.after), place.branch).querySelector(".version-messages");
    draw({ list, cards: new ToolCards(list), readonly: true });
    this.placed.set(String(message.id), list);
    const later = findBy(this.list, ".versions", "after", message.id);
    if (later && later.parentElement !== list) list.append(later);
  }

  group(after) {
    let group = findBy(this.list, ".versions", "after", after);
    if (!group) {
      group = clone("versions");
      group.dataset.after = after;
      // At the end of the list `after` is in: drawn in the history's order, nothing follows it there yet; live,
      // what follows it is the branch leaving for this group.
      (this.placed.get(after) ?? this.list).append(group);
    }
    return group;
  }

  version(group, branch) {
    let version = findBy(group, ".version", "branch", branch);
    if (version) return version;
    version = clone("version");
    version.dataset.branch = branch;
    const label = version.querySelector(".version-label");
    label.id = `version-${branch}`;
    version.querySelector(".version-messages").setAttribute("aria-labelledby", label.id);
    const versions = group.querySelector(".version-list");
    versions.append(version);
    const words = versionWords(versions.children.length);
    group.querySelector("summary").textContent = words.summary;
    Array.from(versions.children).forEach((item, index) => {
      item.querySelector(".version-label").textContent = words.labels[index];
    });
    return version;
  }
}
