// On a narrow screen the conversation list is a drawer: the header's button opens it over the chat with the focus
// in it, and its close button, Escape or a tap beside it closes it, the focus going back to that button.

const NARROW = "(max-width: 760px)";

export class Drawer {
  constructor({ panel, toggle, close, chat }) {
    this.panel = panel;
    this.toggle = toggle;
    this.chat = chat;
    this.layout = panel.parentElement;
    toggle.addEventListener("click", () => this.open());
    close.addEventListener("click", () => this.close());
    panel.addEventListener("keydown", (event) => {
      if (event.key !== "Escape") return;
      event.stopPropagation(); // Escape here closes the list, it does not stop the agent
      this.close();
    });
    document.addEventListener("click", (event) => {
      if (this.isOpen && !panel.contains(event.target) && !toggle.contains(event.target)) this.close();
    });
    matchMedia(NARROW).addEventListener("change", (event) => {
      if (!event.matches) this.close({ focus: false });
    });
  }

  get isOpen() {
    return this.panel.classList.contains("open");
  }

  open() {
    this.panel.classList.add("open");
    this.layout.classList.add("drawer-open");
    this.toggle.setAttribute("aria-expanded", "true");
    this.chat.inert = true; // the chat behind stays out of reach until the list closes
    (this.panel.querySelector('a[aria-current="page"]') || this.panel.querySelector("a, button:not(.drawer-close)"))?.focus();
  }

  close({ focus = true } = {}) {
    if (!this.isOpen) return;
    this.panel.classList.remove("open");
    this.layout.classList.remove("drawer-open");
    this.toggle.setAttribute("aria-expanded", "false");
    this.chat.inert = false;
    if (focus) this.toggle.focus();
  }
}
