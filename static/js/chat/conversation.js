// The conversation as the rest of the page shows it: the title the server gave it, and its sidebar entry.

import { localizeTimes } from "./dom.js";
import { fill, ngettext } from "./i18n.js";

export class Conversation {
  constructor(apiUrl) {
    this.apiUrl = apiUrl;
    this.title = document.getElementById("chat-title");
  }

  get untitled() {
    return Boolean(this.title?.dataset.untitled);
  }

  /** The new title, and the sidebar's count and time, as they are now. */
  async refresh() {
    try {
      const response = await fetch(this.apiUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (!response.ok) return;
      const conversation = await response.json();
      const meta = document.querySelector('.side-list a[aria-current="page"] .meta');
      if (meta) {
        const count = conversation.message_count;
        meta.querySelector(".count").textContent = fill(ngettext("%(count)s question", "%(count)s questions", count), { count });
        meta.querySelector("time")?.setAttribute("datetime", conversation.updated_at);
        localizeTimes(meta);
      }
      if (conversation.title && this.title.dataset.untitled) {
        this.title.textContent = conversation.title;
        delete this.title.dataset.untitled;
        document.title = `${conversation.title} · AgentChat`;
        const current = document.querySelector('.side-list a[aria-current="page"] .title');
        if (current) current.textContent = conversation.title;
        const rename = document.querySelector(".chat-actions .rename-form input[name=title]");
        if (rename) rename.value = conversation.title;
      }
    } catch {
      // The title shows after a reload.
    }
  }
}
