// The start page's message box: Enter sends, Shift+Enter starts a new line, as in the chat; sent once, since each
// send makes a conversation. Files attached before it go to a draft conversation, made with the first of them; the
// form names the draft and the files ready to go, and the draft begins with the message (docs/pages.md).

import { gettext } from "./i18n.js";
import { Notices } from "./notices.js";
import { Uploads } from "./uploads.js";

export function startBox(form) {
  const box = form.querySelector("textarea");
  const send = form.querySelector("button[type=submit]");
  const csrf = form.elements.csrfmiddlewaretoken.value;
  const notices = new Notices(document.getElementById("notices"));
  let sent = false;
  let uploadUrl = null; // the promise of the draft's upload address, once the first file asks for it

  const hidden = (name, value) => {
    const input = document.createElement("input");
    input.type = "hidden";
    input.name = name;
    input.value = value;
    form.append(input);
  };
  const makeDraft = async () => {
    const response = await fetch(form.dataset.draftUrl, {
      method: "POST",
      headers: { "X-CSRFToken": csrf, Accept: "application/json" },
    });
    if (response.status !== 201) throw new Error(`No draft was made (${response.status}).`);
    const draft = await response.json();
    hidden("draft", draft.id);
    return draft.upload_url;
  };
  const uploads = new Uploads(form.closest(".start-page"), {
    url: () =>
      (uploadUrl ??= makeDraft().catch((error) => {
        uploadUrl = null; // the next file tries again
        throw error;
      })),
    csrf,
    rules: JSON.parse(document.getElementById("upload-rules").textContent),
    archived: false,
    notices,
    input: box,
    changed: () => {
      send.disabled = sent || uploads.busy;
      if (!uploads.busy) notices.dismiss("uploads", "info");
    },
  });

  form.addEventListener("submit", (event) => {
    if (sent || !box.value.trim()) {
      event.preventDefault();
      box.focus();
      return;
    }
    if (uploads.busy) {
      event.preventDefault();
      notices.show(gettext("Wait until the files have finished uploading."), "info", "uploads");
      return;
    }
    for (const upload of uploads.ready()) hidden("attachments", upload.id);
    sent = true;
    send.disabled = true;
  });
  box.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.ctrlKey && !event.altKey && !event.metaKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
}
