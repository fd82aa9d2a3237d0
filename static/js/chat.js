// AgentChat's pages: local times everywhere, and on a chat page the live conversation. This module only wires
// the parts in ./chat/ together; each of them does one job. No framework, no build step.

import { MessageActions } from "./chat/actions.js";
import { copyCodeOnClick, decorateMarkdown } from "./chat/code-blocks.js";
import { Composer, tooLargeText } from "./chat/composer.js";
import { Confirmations } from "./chat/confirmations.js";
import { Conversation } from "./chat/conversation.js";
import { localizeTimes } from "./chat/dom.js";
import { Drawer } from "./chat/drawer.js";
import { demoNote, errorText, Notices } from "./chat/notices.js";
import { Socket } from "./chat/socket.js";
import { startBox } from "./chat/start.js";
import { drawStreaming } from "./chat/streaming.js";
import { Timeline } from "./chat/timeline.js";
import { ToolCards } from "./chat/tool-cards.js";
import { ToolGroups } from "./chat/tool-groups.js";
import { Uploads } from "./chat/uploads.js";

function startChat(root) {
  const data = root.dataset;
  const archived = data.archived === "1";
  const list = document.getElementById("messages");
  const notices = new Notices(document.getElementById("notices"));
  const input = document.getElementById("message");
  let composer = null;
  let timeline = null;
  const changed = () => {
    composer.update();
    // The composer's "wait for the uploads" is over once they are.
    if (!uploads.busy) notices.dismiss("composer", "info");
  };

  // A conversation begun on the start page: its first message waits in the box and goes once the socket is ready.
  let first = data.sendFirst === "1";
  const socket = new Socket(data.wsPath, {
    ready: async (frame, reconnected) => {
      await timeline.ready(frame, reconnected);
      if (first) composer.send();
      first = false;
    },
    frame: (frame) => timeline.receive(frame),
    closed: (tooLarge) => {
      timeline.closed();
      // A frame the server could not even read: what was being sent goes back in the box.
      if (tooLarge) {
        composer.giveBack();
        notices.show(tooLargeText(), "error");
      }
    },
    change: changed,
  });
  const uploads = new Uploads(root, {
    url: data.uploadUrl,
    csrf: data.csrf,
    rules: JSON.parse(document.getElementById("upload-rules")?.textContent || "{}"),
    archived,
    notices,
    input,
    changed,
  });
  composer = new Composer({ archived, socket, notices: notices.about("composer"), uploads });
  // The files attached on the start page go with the first message.
  uploads.adopt(JSON.parse(document.getElementById("first-files").textContent));
  const cards = new ToolCards(list);
  const confirmations = new Confirmations(list, cards, socket, data.username);
  const actions = new MessageActions(list, { socket, composer, notices, archived });
  composer.onUpdate = () => actions.refresh();
  const groups = new ToolGroups(list, (state) => cards.label(state));

  // An error frame answers the decision on its way if there is one, else the message just sent.
  const onError = (code, message) => {
    const refused = (code === "AUTH_REQUIRED" || code === "FORBIDDEN") && Boolean(message);
    const text = errorText(code, message, refused, data.demoModel === "1");
    if (confirmations.failed(code, text, refused)) return;
    // A failed run is told at its answer, with Retry, which the server sends first: no notice says it again.
    const answers = list.querySelectorAll(":scope > .msg-assistant");
    if (code === "PROVIDER_ERROR" && answers[answers.length - 1]?.dataset.status === "failed") return;
    composer.giveBack();
    actions.refused();
    notices.show(text, "error", code);
  };
  timeline = new Timeline(list, {
    historyUrl: data.historyUrl,
    cards,
    confirmations,
    composer,
    uploads,
    notices,
    conversation: new Conversation(data.apiUrl),
    onError,
    onChange: () => {
      actions.refresh();
      groups.refresh();
    },
  });

  demoNote(document.getElementById("demo-note"));
  new Drawer({
    panel: document.getElementById("sidebar"),
    toggle: document.getElementById("sidebar-open"),
    close: document.getElementById("sidebar-close"),
    chat: root,
  });
  decorateMarkdown(list);
  drawStreaming(list);
  copyCodeOnClick(list, notices);
  groups.draw();
  composer.update();
  socket.connect();
  return { socket, timeline, composer, uploads, cards, confirmations, notices, actions };
}

localizeTimes();
const root = document.getElementById("chat");
if (root) {
  globalThis.agentchat = startChat(root);
  const list = document.getElementById("messages");
  list.scrollTop = list.scrollHeight;
  if (root.dataset.archived !== "1") document.getElementById("message")?.focus();
}
const start = document.getElementById("start");
if (start) startBox(start);
