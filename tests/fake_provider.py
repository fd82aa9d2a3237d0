"""A scriptable OpenAI-compatible chat-completions server on 127.0.0.1, for driving a real client over HTTP: the
provider, and the `openai` SDK, which tells that the server speaks the wire format as OpenAI's own client reads it.

    with FakeLLM() as llm:
        llm.script(Reply(text="Hello!"), Reply(tool_calls=[("search", {"q": "x"})]))
        ... point a client at llm.base_url ...
        llm.requests[0].body["messages"]

Streams are HTTP/1.1 chunked, so a reply cut short (`cut_after`) is a protocol error for the client,
as it is when a real provider drops the connection mid-answer.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.loopback import LoopbackService

ARGUMENT_PIECE = 4

ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("rate_limit_exceeded", "rate_limit_exceeded"),
}


@dataclass
class Reply:
    """One scripted answer. `tool_calls` items are `(name, arguments)` or `(name, arguments, id)`;
    arguments are a dict (sent as a JSON string) or a raw str (sent as is, e.g. to be invalid JSON)."""

    text: str = ""
    tool_calls: list[tuple] = field(default_factory=list)
    status: int = 200
    # Seconds of silence: before the answer starts, or after `stall_after` chunks of its stream.
    stall: float = 0
    stall_after: int | None = None
    cut_after: int | None = None
    chunk_chars: int = 3
    # Seconds between chunks: a slow stream, to act on a run while it is live.
    interval: float = 0
    # After this many chunks (or instead of a whole answer) send a body that is not JSON.
    malformed_after: int | None = None
    # What is sent then in a stream: not JSON by default, or JSON of the wrong shape.
    malformed_chunk: str = "{not json"
    # (prompt_tokens, completion_tokens) reported when the request asks for usage; None: reported by no chunk.
    usage: tuple[int, int] | None = (12, 7)
    # How a stream's events are written: "lf", or "crlf": CRLF line ends, a comment before each event, `data:`
    # without a space, and each chunk's JSON over two `data:` lines (all of it allowed by the event-stream format).
    framing: str = "lf"


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body["messages"]

    @property
    def tools(self) -> list[dict[str, Any]]:
        return self.body.get("tools", [])


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _unanswered_calls(messages: list[dict[str, Any]]) -> list[str]:
    """The tool calls not followed, before the next non-tool message, by a tool message with their id."""
    missing: list[str] = []
    waiting: set[str] = set()
    for message in [*messages, {"role": "end"}]:
        if message.get("role") == "tool":
            waiting.discard(message.get("tool_call_id"))
            continue
        missing.extend(sorted(waiting))
        waiting = {call["id"] for call in message.get("tool_calls") or []}
    return missing


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(self.connection, add=False)

    def log_message(self, format, *args) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"null")
        except json.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
        headers = {name.lower(): value for name, value in self.headers.items()}
        fake = self.server.fake
        fake.record(RecordedRequest(path=self.path, headers=headers, body=body))
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_json(404, {"error": {"message": f"Unknown path {self.path}", "type": "invalid_request_error"}})
            return
        if isinstance(body, dict) and (unanswered := _unanswered_calls(body.get("messages") or [])):
            # As OpenAI's own API does: a history with a tool call and no result is refused.
            self._send_json(
                400,
                {
                    "error": {
                        "message": "An assistant message with 'tool_calls' must be followed by tool messages "
                        f"responding to each 'tool_call_id'. Missing: {', '.join(unanswered)}",
                        "type": "invalid_request_error",
                    }
                },
            )
            return
        reply = fake.next_reply()
        if reply.stall and reply.stall_after is None and fake.stopping.wait(reply.stall):
            self.close_connection = True
            return
        if reply.status != 200:
            self._send_error(reply, headers)
        elif isinstance(body, dict) and body.get("stream"):
            self._send_stream(reply, body)
        elif reply.malformed_after is not None:
            self._send_raw(b"<html>Bad gateway</html>")
        else:
            self._send_json(200, fake.completion(reply, body))

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_raw(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, reply: Reply, headers: dict[str, str]) -> None:
        kind, code = ERROR_TYPES.get(reply.status, ("server_error", None))
        if reply.status == 401:
            # Real OpenAI quotes the key it was sent; the client must never pass this body on.
            key = headers.get("authorization", "").removeprefix("Bearer ")
            message = f"Incorrect API key provided: {key}. You can find your API key at https://example.invalid."
        else:
            message = f"Scripted failure: {HTTPStatus(reply.status).phrase}"
        self._send_json(reply.status, {"error": {"message": message, "type": kind, "param": None, "code": code}})

    def _send_stream(self, reply: Reply, body: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for sent, chunk in enumerate(self.server.fake.chunks(reply, body)):
            if reply.cut_after is not None and sent >= reply.cut_after:
                # Gone without [DONE] and without the terminating zero-length chunk.
                self.close_connection = True
                return
            if reply.interval and sent and self.server.fake.stopping.wait(reply.interval):
                self.close_connection = True
                return
            if sent == reply.stall_after and self.server.fake.stopping.wait(reply.stall):
                self.close_connection = True
                return
            if sent == reply.malformed_after:
                self._write_chunk(f"data: {reply.malformed_chunk}\n\n".encode())
            self._write_chunk(_event(json.dumps(chunk), reply.framing))
        self._write_chunk(_event("[DONE]", reply.framing))
        self.wfile.write(b"0\r\n\r\n")

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's backlog is 5: more connections at once would wait for the client's SYN to be sent again.
    request_queue_size = 256

    def __init__(self, fake: FakeLLM):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.opened = 0

    def track(self, connection: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(connection)
                self.opened += 1
            else:
                self._connections.discard(connection)

    def drop_connections(self) -> None:
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request, client_address) -> None:
        # A client that timed out or went away mid-reply is part of what the tests script.
        pass


class FakeLLM(LoopbackService):
    server_class = _Server

    def __init__(self, model: str = "fake-model"):
        super().__init__()
        self.model = model
        self.requests: list[RecordedRequest] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def connections_opened(self) -> int:
        """How many connections clients have opened to it since it started."""
        return self._server.opened

    def _closing(self, server: _Server) -> None:
        server.drop_connections()

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def next_reply(self) -> Reply:
        with self._lock:
            return self._replies.popleft() if self._replies else Reply(text="ok")

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _calls(self, reply: Reply) -> list[tuple[str, str, str]]:
        """(id, name, arguments as sent) for each scripted call."""
        calls = []
        for item in reply.tool_calls:
            name, arguments = item[0], item[1]
            call_id = item[2] if len(item) > 2 else f"call_{next(self._ids)}"
            calls.append((call_id, name, arguments if isinstance(arguments, str) else json.dumps(arguments)))
        return calls

    def _envelope(self, obj: str, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": obj,
            "created": int(time.time()),
            "model": body.get("model") or self.model,
        }

    def completion(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        calls = self._calls(reply)
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if calls:
            message["tool_calls"] = [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
                for call_id, name, arguments in calls
            ]
        return {
            **self._envelope("chat.completion", body),
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop", "logprobs": None}
            ],
            "usage": _usage(reply.usage) if reply.usage else None,
        }

    def chunks(self, reply: Reply, body: dict[str, Any]) -> list[dict[str, Any]]:
        envelope = self._envelope("chat.completion.chunk", body)

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {**envelope, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

        chunks = [chunk({"role": "assistant", "content": ""})]
        chunks += [chunk({"content": piece}) for piece in _pieces(reply.text, max(reply.chunk_chars, 1))]
        calls = self._calls(reply)
        for index, (call_id, name, arguments) in enumerate(calls):
            head = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
            chunks.append(chunk({"tool_calls": [head]}))
            chunks += [
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in _pieces(arguments, ARGUMENT_PIECE)
            ]
        chunks.append(chunk({}, "tool_calls" if calls else "stop"))
        if (body.get("stream_options") or {}).get("include_usage") and reply.usage is not None:
            chunks.append({**envelope, "choices": [], "usage": _usage(reply.usage)})
        return chunks


def _event(data: str, framing: str) -> bytes:
    if framing == "lf":
        return f"data: {data}\n\n".encode()
    head, comma, tail = data.partition(", ")
    lines = f"data:{head}{comma}\r\ndata:{tail}" if comma else f"data:{data}"
    return f": keep-alive\r\n{lines}\r\n\r\n".encode()


def _usage(counts: tuple[int, int]) -> dict[str, int]:
    prompt, completion = counts
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
