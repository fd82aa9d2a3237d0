"""A fast OpenAI-compatible chat-completions server for the benchmark: scripted time-to-first-token and token rate.

    python -m bench.fake_provider --port 0 --ttft-ms 20-50 --rate 50

prints one line `{"port": N}` when it listens, then serves until SIGTERM or SIGINT. It is a small
asyncio HTTP/1.1 server (keep-alive, chunked server-sent events), so one process holds hundreds of
concurrent streams.

What it answers is decided by the last user message, so that a client knows the exact text to expect:
`bench:<tag>:<count>` streams `count` tokens, token i being `token(tag, i)`; any other message gets
`DEFAULT_TOKENS` tokens tagged `x`. The message may also set the stream's pace, `bench:<tag>:<count>:<ttft
ms>:<tokens/s>`, so that two clients asking the same get the same; otherwise the first token comes at a
point of the `--ttft-ms` range that the tag fixes. The first token is sent `ttft` seconds after the
request was read, token i at `ttft + i / rate`; tokens that are due together go out in one write (every
`tick` seconds at most once), and a client that reads slowly holds the stream back (the rate is a ceiling).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import time
import zlib
from dataclasses import dataclass, replace

DEFAULT_TTFT_MS = (20.0, 50.0)  # each stream's first token comes at a point of this range
DEFAULT_RATE = 50.0  # tokens per second per stream
DEFAULT_TICK_MS = 5.0
DEFAULT_TOKENS = 20
MAX_BODY = 16 * 1024 * 1024
NUMBER = r"(\d{1,6}(?:\.\d+)?)"
PROMPT = re.compile(rf"bench:([A-Za-z0-9_-]{{1,32}}):(\d{{1,6}})(?::{NUMBER}:{NUMBER})?")


def token(tag: str, index: int) -> str:
    """Token `index` of the stream tagged `tag`: unique within the stream, so a loss, repeat or swap shows."""
    return f"{tag}.{index} "


def expected_text(tag: str, count: int) -> str:
    return "".join(token(tag, index) for index in range(count))


def prompt(tag: str, count: int, pace: Pace | None = None) -> str:
    """The message that asks for `count` tokens tagged `tag`, at `pace` when given (the provider's own otherwise)."""
    if pace is None:
        return f"bench:{tag}:{count}"
    return f"bench:{tag}:{count}:{pace.ttft * 1000:.3f}:{pace.rate:g}"


@dataclass(frozen=True)
class Pace:
    ttft: float = DEFAULT_TTFT_MS[0] / 1000
    rate: float = DEFAULT_RATE  # <= 0: as fast as the client reads
    tick: float = DEFAULT_TICK_MS / 1000
    ttft_max: float | None = None  # with it, a stream's first token comes between `ttft` and this

    def due(self, index: int) -> float:
        """Seconds after the request when token `index` is due."""
        return self.ttft + (index / self.rate if self.rate > 0 else 0.0)

    def for_stream(self, key: str) -> Pace:
        """One stream's pace: its first token at the point of the range that `key` fixes (same key, same point)."""
        if self.ttft_max is None:
            return self
        point = zlib.crc32(key.encode()) / 2**32
        return replace(self, ttft=self.ttft + (self.ttft_max - self.ttft) * point, ttft_max=None)


def _reply_for(body: dict, pace: Pace) -> tuple[str, int, Pace]:
    messages = body.get("messages") or []
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            found = PROMPT.search(str(message.get("content") or ""))
            if found is None:
                break
            tag, count, ttft_ms, rate = found.groups()
            if ttft_ms is None:
                return tag, int(count), pace.for_stream(tag)
            return tag, int(count), replace(pace, ttft=float(ttft_ms) / 1000, rate=float(rate), ttft_max=None)
    return "x", DEFAULT_TOKENS, pace.for_stream("x")


class FakeProvider:
    def __init__(self, pace: Pace, model: str = "bench-model"):
        self.pace = pace
        self.model = model
        self.streams = 0
        self.served = 0
        self.connections: set[asyncio.StreamWriter] = set()

    def drop_connections(self) -> None:
        for writer in list(self.connections):
            writer.transport.abort()

    # --- the wire ------------------------------------------------------------------------------

    def _chunk(self, created: int, delta: dict, finish: str | None = None) -> bytes:
        event = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"

    def _token_chunk(self, prefix: bytes, text: str) -> bytes:
        return prefix + json.dumps(text).encode() + b'},"finish_reason":null}]}\n\n'

    @staticmethod
    def _framed(data: bytes) -> bytes:
        return b"%X\r\n%s\r\n" % (len(data), data)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections.add(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                received = time.monotonic()
                lines = head.decode("latin-1").split("\r\n")
                method, path, *_ = [*lines[0].split(" ", 2), "", ""]
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length") or 0)
                if length > MAX_BODY:
                    await self._respond(writer, 413, {"error": {"message": "too large"}}, close=True)
                    return
                raw = await reader.readexactly(length) if length else b""
                if method == "GET" and path.rstrip("/") in {"", "/health"}:
                    await self._respond(writer, 200, {"ok": True, "streams": self.streams, "served": self.served})
                    continue
                if method != "POST" or path.rstrip("/") != "/v1/chat/completions":
                    await self._respond(writer, 404, {"error": {"message": f"Unknown path {path}"}})
                    continue
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    await self._respond(writer, 400, {"error": {"message": "Body is not JSON"}})
                    continue
                tag, count, pace = _reply_for(body if isinstance(body, dict) else {}, self.pace)
                if body.get("stream"):
                    await self._stream(writer, tag, count, pace, received)
                else:
                    await asyncio.sleep(max(0.0, received + pace.due(count) - time.monotonic()))
                    await self._respond(writer, 200, self._completion(tag, count))
                self.served += 1
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return
        finally:
            self.connections.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    def _completion(self, tag: str, count: int) -> dict:
        return {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": expected_text(tag, count)},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": count, "total_tokens": 10 + count},
        }

    async def _respond(self, writer: asyncio.StreamWriter, status: int, payload: dict, close: bool = False) -> None:
        data = json.dumps(payload).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 413: "Payload Too Large"}.get(status, "Error")
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n".encode()
            + data
        )
        await writer.drain()

    async def _stream(self, writer: asyncio.StreamWriter, tag: str, count: int, pace: Pace, received: float) -> None:
        self.streams += 1
        try:
            created = int(time.time())
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            await writer.drain()
            prefix = (
                b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":%d,"model":%s,'
                b'"choices":[{"index":0,"delta":{"content":' % (created, json.dumps(self.model).encode())
            )
            sent = 0
            first = self._chunk(created, {"role": "assistant", "content": ""})
            while sent < count:
                now = time.monotonic() - received
                wait = pace.due(sent) - now
                if wait > 0:
                    await asyncio.sleep(wait if sent == 0 else max(wait, pace.tick))
                    now = time.monotonic() - received
                batch = [first] if sent == 0 else []
                while sent < count and pace.due(sent) <= now + 1e-6:
                    batch.append(self._token_chunk(prefix, token(tag, sent)))
                    sent += 1
                if batch:
                    writer.write(self._framed(b"".join(batch)))
                    await writer.drain()
            if count == 0:
                await asyncio.sleep(pace.ttft)
                writer.write(self._framed(first))
            tail = self._chunk(created, {}, "stop") + b"data: [DONE]\n\n"
            writer.write(self._framed(tail) + b"0\r\n\r\n")
            await writer.drain()
        finally:
            self.streams -= 1


