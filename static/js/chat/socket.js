// The WebSocket: connecting (the session cookie authenticates it), keeping it alive, the connection banner,
// reconnecting by itself a few times, and the close codes after which another try would be refused too.

import { clone } from "./dom.js";
import { fill, gettext } from "./i18n.js";

const RECONNECT_ATTEMPTS = 5;
const PING_INTERVAL_MS = 25000;
const UNAUTHENTICATED = 4401;
const FORBIDDEN = 4403;
const NOT_FOUND = 4404;
const MESSAGE_TOO_BIG = 1009;

export class Socket {
  /**
   * `path`: the socket's path on this host. `on`: {ready(frame, reconnected), frame(frame), closed(tooLarge)}, and
   * change() when `connected` or `refused` changed outside `ready`.
   */
  constructor(path, on) {
    this.path = path;
    this.on = on;
    this.delay = Number(globalThis.agentchatReconnectDelay) || 5000;
    this.connection = document.getElementById("connection");
    this.text = this.connection.querySelector(".connection-text");
    this.retryButton = this.connection.querySelector(".retry");
    this.socket = null;
    this.connected = false;
    this.everReady = false;
    this.refused = false; // closed with 4401 or 4403
    this.attempts = 0;
    this.reconnectTimer = null;
    this.pingTimer = null;
    this.retryButton.addEventListener("click", () => {
      this.attempts = 0;
      this.connect();
    });
  }

  connect() {
    clearTimeout(this.reconnectTimer);
    if (this.socket) {
      this.socket.onclose = null;
      this.socket.close();
    }
    this.retryButton.hidden = true;
    if (this.everReady) this.show(gettext("Reconnecting…"));
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const socket = new WebSocket(scheme + location.host + this.path);
    this.socket = socket;
    socket.onmessage = (event) => {
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        return;
      }
      if (frame.type === "ready") this.ready(frame);
      else this.on.frame(frame);
    };
    socket.onclose = (event) => {
      if (this.socket === socket) this.closed(event);
    };
  }

  /** Sends a frame; false when the socket is not open. */
  send(frame) {
    if (!this.socket || this.socket.readyState !== WebSocket.OPEN) return false;
    this.socket.send(JSON.stringify(frame));
    return true;
  }

  ready(frame) {
    const reconnected = this.everReady;
    this.connected = true;
    this.everReady = true;
    this.attempts = 0;
    this.hide();
    clearInterval(this.pingTimer);
    this.pingTimer = setInterval(() => this.send({ type: "ping" }), PING_INTERVAL_MS);
    this.on.ready(frame, reconnected);
  }

  closed(event) {
    this.connected = false;
    this.on.closed(event.code === MESSAGE_TOO_BIG);
    clearInterval(this.pingTimer);
    this.refused = event.code === UNAUTHENTICATED || event.code === FORBIDDEN;
    this.on.change();
    if (event.code === UNAUTHENTICATED) {
      this.show(gettext("You are signed out. Sign in again to continue."), { signIn: true });
      return;
    }
    if (event.code === FORBIDDEN) {
      this.show(gettext("Disconnected. Reload the page to continue."));
      return;
    }
    if (event.code === NOT_FOUND) {
      this.show(gettext("This conversation is not available."));
      return;
    }
    if (this.attempts >= RECONNECT_ATTEMPTS) {
      this.show(gettext("Connection lost."), { retry: true });
      return;
    }
    this.attempts += 1;
    this.show(
      fill(gettext("Connection interrupted. Reconnecting (attempt %(attempt)s of %(total)s)…"), {
        attempt: this.attempts,
        total: RECONNECT_ATTEMPTS,
      }),
    );
    this.reconnectTimer = setTimeout(() => this.connect(), this.delay);
  }

  show(text, { retry = false, signIn = false } = {}) {
    this.connection.hidden = false;
    this.connection.classList.toggle("lost", retry || signIn);
    this.text.textContent = text;
    this.retryButton.hidden = !retry;
    this.connection.querySelector("a")?.remove();
    if (signIn) {
      const link = clone("sign-in");
      link.setAttribute("href", `/accounts/login/?next=${encodeURIComponent(location.pathname)}`);
      this.connection.append(link);
    }
  }

  hide() {
    this.connection.hidden = true;
    this.connection.classList.remove("lost");
  }
}
