// The start page's message box: Enter sends, Shift+Enter starts a new line, as in the chat; sent once, since each
// send makes a conversation.

export function startBox(form) {
  const box = form.querySelector("textarea");
  let sent = false;
  form.addEventListener("submit", (event) => {
    if (sent || !box.value.trim()) {
      event.preventDefault();
      box.focus();
      return;
    }
    sent = true;
    form.querySelector("button[type=submit]").disabled = true;
  });
  box.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.ctrlKey && !event.altKey && !event.metaKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
}
