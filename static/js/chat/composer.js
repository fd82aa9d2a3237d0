// The message box: sending (with a client_id and the uploaded files), the send that waits for its echo and is
// given back when refused, Stop while a run goes, and which controls can be used right now.

import { newClientId } from "./format.js";
import { gettext } from "./i18n.js";

// The server reads no larger frame: a longer message stays in the box, with the reason, instead of being sent.
export const MAX_FRAME_BYTES = 1024 * 1024;

export const tooLargeText = () =>
  gettext("Your message is too long to send (at most 1 MB with its files). It is still in the box below.");

export class Composer {
  constructor({ archived, socket, notices, uploads }) {
    this.archived = archived;
    this.socket = socket;
    this.notices = notices;
    this.uploads = uploads;
    this.form = document.getElementById("composer");
    this.input = document.getElementById("message");
    this.sendButton = document.getElementById("send");
    this.stopButton = document.getElementById("stop");
    this.attachButton = document.getElementById("attach");
    this.runStatus = document.getElementById("run-status");
    this.running = false;
    this.onUpdate = null; // told whenever what can be used changes
    this.pendingSend = null; // {clientId, content, uploads} until the message comes back or is refused
    this.bind();
  }

  bind() {
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.ctrlKey && !event.altKey && !event.metaKey && !event.isComposing) {
        event.preventDefault();
        this.send();
      }
    });
    this.input.addEventListener("input", () => this.autosize());
    this.stopButton.addEventListener("click", () => this.stop());
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.running && !event.target.closest?.(".edit-form, dialog, details")) this.stop();
    });
  }

  autosize() {
    this.input.style.height = "auto";
    this.input.style.height = `${Math.min(this.input.scrollHeight, 240)}px`;
  }

  update() {
    const uploading = this.uploads.busy;
    this.sendButton.disabled = this.archived || !this.socket.connected || uploading;
    this.input.disabled = this.archived || this.socket.refused;
    this.attachButton.disabled = this.archived || this.socket.refused;
    // While the agent works, Stop takes Send's place.
    this.sendButton.hidden = this.running;
    this.stopButton.hidden = !this.running;
    this.runStatus.hidden = !this.running;
    this.form.classList.toggle("running", this.running);
    this.onUpdate?.();
  }

  setRunning(running) {
    // Send and Stop swap places: the focus on the one that goes moves to the message box, not to the page.
    const swapped = document.activeElement === (running ? this.sendButton : this.stopButton);
    this.running = running;
    if (!running) this.stopButton.disabled = false;
    this.update();
    if (swapped && !this.input.disabled) this.input.focus();
  }

  send() {
    if (this.archived) return;
    const content = this.input.value;
    if (!content.trim()) {
      this.input.focus();
      return;
    }
    if (this.uploads.busy) {
      this.notices.show(gettext("Wait until the files have finished uploading."), "info");
      return;
    }
    const ready = this.uploads.ready();
    const clientId = newClientId();
    const frame = { type: "message", content, client_id: clientId, attachments: ready.map((upload) => upload.id) };
    if (new TextEncoder().encode(JSON.stringify(frame)).length > MAX_FRAME_BYTES) {
      this.notices.show(tooLargeText(), "error");
      return;
    }
    if (!this.socket.send(frame)) {
      this.notices.show(gettext("Not connected: your message was not sent. It is still in the box below."), "error");
      return;
    }
    this.notices.clear();
    this.pendingSend = { clientId, content, uploads: ready };
    this.uploads.sent(ready);
    this.input.value = "";
    this.autosize();
    this.update();
    this.input.focus();
  }

  /** A message frame came back: when it carries our client_id, the send went through. */
  echoed(clientId) {
    if (clientId && this.pendingSend && clientId === this.pendingSend.clientId) this.pendingSend = null;
  }

  /** The message was not taken: it goes back in the box, with its files, unless something new was typed. */
  giveBack() {
    if (!this.pendingSend) return;
    const { content, uploads } = this.pendingSend;
    this.pendingSend = null;
    if (!this.input.value) {
      this.input.value = content;
      this.autosize();
    }
    this.uploads.restore(uploads);
    this.update();
  }

  stop() {
    if (this.socket.send({ type: "cancel" })) this.stopButton.disabled = true;
  }

}