async def serve(pace: Pace, host: str = "127.0.0.1", port: int = 0, ready=None) -> None:
    provider = FakeProvider(pace)
    server = await asyncio.start_server(provider.handle, host, port, backlog=2048, limit=MAX_BODY)
    bound = server.sockets[0].getsockname()[1]
    if ready is not None:
        ready(bound)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()
        server.close()
        provider.drop_connections()
        await asyncio.sleep(0.05)


def pace_from(args: argparse.Namespace) -> Pace:
    low, high = args.ttft_ms
    return Pace(ttft=low / 1000, rate=args.rate, tick=args.tick_ms / 1000, ttft_max=high / 1000)


def ttft_range(text: str) -> tuple[float, float]:
    """`20-50` or `50` (ms) → (low, high)."""
    low, _, high = str(text).partition("-")
    values = float(low), float(high or low)
    if not 0 <= values[0] <= values[1]:
        raise argparse.ArgumentTypeError(f"not a range of milliseconds: {text!r}")
    return values


def add_pace_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument(
        "--ttft-ms",
        type=ttft_range,
        default=env("BENCH_TTFT_MS", "{:g}-{:g}".format(*DEFAULT_TTFT_MS)),
        help="time to first token, ms: a range (each stream gets a point of it) or one value "
        "(env BENCH_TTFT_MS; default %(default)s)",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=float(env("BENCH_TOKEN_RATE", DEFAULT_RATE)),
        help="tokens per second per stream, 0 for unpaced (env BENCH_TOKEN_RATE; default %(default)s)",
    )
    parser.add_argument(
        "--tick-ms",
        type=float,
        default=float(env("BENCH_TICK_MS", DEFAULT_TICK_MS)),
        help="shortest pause between two writes of one stream, ms (default %(default)s)",
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    add_pace_arguments(parser)
    args = parser.parse_args(argv)

    def ready(port: int) -> None:
        print(json.dumps({"port": port}), flush=True)

    asyncio.run(serve(pace_from(args), args.host, args.port, ready))


if __name__ == "__main__":
    sys.exit(main())
