// Light, dark or the system's choice: applied to <html> before the first paint (this file is a plain script in
// <head>, not a module, so it runs before the page is drawn), and switched with the top bar's buttons. The choice
// is kept under the key Django's admin reads too, with its values, so the admin follows it.
(() => {
  const KEY = "theme";
  const CHOICES = ["light", "dark", "auto"];
  const root = document.documentElement;

  const stored = () => {
    try {
      const value = localStorage.getItem(KEY);
      return CHOICES.includes(value) ? value : "auto";
    } catch {
      return "auto";
    }
  };

  const apply = (choice) => {
    root.dataset.theme = choice;
    for (const button of document.querySelectorAll("[data-theme-choice]")) {
      button.setAttribute("aria-pressed", String(button.dataset.themeChoice === choice));
    }
  };

  apply(stored());
  document.addEventListener("DOMContentLoaded", () => {
    const group = document.getElementById("theme-switch");
    if (!group) return;
    group.hidden = false;
    apply(stored());
    group.addEventListener("click", (event) => {
      const button = event.target.closest("[data-theme-choice]");
      if (!button) return;
      try {
        localStorage.setItem(KEY, button.dataset.themeChoice);
      } catch {
        // Not remembered (storage refused): it still applies to this page.
      }
      apply(button.dataset.themeChoice);
    });
  });
})();
