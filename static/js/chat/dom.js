// The page's elements come from <template id="tpl-…"> elements that the server rendered from the same Django
// partials as the history, so markup and translated labels have one source. Whatever the model, a tool or a
// person wrote goes in with textContent only; setSanitizedHTML is the one exception.

import { moment } from "./format.js";

/** A fresh copy of the element in <template id="tpl-NAME">. */
export function clone(name) {
  return document.getElementById(`tpl-${name}`).content.firstElementChild.cloneNode(true);
}

/** Only for `message.html`: Markdown that the server rendered and sanitized with nh3 (conversations/markdown.py). */
export function setSanitizedHTML(node, html) {
  node.innerHTML = html;
}

/** The first element under `root` matching `selector` whose data-NAME is `value`. */
export function findBy(root, selector, name, value) {
  return root.querySelector(`${selector}[data-${name}="${CSS.escape(String(value))}"]`);
}

/** A new row at the end of the conversation, which is then no longer empty. */
export function appendEntry(list, node) {
  document.getElementById("empty-chat")?.remove();
  list.append(node);
}

/** Every <time> under `root` in the reader's own time zone and words, the whole date and time on hover. */
export function localizeTimes(root = document) {
  const lang = document.documentElement.lang || undefined;
  const now = new Date();
  try {
    const whole = new Intl.DateTimeFormat(lang, { dateStyle: "full", timeStyle: "short" });
    for (const node of root.querySelectorAll("time[datetime]")) {
      const when = new Date(node.getAttribute("datetime"));
      if (!Number.isNaN(when.getTime())) {
        node.textContent = moment(when, now, lang);
        node.title = whole.format(when);
      }
    }
  } catch {
    // A language the browser cannot format in: the server's own words stay.
  }
}
