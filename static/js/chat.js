// AgentChat's pages: local times everywhere, and on a chat page the live conversation. This module only wires
// the parts in ./chat/ together; each of them does one job. No framework, no build step.

import { Composer, tooLargeText } from "./chat/composer.js";
import { Confirmations } from "./chat/confirmations.js";
import { Conversation } from "./chat/conversation.js";
import { localizeTimes } from "./chat/dom.js";
import { demoNote, errorText, Notices } from "./chat/notices.js";
import { Socket } from "./chat/socket.js";
import { Timeline } from "./chat/timeline.js";
import { ToolCards } from "./chat/tool-cards.js";
import { Uploads } from "./chat/uploads.js";

function startChat(root) {
  const data = root.dataset;
  const archived = data.archived === "1";
  const list = document.getElementById("messages");
  const notices = new Notices(document.getElementById("notices"));
  const input = document.getElementById("message");
  let composer = null;
  let timeline = null;
  const changed = () => composer.update();

  const socket = new Socket(data.wsPath, {
    ready: (frame, reconnected) => timeline.ready(frame, reconnected),
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
  composer = new Composer({ archived, socket, notices, uploads });
  const cards = new ToolCards(list);
  const confirmations = new Confirmations(list, cards, socket);

  // An error frame answers the decision on its way if there is one, else the message just sent.
  const onError = (code, message) => {
    const refused = (code === "AUTH_REQUIRED" || code === "FORBIDDEN") && Boolean(message);
    const text = errorText(code, message, refused, data.demoModel === "1");
    if (confirmations.failed(code, text, refused)) return;
    composer.giveBack();
    notices.show(text, "error");
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
  });

  demoNote(document.getElementById("demo-note"));
  composer.update();
  socket.connect();
  return { socket, timeline, composer, uploads, cards, confirmations, notices };
}

localizeTimes();
const root = document.getElementById("chat");
if (root) {
  globalThis.agentchat = startChat(root);
  const list = document.getElementById("messages");
  list.scrollTop = list.scrollHeight;
  if (root.dataset.archived !== "1") document.getElementById("message")?.focus();
}
