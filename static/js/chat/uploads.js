// Files to send: attached with the button or dropped on the chat or the start page, checked here first, uploaded
// with progress (the server checks them again), shown as chips until the message that carries them is sent.

import { clone } from "./dom.js";
import { fileProblem, formatSize } from "./format.js";
import { fill, gettext } from "./i18n.js";

export class Uploads {
  /**
   * `url`: where files are uploaded, or a function that gives a promise of it (the start page's draft, made with the
   * first file); `changed()` runs whenever an upload starts or ends; `notices` says why a file is refused.
   */
  constructor(root, { url, csrf, rules, archived, notices, input, changed }) {
    this.root = root;
    this.url = typeof url === "function" ? url : async () => url;
    this.csrf = csrf;
    this.rules = rules;
    this.archived = archived;
    this.notices = notices;
    this.input = input;
    this.changed = changed;
    this.chips = document.getElementById("attachments");
    this.attachButton = document.getElementById("attach");
    this.fileInput = document.getElementById("file-input");
    this.dropHint = document.getElementById("drop-hint");
    this.items = []; // {file, state: uploading|done|error, id, kind, xhr, chip}
    this.names = new Map(); // attachment id → {name, kind}, for the chips of a message this page sent
    this.dragDepth = 0;
    this.bind();
  }

  get busy() {
    return this.items.some((upload) => upload.state === "uploading");
  }

  /** The uploaded files, ready to go with a message. */
  ready() {
    return this.items.filter((upload) => upload.state === "done");
  }

  /** These went with a message: their chips leave the composer, their names are kept for the message's chips. */
  sent(uploads) {
    for (const upload of uploads) this.names.set(String(upload.id), { name: upload.file.name, kind: upload.kind || "" });
    this.items = this.items.filter((upload) => upload.state !== "done");
    for (const upload of uploads) upload.chip.remove();
  }

  /** A message that was not taken gives its files back. */
  restore(uploads) {
    for (const upload of uploads) {
      this.items.push(upload);
      this.chips.append(upload.chip);
    }
  }

  nameOf(id) {
    return this.names.get(String(id));
  }

  /** Files uploaded before this page was opened ({id, name, kind, size}: the start page's), ready to go. */
  adopt(files) {
    for (const { id, name, kind, size } of files) this.uploaded(this.item({ name, size }), id, kind);
    if (files.length) this.changed();
  }

  bind() {
    this.attachButton.addEventListener("click", () => this.fileInput.click());
    this.fileInput.addEventListener("change", () => {
      this.add(this.fileInput.files);
      this.fileInput.value = "";
    });
    const draggingFiles = (event) => Array.from(event.dataTransfer?.types || []).includes("Files");
    this.root.addEventListener("dragenter", (event) => {
      if (!draggingFiles(event)) return;
      event.preventDefault();
      this.dragDepth += 1;
      this.root.classList.add("dragging");
      this.dropHint.hidden = false;
    });
    this.root.addEventListener("dragover", (event) => {
      if (!draggingFiles(event)) return;
      event.preventDefault();
      event.dataTransfer.dropEffect = this.archived ? "none" : "copy";
    });
    this.root.addEventListener("dragleave", () => {
      this.dragDepth = Math.max(0, this.dragDepth - 1);
      if (!this.dragDepth) this.endDrag();
    });
    this.root.addEventListener("drop", (event) => {
      if (!draggingFiles(event)) return;
      event.preventDefault();
      this.endDrag();
      if (!this.archived) this.add(event.dataTransfer.files);
    });
  }

  endDrag() {
    this.dragDepth = 0;
    this.root.classList.remove("dragging");
    this.dropHint.hidden = true;
  }

  add(files) {
    for (const file of Array.from(files || [])) {
      const problem = fileProblem(file, this.rules);
      if (problem) {
        this.notices.show(problem, "error");
        continue;
      }
      this.upload(file);
    }
  }

  /** The chip of `file` ({name, size}), uploading, until it is removed. */
  item(file) {
    const chip = clone("upload-chip");
    const upload = { file, state: "uploading", id: null, xhr: new XMLHttpRequest(), chip, kind: "" };
    chip.querySelector(".chip-name").textContent = file.name;
    chip.querySelector(".chip-size").textContent = formatSize(file.size);
    chip.querySelector("progress").setAttribute("aria-label", fill(gettext("Uploading %(name)s"), { name: file.name }));
    const remove = chip.querySelector(".chip-remove");
    remove.setAttribute("aria-label", fill(gettext("Remove %(name)s"), { name: file.name }));
    remove.addEventListener("click", () => {
      if (upload.state === "uploading") upload.xhr.abort();
      this.items = this.items.filter((item) => item !== upload);
      chip.remove();
      this.changed();
      this.input.focus();
    });
    this.items.push(upload);
    this.chips.append(chip);
    return upload;
  }

  /** The server has the file: its chip says it is ready to go. */
  uploaded(upload, id, kind) {
    upload.state = "done";
    upload.id = String(id);
    upload.kind = kind || "";
    upload.chip.classList.remove("uploading");
    upload.chip.classList.add("done");
    upload.chip.dataset.attachmentId = upload.id;
    upload.chip.querySelector("progress").remove();
    upload.chip.querySelector(".chip-status").textContent = gettext("ready");
  }

  upload(file) {
    const upload = this.item(file);
    this.changed();
    const { chip, xhr } = upload;
    const progress = chip.querySelector("progress");
    const status = chip.querySelector(".chip-status");
    const fail = (text) => {
      upload.state = "error";
      chip.classList.remove("uploading");
      chip.classList.add("failed");
      progress.remove();
      status.textContent = text;
      status.setAttribute("role", "alert");
      this.changed();
    };
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) progress.value = Math.round((event.loaded / event.total) * 100);
    });
    xhr.addEventListener("load", () => {
      let body = {};
      try {
        body = JSON.parse(xhr.responseText || "{}");
      } catch {
        body = {};
      }
      if (xhr.status === 201 && body.id) {
        this.uploaded(upload, body.id, body.kind);
        this.changed();
      } else if (xhr.status === 413) {
        fail(fill(gettext("too large: files may be at most %(limit)s MB"), { limit: Math.round(this.rules.maxBytes / (1024 * 1024)) }));
      } else if (xhr.status === 415) {
        fail(gettext("not a supported kind of file"));
      } else if (xhr.status === 422) {
        fail(fill(gettext("could not be read: %(detail)s"), { detail: body.error || "" }));
      } else if (xhr.status === 401 || xhr.status === 403) {
        fail(gettext("not uploaded: you are signed out"));
      } else {
        fail(gettext("could not be uploaded"));
      }
    });
    xhr.addEventListener("error", () => fail(gettext("could not be uploaded: the connection failed")));
    this.url().then(
      (url) => {
        if (!this.items.includes(upload)) return; // removed while the start page's draft was being made
        xhr.open("POST", url);
        xhr.setRequestHeader("X-CSRFToken", this.csrf);
        xhr.setRequestHeader("Accept", "application/json");
        const form = new FormData();
        form.append("file", file, file.name);
        xhr.send(form);
      },
      () => fail(gettext("could not be uploaded")),
    );
  }
}
