// AgentChat's pages: the live chat over the WebSocket protocol of SPEC §5, file uploads, local times.
// One ES module, no framework, no build step. Strings come from Django's JavaScript catalogue (/jsi18n/).
//
// Safety rule: whatever the model, a tool or a person wrote is put in the page with textContent only.
// The single exception is `html` of a stored assistant message, which the server rendered from Markdown
// and sanitized with nh3 (conversations/markdown.py); it goes through setSanitizedHTML() and nowhere else.

const RECONNECT_ATTEMPTS = 5;
const RECONNECT_DELAY_MS = Number(globalThis.agentchatReconnectDelay) || 5000;
const PING_INTERVAL_MS = 25000;
const HISTORY_PAGE_SIZE = 500;

// --- i18n ----------------------------------------------------------------------------------------

const gettext = typeof globalThis.gettext === "function" ? globalThis.gettext : (text) => text;
const ngettext =
  typeof globalThis.ngettext === "function" ? globalThis.ngettext : (singular, plural, count) => (count === 1 ? singular : plural);
const fill = (text, values) => text.replace(/%\((\w+)\)s/g, (match, key) => (key in values ? String(values[key]) : match));

// --- DOM helpers ---------------------------------------------------------------------------------

/** An element with attributes and children; strings become text nodes, never markup. */
function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on") && typeof value === "function") node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Only for `message.html`: Markdown the server rendered and sanitized with nh3. */
function setSanitizedHTML(node, html) {
  node.innerHTML = html;
}

/** A translated sentence with one placeholder replaced by a node (e.g. a tool's name in <code>). */
function sentenceWith(text, key, node) {
  const [before, after = ""] = text.split(`%(${key})s`);
  return [before, node, after];
}

