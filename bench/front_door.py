"""The front door: how long a 10 MB file takes to be accepted, and whether anyone else's socket waits while a
60 MB body is refused. Measured on the first daphne process, from outside, by the driver's clocks.

- Three files of just under 10 MiB (bench/files.py: CSV, XLSX, PDF), made in the work directory and
  uploaded one after the other (the server reads at most UPLOAD_PARSES_PER_USER of a person's files at
  once) to `POST /api/assistant/conversations/<id>/attachments/`: seconds from starting the POST to its
  201, and what the answer says was read (`meta`).
- Two hostile bodies of 60 MiB over raw sockets: one declaring its length (answered from the head
  alone), one chunked with no length (answered once the limit is passed): the status, the bytes sent
  before the answer came, and how long that took; then the rest is pushed all the same, as a hostile
  client would, and the server reads and drops it.
- All along, a `ping` in a loop on other authenticated chat sockets, each pong awaited before the
  next ping: the longest wait for a pong during each upload and each refusal. The pings go round
  several sockets, each one kept under the per-socket frame limit (120 in 10 s). The driver's own
  event-loop lag is measured alongside: its share of a long wait is not the server's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from websockets.exceptions import ConnectionClosed

from .checks import percentile
from .clients import Api, close_sockets, open_sockets
from .files import DEFAULT_SIZE, MAKERS, MiB
from .stack import HOST, MemorySampler, Server, Stack, log

HOSTILE = 60 * MiB
PING_SOCKETS = 12  # ~10 ms apart, ~90 pings a second: under 8 a second for each socket
PING_GAP = 0.01
UPLOAD_TIMEOUT = 120.0
REFUSAL_TIMEOUT = 60.0


def upload_path(conversation_id: str) -> str:
    return f"/api/assistant/conversations/{conversation_id}/attachments/"


# --- the pings -------------------------------------------------------------------------------------


@dataclass
class Pinger:
    """`ping` on each socket in turn, each pong awaited before the next ping; every wait, by when it was sent."""

    sockets: list
    waits: list[tuple[float, float]] = field(default_factory=list)  # (sent at, seconds to the pong)
    errors: list[str] = field(default_factory=list)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    waiting_since: float | None = None

    async def run(self) -> None:
        turn = 0
        while not self.stopping.is_set() and self.sockets:
            ws = self.sockets[turn % len(self.sockets)]
            turn += 1
            sent = time.perf_counter()
            self.waiting_since = sent
            try:
                await ws.send(json.dumps({"type": "ping"}))
                while True:
                    frame = json.loads(await ws.recv())
                    if frame.get("type") == "pong":
                        break
                    if frame.get("type") == "error":
                        self.errors.append(f"{frame.get('code')}: {frame.get('message')}")
                        break
            except ConnectionClosed as exc:
                self.errors.append(f"a ping socket closed: {exc}")
                self.sockets.remove(ws)
                continue
            finally:
                self.waiting_since = None
            self.waits.append((sent, time.perf_counter() - sent))
            await asyncio.sleep(PING_GAP)

    def during(self, start: float, end: float) -> dict[str, Any]:
        """The pings whose wait overlapped [start, end]; a pong still awaited at `end` counts up to then."""
        waits = [(sent, wait) for sent, wait in self.waits if sent < end and sent + wait > start]
        if self.waiting_since is not None and self.waiting_since < end:
            waits.append((self.waiting_since, end - self.waiting_since))
        if not waits:
            return {"pings": 0, "max_pong_wait_ms": None, "p50_pong_wait_ms": None, "longest_sent_at_s": None}
        longest = max(waits, key=lambda item: item[1])
        return {
            "pings": len(waits),
            "max_pong_wait_ms": longest[1] * 1000,
            "p50_pong_wait_ms": percentile([wait * 1000 for _, wait in waits], 50),
            "longest_sent_at_s": longest[0] - start,  # when its ping went out, from the start of the window
        }


@dataclass
class LoopLag:
    """How late the driver's own event loop wakes from a short sleep: a pong wait it shares is not the server's."""

    period: float = 0.005
    lags: list[tuple[float, float]] = field(default_factory=list)  # (woke at, seconds late)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        while not self.stopping.is_set():
            before = time.perf_counter()
            await asyncio.sleep(self.period)
            woke = time.perf_counter()
            self.lags.append((woke, woke - before - self.period))

    def during(self, start: float, end: float) -> float | None:
        """The longest lag (ms) of the sleeps that overlapped [start, end]."""
        late = [lag for woke, lag in self.lags if woke >= start and woke - lag - self.period <= end]
        return max(late) * 1000 if late else None


# --- the uploads -----------------------------------------------------------------------------------


async def upload(api: Api, conversation_id: str, path: Path, content_type: str) -> dict[str, Any]:
    body = path.read_bytes()
    headers = {"Authorization": f"Bearer {api.token}", "Accept": "application/json"}
    result: dict[str, Any] = {"file": path.name, "size_bytes": len(body)}
    started = time.perf_counter()
    try:
        response = await api.client.post(
            upload_path(conversation_id),
            files={"file": (path.name, body, content_type)},
            headers=headers,
            timeout=UPLOAD_TIMEOUT,
        )
    except httpx.HTTPError as exc:
        result.update({"status": None, "seconds": time.perf_counter() - started, "error": repr(exc)[:300]})
        return result
    result.update({"status": response.status_code, "seconds": time.perf_counter() - started})
    try:
        answer = response.json()
    except ValueError:
        answer = {"error": response.text[:300]}
    if response.status_code == 201:
        result.update({key: answer.get(key) for key in ("kind", "parse_status", "meta")})
    else:
        result.update({"code": answer.get("code"), "error": str(answer.get("error"))[:300]})
    return result


# --- the hostile bodies ----------------------------------------------------------------------------


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, dict]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    status = int(head.split(" ", 2)[1])
    length = next(
        (int(line.split(":", 1)[1]) for line in head.split("\r\n") if line.lower().startswith("content-length")), 0
    )
    body = await reader.readexactly(length) if length else b""
    try:
        return status, json.loads(body) if body else {}
    except ValueError:
        return status, {"error": body[:300].decode("latin-1")}


async def raw_post(server: Server, path: str, headers: dict[str, str], body_chunks) -> dict[str, Any]:
    """The request's head, then its body chunk by chunk, as a hostile client would: all of it, answered or not.

    Reported: the answer; the bytes sent before it came and how long it took; then how long pushing the
    rest took (the server reads and drops it) and how that ended.
    """
    reader, writer = await asyncio.open_connection(HOST, server.port)
    head = f"POST {path} HTTP/1.1\r\nHost: {HOST}:{server.port}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
    state = {"sent": 0}
    started = time.perf_counter()
    writer.write(head.encode())
    answer = asyncio.ensure_future(_read_answer(reader))

    def answered(_) -> None:
        state.update(answered=time.perf_counter(), sent_before_answer=state["sent"])

    answer.add_done_callback(answered)
    ended = "all sent"
    result: dict[str, Any] = {"started": started}
    try:
        async with asyncio.timeout(REFUSAL_TIMEOUT):
            for chunk in body_chunks:
                if writer.transport.is_closing():
                    ended = "the server closed the connection"
                    break
                writer.write(chunk)
                try:
                    await writer.drain()
                except ConnectionError:
                    ended = "the server cut the connection"
                    break
                state["sent"] += len(chunk)
            status, body = await answer
        result.update({"status": status, "code": body.get("code"), "error": body.get("error")})
    except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, ValueError) as exc:
        answer.cancel()
        ended = "not all sent" if ended == "all sent" else ended
        result.update({"status": None, "error": repr(exc)[:300]})
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    ending = time.perf_counter()
    result.update(
        {
            "bytes_sent_before_answer": state.get("sent_before_answer"),
            "seconds_to_answer": state["answered"] - started if "answered" in state else None,
            "answered": state.get("answered"),
            "bytes_sent": state["sent"],
            "seconds": ending - started,
            "ended": ended,
            "ending": ending,
        }
    )
    return result


def chunked(total: int, size: int = 256 * 1024):
    piece = b"%x\r\n" % size + b"x" * size + b"\r\n"
    for _ in range(total // size):
        yield piece
    yield b"0\r\n\r\n"


def fmt_bytes(value: int | None) -> str:
    return "?" if value is None else f"{value:,} bytes"


# --- the phase -------------------------------------------------------------------------------------


async def measure_front_door(stack: Stack, api: Api, work_dir: Path, size: int = DEFAULT_SIZE) -> dict[str, Any]:
    server = stack.servers[0]
    work_dir.mkdir(parents=True, exist_ok=True)
    made = time.perf_counter()
    files = {}
    for kind, (make, content_type) in MAKERS.items():
        path = work_dir / f"bench-10mb.{kind}"
        files[kind] = (path, content_type, await asyncio.to_thread(make, path, size))
    report: dict[str, Any] = {"server": server.name, "files_made_s": time.perf_counter() - made}
    log(f"front door: files made in {report['files_made_s']:.1f} s; uploading them one after the other")

    token = await api.sign_in()
    conversations = await api.conversations(1 + PING_SOCKETS, "front door")
    target, ping_conversations = conversations[0], conversations[1:]
    sockets = await open_sockets([server], ping_conversations, token)
    pinger, lag = Pinger(list(sockets)), LoopLag()
    pings, lagging = asyncio.create_task(pinger.run()), asyncio.create_task(lag.run())

    def window(start: float, end: float) -> dict[str, Any]:
        return {**pinger.during(start, end), "driver_loop_lag_max_ms": lag.during(start, end)}

    sampler = MemorySampler([server])
    sampler.start()
    uploads, refusals = [], []
    try:
        await asyncio.sleep(0.5)  # the pings' own pace, before anything else happens
        report["pings_before"] = window(0, time.perf_counter())
        for kind, (path, content_type, made_info) in files.items():
            start = time.perf_counter()
            result = await upload(api, target, path, content_type)
            result.update({"format": kind, "made": made_info, **window(start, time.perf_counter())})
            uploads.append(result)
            log(f"front door: {kind} {result['size_bytes']:,} bytes → {result['status']} in {result['seconds']:.2f} s")
        multipart = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json",
            "Content-Type": "multipart/form-data; boundary=x",
        }
        hostile = (
            ("declared", {**multipart, "Content-Length": str(HOSTILE)}, lambda: (b"x" * MiB for _ in range(60))),
            ("chunked", {**multipart, "Transfer-Encoding": "chunked"}, lambda: chunked(HOSTILE)),
        )
        refusing = time.perf_counter()
        for name, headers, body in hostile:
            result = await raw_post(server, upload_path(target), headers, body())
            started, answered, ending = result.pop("started"), result.pop("answered"), result.pop("ending")
            result.update({"body": name, "bytes": HOSTILE, **window(started, ending)})
            result["to_the_answer"] = window(started, answered or ending)
            refusals.append(result)
            log(
                f"front door: 60 MB {name} → {result['status']} after {fmt_bytes(result['bytes_sent_before_answer'])}"
                f" sent; {fmt_bytes(result['bytes_sent'])} sent in all ({result['ended']})"
            )
        report["during_refusals"] = window(refusing, time.perf_counter())
        await asyncio.sleep(0.2)
    finally:
        pinger.stopping.set()
        lag.stopping.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(pings, 30)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(lagging, 5)
        sampler.stopping.set()
        await close_sockets(sockets)
    health = await api.client.get("/healthz")
    report.update(
        {
            "file_size_target_bytes": size,
            "uploads": uploads,
            "refusals": refusals,
            "ping_sockets": PING_SOCKETS,
            "pings": len(pinger.waits),
            "ping_errors": sorted(set(pinger.errors))[:5],
            "peak_rss_mb": sampler.peak()[server.name] / 1024,
            "healthz_after": health.status_code,
        }
    )
    return report