function pretty(value) {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

function formatSize(bytes) {
  if (bytes < 1024) return fill(gettext("%(n)s B"), { n: bytes });
  if (bytes < 1024 * 1024) return fill(gettext("%(n)s KB"), { n: Math.round(bytes / 1024) });
  return fill(gettext("%(n)s MB"), { n: (bytes / (1024 * 1024)).toFixed(1) });
}

function newClientId() {
  if (globalThis.crypto && typeof crypto.randomUUID === "function") return crypto.randomUUID();
  return `c-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 12)}`;
}

function localizeTimes(root = document) {
  const lang = document.documentElement.lang || undefined;
  let format;
  try {
    format = new Intl.DateTimeFormat(lang, { dateStyle: "medium", timeStyle: "short" });
  } catch {
    return;
  }
  for (const node of root.querySelectorAll("time[datetime]")) {
    const when = new Date(node.getAttribute("datetime"));
    if (!Number.isNaN(when.getTime())) {
      node.textContent = format.format(when);
      node.title = when.toString();
    }
  }
}

// --- the chat ------------------------------------------------------------------------------------

const ERRORS = {
  BUSY: () => gettext("This conversation is busy: the agent is still answering. Wait for it to finish, or press Stop."),
  RATE_LIMITED: () => gettext("You are sending messages too fast. Wait a moment and try again."),
  TOO_LARGE: () => gettext("That is too large to send."),
  CHECKPOINT_EXPIRED: () =>
    gettext("This approval request is no longer open: it was already decided, replaced by a newer message, or it expired."),
  PROVIDER_ERROR: () => gettext("The language model could not answer. Try again in a moment."),
  AUTH_REQUIRED: () => gettext("You are signed out. Sign in again to continue."),
  FORBIDDEN: () => gettext("You are not allowed to do that."),
  NOT_FOUND: () => gettext("That no longer exists in this conversation."),
};

const NOTICES = {
  CONTEXT_TRIMMED: () => gettext("Older messages were left out so that the conversation fits what the model can read."),
  MESSAGE_TRUNCATED: () => gettext("Your message was too long and was shortened."),
  PROVIDER_RETRY: () => gettext("The model's answer could not be used, so it was asked again."),
  JOB_WAITING: () => gettext("A slow tool is waiting for the background worker. Is the worker running?"),
  JOB_RETRIED: () => gettext("The background worker stopped while running a tool, so it runs again."),
};

const TOOL_STATES = {
  running: () => gettext("Running…"),
  background: () => gettext("Running in the background…"),
  waiting: () => gettext("Waiting for your approval"),
  ok: () => gettext("Done"),
  error: () => gettext("Failed"),
  rejected: () => gettext("Rejected"),
  cancelled: () => gettext("Cancelled"),
  unknown: () => gettext("Outcome unknown: check before retrying"),
};

// How a call that ended is shown, by its outcome; every outcome not named here is a failure.
const OUTCOME_STATES = { done: "ok", rejected: "rejected", cancelled: "cancelled", unknown: "unknown" };
const outcomeState = (outcome) => OUTCOME_STATES[outcome] || "error";

class Chat {
  constructor(root) {
    this.root = root;
    this.wsPath = root.dataset.wsPath;
    this.apiUrl = root.dataset.apiUrl;
    this.historyUrl = root.dataset.historyUrl;
    this.uploadUrl = root.dataset.uploadUrl;
    this.csrf = root.dataset.csrf;
    this.archived = root.dataset.archived === "1";
    this.rules = JSON.parse(document.getElementById("upload-rules")?.textContent || "{}");

    this.list = document.getElementById("messages");
    this.notices = document.getElementById("notices");
    this.connection = document.getElementById("connection");
    this.connectionText = this.connection.querySelector(".connection-text");
    this.retryButton = this.connection.querySelector(".retry");
    this.form = document.getElementById("composer");
    this.input = document.getElementById("message");
    this.sendButton = document.getElementById("send");
    this.stopButton = document.getElementById("stop");
    this.attachButton = document.getElementById("attach");
    this.fileInput = document.getElementById("file-input");
    this.chips = document.getElementById("attachments");
    this.dropHint = document.getElementById("drop-hint");
    this.title = document.getElementById("chat-title");
    this.runStatus = document.getElementById("run-status");

    this.socket = null;
    this.connected = false;
    this.everReady = false;
    this.refused = false; // closed with 4401 or 4403: another try would be refused too
    this.attempts = 0;
    this.reconnectTimer = null;
    this.pingTimer = null;
    this.syncing = false;
    this.queue = [];
    this.seen = null; // {runId, seq}: the newest run frame applied
    this.running = false;
    this.pendingSend = null; // {clientId, content, uploads}
    this.pendingDecision = null; // confirmation id
    this.uploads = []; // {key, file, state, id, xhr, chip, progress, error}
    this.fileNames = new Map(); // attachment id → {name, kind}
    this.dragDepth = 0;

    this.bind();
    this.updateComposer();
    this.connect();
  }

  // --- wiring ------------------------------------------------------------------------------------

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
    this.retryButton.addEventListener("click", () => {
      this.attempts = 0;
      this.connect();
    });
    this.attachButton.addEventListener("click", () => this.fileInput.click());
    this.fileInput.addEventListener("change", () => {
      this.addFiles(this.fileInput.files);
      this.fileInput.value = "";
    });
    this.root.addEventListener("dragenter", (event) => {
      if (!this.draggingFiles(event)) return;
      event.preventDefault();
      this.dragDepth += 1;
      this.root.classList.add("dragging");
      this.dropHint.hidden = false;
    });
    this.root.addEventListener("dragover", (event) => {
      if (!this.draggingFiles(event)) return;
      event.preventDefault();
      event.dataTransfer.dropEffect = this.archived ? "none" : "copy";
    });
    this.root.addEventListener("dragleave", () => {
      this.dragDepth = Math.max(0, this.dragDepth - 1);
      if (!this.dragDepth) this.endDrag();
    });
    this.root.addEventListener("drop", (event) => {
      if (!this.draggingFiles(event)) return;
      event.preventDefault();
      this.endDrag();
      if (!this.archived) this.addFiles(event.dataTransfer.files);
    });
  }

  draggingFiles(event) {
    return Array.from(event.dataTransfer?.types || []).includes("Files");
  }

  endDrag() {
    this.dragDepth = 0;
    this.root.classList.remove("dragging");
    this.dropHint.hidden = true;
  }

  autosize() {
    this.input.style.height = "auto";
    this.input.style.height = `${Math.min(this.input.scrollHeight, 240)}px`;
  }

  updateComposer() {
    const uploading = this.uploads.some((upload) => upload.state === "uploading");
    this.sendButton.disabled = this.archived || !this.connected || uploading;
    this.input.disabled = this.archived || this.refused;
    this.attachButton.disabled = this.archived || this.refused;
    this.stopButton.hidden = !this.running;
    this.runStatus.hidden = !this.running;
    this.form.classList.toggle("running", this.running);
  }

  // --- the socket ----------------------------------------------------------------------------------

  connect() {
    clearTimeout(this.reconnectTimer);
    if (this.socket) {
      this.socket.onclose = null;
      this.socket.close();
    }
    this.retryButton.hidden = true;
    if (this.everReady) this.showConnection(gettext("Reconnecting…"));
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const socket = new WebSocket(scheme + location.host + this.wsPath);
    this.socket = socket;
    socket.onmessage = (event) => {
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        return;
      }
      this.receive(frame);
    };
    socket.onclose = (event) => {
      if (this.socket === socket) this.closed(event);
    };
  }

  closed(event) {
    this.connected = false;
    this.syncing = false;
    this.queue = [];
    clearInterval(this.pingTimer);
    this.refused = event.code === 4401 || event.code === 4403;
    this.updateComposer();
    if (event.code === 4401) {
      this.showConnection(gettext("You are signed out. Sign in again to continue."), { signIn: true });
      return;
    }
    if (event.code === 4403) {
      this.showConnection(gettext("Disconnected. Reload the page to continue."));
      return;
    }
    if (event.code === 4404) {
      this.showConnection(gettext("This conversation is not available."));
      return;
    }
    if (this.attempts >= RECONNECT_ATTEMPTS) {
      this.showConnection(gettext("Connection lost."), { retry: true });
      return;
    }
    this.attempts += 1;
    this.showConnection(
      fill(gettext("Connection interrupted. Reconnecting (attempt %(attempt)s of %(total)s)…"), {
        attempt: this.attempts,
        total: RECONNECT_ATTEMPTS,
      }),
    );
    this.reconnectTimer = setTimeout(() => this.connect(), RECONNECT_DELAY_MS);
  }

  showConnection(text, { retry = false, signIn = false } = {}) {
    this.connection.hidden = false;
    this.connection.classList.toggle("lost", retry || signIn);
    this.connectionText.textContent = text;
    this.retryButton.hidden = !retry;
    this.connection.querySelector("a")?.remove();
    if (signIn) {
      this.connection.append(el("a", { href: `/accounts/login/?next=${encodeURIComponent(location.pathname)}`, text: gettext("Sign in") }));
    }
  }

  hideConnection() {
    this.connection.hidden = true;
    this.connection.classList.remove("lost");
  }

  sendFrame(frame) {
    if (!this.socket || this.socket.readyState !== WebSocket.OPEN) return false;
    this.socket.send(JSON.stringify(frame));
    return true;
  }

  receive(frame) {
    if (frame.type === "ready") {
      this.ready(frame);
    } else if (this.syncing) {
      this.queue.push(frame);
    } else {
      this.apply(frame);
    }
  }

  async ready(frame) {
    const reconnected = this.everReady;
    this.connected = true;
    this.everReady = true;
    this.attempts = 0;
    this.hideConnection();
    clearInterval(this.pingTimer);
    this.pingTimer = setInterval(() => this.sendFrame({ type: "ping" }), PING_INTERVAL_MS);
    this.syncing = true;
    try {
      await this.syncHistory(reconnected);
    } catch {
      // The page keeps what it shows; the live frames below still apply.
    }
    const run = frame.run;
    this.seen = run ? { runId: run.run_id, seq: run.seq } : null;
    this.setRunning(Boolean(run));
    if (run && run.message_id) {
      const bubble = this.streamingBubble(run.message_id);
      bubble.body.textContent = run.content || "";
      bubble.item.classList.toggle("thinking", !run.content);
    }
    if (!run) this.finishStreaming();
    for (const call of run?.tools || []) {
      this.setCardState(this.toolCard(call.tool_call_id, call.tool, call.input), call.background ? "background" : "running");
    }
    this.syncConfirmations(frame.pending_confirmations || []);
    this.syncing = false;
    const queued = this.queue;
    this.queue = [];
    for (const item of queued) this.apply(item);
    this.updateComposer();
    this.scrollToEnd(true);
  }

  /** What was stored while this page was not listening: re-drawn from the history API when it differs. */
  async syncHistory(force) {
    const messages = await this.fetchHistory();
    const stored = messages.filter((message) => message.status !== "streaming");
    const shown = Array.from(this.list.querySelectorAll("[data-message-id]"))
      .filter((node) => node.dataset.status !== "streaming")
      .map((node) => `${node.dataset.messageId}:${node.dataset.status}`);
    const results = Array.from(this.list.querySelectorAll(".tool-card[data-result-id]")).map(
      (node) => `${node.dataset.resultId}:tool`,
    );
    const expected = stored
      .filter((message) => message.role === "user" || (message.role === "assistant" && message.content))
      .map((message) => `${message.id}:${message.status}`);
    const expectedResults = stored.filter((message) => message.role === "tool").map((message) => `${message.id}:tool`);
    const same = (a, b) => a.length === b.length && a.every((value, index) => value === b[index]);
    if (!force && same(shown, expected) && same(results.sort(), expectedResults.sort())) return;
    this.list.replaceChildren();
    for (const message of messages) this.renderMessage(message);
    if (!messages.length) document.getElementById("empty-chat")?.remove();
  }

  async fetchHistory() {
    const get = async (url) => {
      const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (!response.ok) throw new Error(String(response.status));
      return response.json();
    };
    const last = await get(`${this.historyUrl}?page=last&page_size=${HISTORY_PAGE_SIZE}`);
    let messages = last.results || [];
    if (last.previous && messages.length < Math.min(last.count, HISTORY_PAGE_SIZE)) {
      const previous = await get(last.previous);
      messages = [...(previous.results || []), ...messages].slice(-HISTORY_PAGE_SIZE);
    }
    return messages;
  }

  apply(frame) {
    if (frame.run_id && typeof frame.seq === "number") {
      if (this.seen && this.seen.runId === frame.run_id && frame.seq <= this.seen.seq) return;
      this.seen = { runId: frame.run_id, seq: frame.seq };
    }
    switch (frame.type) {
      case "message":
        this.onMessage(frame.message, frame.client_id);
        break;
      case "run_started":
        this.setRunning(true);
        if (frame.message_id) this.streamingBubble(frame.message_id);
        break;
      case "token":
        this.onToken(frame);
        break;
      case "tool_start": {
        const card = this.toolCard(frame.tool_call_id, frame.tool, frame.input);
        this.setCardInput(card, frame.input);
        this.setCardState(card, frame.background ? "background" : "running");
        this.removeConfirmation(frame.tool_call_id);
        break;
      }
      case "tool_end": {
        const card = this.toolCard(frame.tool_call_id, frame.tool);
        this.setCardOutput(card, pretty(frame.output));
        this.setCardState(card, "ok");
        break;
      }
      case "tool_error": {
        const card = this.toolCard(frame.tool_call_id, frame.tool);
        this.setCardOutput(card, frame.error);
        this.setCardState(card, outcomeState(frame.outcome));
        this.removeConfirmation(frame.tool_call_id);
        break;
      }
      case "confirm_required":
        this.setCardState(this.toolCard(frame.tool_call_id, frame.tool, frame.input), "waiting");
        this.renderConfirmation(frame);
        break;
      case "notice":
        if (frame.code === "PROVIDER_RETRY" && frame.message_id) {
          const bubble = this.findMessage(frame.message_id);
          if (bubble && bubble.dataset.status === "streaming") bubble.querySelector(".msg-body").textContent = "";
        }
        this.notice(NOTICES[frame.code] ? NOTICES[frame.code]() : gettext("Note from the server."), "info");
        break;
      case "run_finished":
        this.setRunning(false);
        this.finishStreaming();
        this.refreshConversation();
        if (frame.status === "iteration_limit") {
          this.notice(gettext("The agent stopped: it reached the maximum number of steps for one answer."), "info");
        }
        break;
      case "error":
        this.onError(frame.code, frame.message);
        break;
      default:
        break;
    }
    this.scrollToEnd();
  }

  // --- messages ----------------------------------------------------------------------------------

  findMessage(id) {
    return this.list.querySelector(`[data-message-id="${CSS.escape(String(id))}"]`);
  }

  append(node) {
    document.getElementById("empty-chat")?.remove();
    this.list.append(node);
  }

  fileChips(message) {
    const files = message.files && message.files.length
      ? message.files
      : (message.attachments || []).map((id) => ({ id, ...(this.fileNames.get(String(id)) || { name: gettext("attached file"), kind: "" }) }));
    if (!files.length) return null;
    return el(
      "ul",
      { class: "chips", "aria-label": gettext("Attached files") },
      files.map((file) =>
        el(
          "li",
          { class: "chip", "data-attachment-id": file.id },
          file.kind ? el("span", { class: "chip-kind", text: String(file.kind).toUpperCase() }) : null,
          el("span", { class: "chip-name", text: file.name }),
        ),
      ),
    );
  }

  renderMessage(message, clientId) {
    if (message.role === "user") {
      if (this.findMessage(message.id)) return;
      this.append(
        el(
          "li",
          { class: "msg msg-user", "data-message-id": message.id, "data-status": message.status },
          el("div", { class: "bubble" }, el("p", { class: "msg-text", text: message.content }), this.fileChips(message)),
        ),
      );
    } else if (message.role === "assistant") {
      this.renderAssistant(message);
    } else if (message.role === "tool") {
      const card = this.toolCard(message.tool_call_id, message.tool_name);
      card.dataset.resultId = message.id;
      this.setCardOutput(card, pretty(message.content));
      this.setCardState(card, outcomeState(message.outcome));
      this.removeConfirmation(message.tool_call_id);
    }
    if (clientId && this.pendingSend && clientId === this.pendingSend.clientId) this.pendingSend = null;
  }

  onMessage(message, clientId) {
    const firstUserMessage = message.role === "user" && this.title?.dataset.untitled;
    this.renderMessage(message, clientId);
    if (firstUserMessage) this.refreshConversation();
  }

  renderAssistant(message) {
    let item = this.findMessage(message.id);
    if (!message.content && message.status !== "streaming") {
      item?.remove();
    } else {
      if (!item) {
        item = this.assistantItem(message.id);
        this.append(item);
      }
      item.dataset.status = message.status;
      item.classList.remove("thinking");
      const body = item.querySelector(".msg-body");
      if (message.status === "streaming") {
        body.className = "msg-body streaming";
        body.textContent = message.content;
      } else {
        item.removeAttribute("aria-busy");
        body.className = "msg-body markdown";
        setSanitizedHTML(body, message.html || "");
        item.querySelector(".msg-status")?.remove();
        if (message.status === "interrupted") {
          item.querySelector(".bubble").append(el("p", { class: "msg-status", text: gettext("Stopped before the end.") }));
        } else if (message.status === "failed") {
          item.querySelector(".bubble").append(el("p", { class: "msg-status failed", text: gettext("The answer could not be finished.") }));
        }
      }
    }
    for (const call of message.tool_calls || []) this.toolCard(call.id, call.name, call.args);
  }

  assistantItem(id) {
    return el(
      "li",
      { class: "msg msg-assistant", "data-message-id": id, "data-status": "streaming", "aria-busy": "true" },
      el("div", { class: "bubble" }, el("div", { class: "msg-body streaming" })),
    );
  }

  streamingBubble(id) {
    let item = this.findMessage(id);
    if (!item) {
      item = this.assistantItem(id);
      item.classList.add("thinking");
      this.append(item);
    }
    return { item, body: item.querySelector(".msg-body") };
  }

  onToken(frame) {
    const { item, body } = this.streamingBubble(frame.message_id);
    if (item.dataset.status !== "streaming") return;
    item.classList.remove("thinking");
    body.append(document.createTextNode(frame.delta));
  }

  /** After a run: drop answers that never got a word; any still marked streaming is final as it stands. */
  finishStreaming() {
    for (const item of this.list.querySelectorAll('.msg-assistant[data-status="streaming"]')) {
      if (!item.querySelector(".msg-body").textContent) item.remove();
    }
  }

  setRunning(running) {
    this.running = running;
    if (!running) this.stopButton.disabled = false;
    this.updateComposer();
  }

  /** The title the server gave a new conversation, and the sidebar's count and time, as they are now. */
  async refreshConversation() {
    try {
      const response = await fetch(this.apiUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (!response.ok) return;
      const conversation = await response.json();
      const meta = document.querySelector('.side-list a[aria-current="page"] .meta');
      if (meta) {
        const count = conversation.message_count;
        meta.querySelector(".count").textContent = fill(ngettext("%(count)s message", "%(count)s messages", count), { count });
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

  // --- tool cards ----------------------------------------------------------------------------------

  toolCard(id, name, args) {
    let card = this.list.querySelector(`.tool-card[data-tool-call-id="${CSS.escape(String(id))}"]`);
    if (card) {
      if (args !== undefined && !card.querySelector(".tool-input pre").textContent) this.setCardInput(card, args);
      return card;
    }
    card = el(
      "li",
      { class: "tool-card", "data-tool-call-id": id, "data-state": "running" },
      el(
        "div",
        { class: "tool-head" },
        el("span", { class: "tool-icon", "aria-hidden": "true" }),
        el("code", { class: "tool-name", text: name || "" }),
        el("span", { class: "tool-state", text: TOOL_STATES.running() }),
      ),
      el("details", { class: "tool-io tool-input" }, el("summary", { text: gettext("Input") }), el("pre")),
      el("details", { class: "tool-io tool-output", hidden: true }, el("summary", { text: gettext("Output") }), el("pre")),
    );
    if (args !== undefined) this.setCardInput(card, args);
    this.append(card);
    return card;
  }

  setCardInput(card, args) {
    card.querySelector(".tool-input pre").textContent = pretty(args ?? {});
  }

  setCardOutput(card, text) {
    const output = card.querySelector(".tool-output");
    output.querySelector("pre").textContent = text ?? "";
    output.hidden = false;
  }

  setCardState(card, state) {
    card.dataset.state = state;
    card.querySelector(".tool-state").textContent = (TOOL_STATES[state] || TOOL_STATES.running)();
  }

  // --- confirmations -------------------------------------------------------------------------------

  syncConfirmations(pending) {
    const open = new Set(pending.map((item) => item.confirmation_id));
    for (const card of this.list.querySelectorAll(".confirm-card")) {
      if (!open.has(card.dataset.confirmationId)) card.remove();
    }
    for (const item of pending) {
      this.setCardState(this.toolCard(item.tool_call_id, item.tool, item.input), "waiting");
      this.renderConfirmation(item);
    }
  }

  removeConfirmation(toolCallId) {
    const card = this.list.querySelector(`.confirm-card[data-tool-call-id="${CSS.escape(String(toolCallId))}"]`);
    if (card) {
      if (this.pendingDecision === card.dataset.confirmationId) this.pendingDecision = null;
      card.remove();
    }
  }

  renderConfirmation(item) {
    if (this.list.querySelector(`.confirm-card[data-confirmation-id="${CSS.escape(item.confirmation_id)}"]`)) return;
    const headingId = `confirm-${item.confirmation_id}`;
    const argsText = pretty(item.input ?? {});
    const error = el("p", { class: "confirm-error", role: "alert" });
    const editor = el("textarea", {
      class: "json-editor",
      id: `${headingId}-args`,
      rows: Math.min(Math.max(argsText.split("\n").length, 3), 16),
      spellcheck: "false",
      autocapitalize: "off",
      "aria-describedby": `${headingId}-json-error`,
    });
    editor.value = argsText;
    const jsonError = el("p", { class: "field-error", id: `${headingId}-json-error`, "aria-live": "polite" });
    const runEdited = el("button", { type: "submit", class: "primary", text: gettext("Run with these arguments") });
    const reason = el("input", { id: `${headingId}-reason`, maxlength: "2000", autocomplete: "off" });
    const actions = el(
      "div",
      { class: "confirm-actions" },
      el("button", { type: "button", class: "primary approve", text: gettext("Approve"), onclick: () => this.decide(card, "approve") }),
      el("button", {
        type: "button",
        class: "edit",
        text: gettext("Edit arguments"),
        "aria-expanded": "false",
        onclick: () => this.openPanel(card, editForm),
      }),
      el("button", {
        type: "button",
        class: "danger reject",
        text: gettext("Reject"),
        "aria-expanded": "false",
        onclick: () => this.openPanel(card, rejectForm),
      }),
    );
    const checkJson = () => {
      try {
        const value = JSON.parse(editor.value);
        if (value === null || typeof value !== "object" || Array.isArray(value)) throw new Error(gettext("the arguments must be a JSON object"));
        jsonError.textContent = "";
        editor.removeAttribute("aria-invalid");
        runEdited.disabled = false;
        return value;
      } catch (problem) {
        jsonError.textContent = fill(gettext("Not valid JSON: %(problem)s"), { problem: problem.message });
        editor.setAttribute("aria-invalid", "true");
        runEdited.disabled = true;
        return null;
      }
    };
    editor.addEventListener("input", checkJson);
    const editForm = el(
      "form",
      {
        class: "confirm-panel confirm-edit",
        hidden: true,
        onsubmit: (event) => {
          event.preventDefault();
          const args = checkJson();
          if (args) this.decide(card, "edit", { args });
        },
      },
      el("label", { for: editor.id, text: gettext("Arguments (JSON)") }),
      editor,
      jsonError,
      el(
        "div",
        { class: "panel-buttons" },
        runEdited,
        el("button", { type: "button", text: gettext("Cancel"), onclick: () => this.openPanel(card, null) }),
      ),
    );
    const rejectForm = el(
      "form",
      {
        class: "confirm-panel confirm-reject",
        hidden: true,
        onsubmit: (event) => {
          event.preventDefault();
          this.decide(card, "reject", { reason: reason.value.trim() });
        },
      },
      el("label", { for: reason.id, text: gettext("Reason (optional, the agent reads it)") }),
      reason,
      el(
        "div",
        { class: "panel-buttons" },
        el("button", { type: "submit", class: "danger", text: gettext("Reject") }),
        el("button", { type: "button", text: gettext("Cancel"), onclick: () => this.openPanel(card, null) }),
      ),
    );
    const card = el(
      "li",
      {
        class: "confirm-card",
        role: "group",
        "aria-labelledby": headingId,
        "data-confirmation-id": item.confirmation_id,
        "data-tool-call-id": item.tool_call_id,
      },
      el("p", { class: "confirm-title", id: headingId, text: gettext("Approval needed") }),
      el(
        "p",
        {},
        sentenceWith(gettext("The agent wants to run %(tool)s with these arguments:"), "tool", el("code", { class: "tool-name", text: item.tool })),
      ),
      el("pre", { class: "confirm-args", text: argsText }),
      actions,
      editForm,
      rejectForm,
      error,
    );
    const toolCard = this.list.querySelector(`.tool-card[data-tool-call-id="${CSS.escape(String(item.tool_call_id))}"]`);
    if (toolCard) toolCard.after(card);
    else this.append(card);
  }

  openPanel(card, panel) {
    for (const form of card.querySelectorAll(".confirm-panel")) form.hidden = form !== panel;
    card.querySelector(".edit").setAttribute("aria-expanded", String(panel?.classList.contains("confirm-edit") || false));
    card.querySelector(".reject").setAttribute("aria-expanded", String(panel?.classList.contains("confirm-reject") || false));
    panel?.querySelector("textarea, input")?.focus();
  }

  decide(card, decision, extra = {}) {
    const error = card.querySelector(".confirm-error");
    error.textContent = "";
    const sent = this.sendFrame({ type: "confirm", confirmation_id: card.dataset.confirmationId, decision, ...extra });
    if (!sent) {
      error.textContent = gettext("Not connected: your decision was not sent. Try again when the connection is back.");
      return;
    }
    this.pendingDecision = card.dataset.confirmationId;
    card.classList.add("deciding");
    for (const button of card.querySelectorAll("button")) button.disabled = true;
  }

  // --- sending -------------------------------------------------------------------------------------

  send() {
    if (this.archived) return;
    const content = this.input.value;
    if (!content.trim()) {
      this.input.focus();
      return;
    }
    if (this.uploads.some((upload) => upload.state === "uploading")) {
      this.notice(gettext("Wait until the files have finished uploading."), "info");
      return;
    }
    const ready = this.uploads.filter((upload) => upload.state === "done");
    const clientId = newClientId();
    const frame = { type: "message", content, client_id: clientId, attachments: ready.map((upload) => upload.id) };
    if (!this.sendFrame(frame)) {
      this.notice(gettext("Not connected: your message was not sent. It is still in the box below."), "error");
      return;
    }
    this.clearNotices();
    this.pendingSend = { clientId, content, uploads: ready };
    for (const upload of ready) this.fileNames.set(String(upload.id), { name: upload.file.name, kind: upload.kind || "" });
    this.uploads = this.uploads.filter((upload) => upload.state !== "done");
    for (const upload of ready) upload.chip.remove();
    this.input.value = "";
    this.autosize();
    this.updateComposer();
    this.input.focus();
  }

  stop() {
    if (this.sendFrame({ type: "cancel" })) this.stopButton.disabled = true;
  }

  onError(code, message) {
    // Sent just before the socket is closed with 4401 or 4403: the server's own words say why.
    const refused = (code === "AUTH_REQUIRED" || code === "FORBIDDEN") && Boolean(message);
    const text = refused
      ? message
      : code === "INVALID"
        ? fill(gettext("That was not accepted: %(detail)s"), { detail: message })
        : (ERRORS[code] || (() => gettext("Something went wrong.")))();
    if (this.pendingDecision) {
      const card = this.list.querySelector(`.confirm-card[data-confirmation-id="${CSS.escape(this.pendingDecision)}"]`);
      this.pendingDecision = null;
      if (card) {
        card.classList.remove("deciding");
        for (const button of card.querySelectorAll("button")) button.disabled = false;
        card.querySelector(".confirm-error").textContent = text;
        if (code === "CHECKPOINT_EXPIRED") card.classList.add("expired");
        if (!refused) return;
      }
    }
    if (this.pendingSend) {
      // The message was not taken: give it back to the person, with its files.
      const { content, uploads } = this.pendingSend;
      this.pendingSend = null;
      if (!this.input.value) {
        this.input.value = content;
        this.autosize();
      }
      for (const upload of uploads) {
        this.uploads.push(upload);
        this.chips.append(upload.chip);
      }
      this.updateComposer();
    }
    this.notice(text, "error");
  }

  // --- notices -------------------------------------------------------------------------------------

  notice(text, kind) {
    const existing = Array.from(this.notices.children).find((node) => node.dataset.text === text);
    existing?.remove();
    const item = el(
      "div",
      { class: `notice notice-${kind}`, role: kind === "error" ? "alert" : "status", "data-text": text },
      el("span", { text }),
      el("button", { type: "button", class: "dismiss", "aria-label": gettext("Dismiss"), text: "×", onclick: () => item.remove() }),
    );
    this.notices.append(item);
    while (this.notices.children.length > 4) this.notices.firstElementChild.remove();
  }

  clearNotices() {
    this.notices.replaceChildren();
  }

  scrollToEnd(force = false) {
    const distance = this.list.scrollHeight - this.list.scrollTop - this.list.clientHeight;
    if (force || distance < 160) this.list.scrollTop = this.list.scrollHeight;
  }

  // --- files ---------------------------------------------------------------------------------------

  check(file) {
    const dot = file.name.lastIndexOf(".");
    const extension = dot >= 0 ? file.name.slice(dot).toLowerCase() : "";
    const maxBytes = this.rules.maxBytes || 10 * 1024 * 1024;
    if (!(this.rules.extensions || []).includes(extension)) {
      return fill(gettext("%(name)s: this kind of file is not supported. Attach PDF, XLSX, CSV, JSON, PNG or JPEG files."), { name: file.name });
    }
    if (file.size > maxBytes) {
      return fill(gettext("%(name)s is larger than %(limit)s MB."), { name: file.name, limit: Math.round(maxBytes / (1024 * 1024)) });
    }
    if (file.size === 0) return fill(gettext("%(name)s is empty."), { name: file.name });
    return "";
  }

  addFiles(files) {
    for (const file of Array.from(files || [])) {
      const problem = this.check(file);
      if (problem) {
        this.notice(problem, "error");
        continue;
      }
      this.upload(file);
    }
  }

  upload(file) {
    const progress = el("progress", { max: "100", value: "0", "aria-label": fill(gettext("Uploading %(name)s"), { name: file.name }) });
    const status = el("span", { class: "chip-status", text: gettext("uploading…") });
    const upload = { file, state: "uploading", id: null, xhr: new XMLHttpRequest(), chip: null, kind: "" };
    const remove = el("button", {
      type: "button",
      class: "chip-remove",
      "aria-label": fill(gettext("Remove %(name)s"), { name: file.name }),
      text: "×",
      onclick: () => {
        if (upload.state === "uploading") upload.xhr.abort();
        this.uploads = this.uploads.filter((item) => item !== upload);
        upload.chip.remove();
        this.updateComposer();
        this.input.focus();
      },
    });
    upload.chip = el(
      "li",
      { class: "chip uploading" },
      el("span", { class: "chip-name", text: file.name }),
      el("span", { class: "chip-size", text: formatSize(file.size) }),
      progress,
      status,
      remove,
    );
    this.uploads.push(upload);
    this.chips.append(upload.chip);
    this.updateComposer();

    const xhr = upload.xhr;
    const fail = (text) => {
      upload.state = "error";
      upload.chip.classList.remove("uploading");
      upload.chip.classList.add("failed");
      progress.remove();
      status.textContent = text;
      status.setAttribute("role", "alert");
      this.updateComposer();
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
        upload.state = "done";
        upload.id = String(body.id);
        upload.kind = body.kind || "";
        upload.chip.classList.remove("uploading");
        upload.chip.classList.add("done");
        upload.chip.dataset.attachmentId = upload.id;
        progress.remove();
        status.textContent = gettext("ready");
        this.updateComposer();
      } else if (xhr.status === 413) {
        fail(gettext("too large: files may be at most 10 MB"));
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
    xhr.open("POST", this.uploadUrl);
    xhr.setRequestHeader("X-CSRFToken", this.csrf);
    xhr.setRequestHeader("Accept", "application/json");
    const form = new FormData();
    form.append("file", file, file.name);
    xhr.send(form);
  }
}

// --- start -----------------------------------------------------------------------------------------

localizeTimes();
const root = document.getElementById("chat");
if (root) {
  globalThis.agentchat = new Chat(root);
  root.querySelector("#messages").scrollTop = root.querySelector("#messages").scrollHeight;
  if (root.dataset.archived !== "1") document.getElementById("message")?.focus();
}
