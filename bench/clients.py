"""The clients `make bench` measures with: WebSocket clients of AgentChat and direct streams from the provider, each
timed by its own clock from its own send."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field

import aiohttp
import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from .checks import Integrity, check_stream
from .fake_provider import Pace, prompt
from .stack import BENCH_USER, Server

DIRECT_HEADERS = {"Authorization": "Bearer sk-bench-not-a-secret"}


@dataclass(frozen=True)
class StreamPlan:
    """One stream of a round, asked the same of the direct client and of AgentChat: the same length and pace."""

    name: str
    count: int
    pace: Pace

    def tag(self, leg: str) -> str:
        """The stream's tokens' tag on one leg (`direct` or `agentchat`): its name after the leg's initial."""
        return f"{leg[0]}{self.name}"

    def prompt(self, leg: str) -> str:
        return prompt(self.tag(leg), self.count, self.pace)


@dataclass
class StreamResult:
    sent: float = 0.0  # perf_counter when the request went out
    echo: float | None = None  # AgentChat: the user's message stored and echoed
    run_started: float | None = None
    first_token: float | None = None
    last_token: float | None = None
    finished: float | None = None
    tokens_text: list[str] = field(default_factory=list)
    frames: int = 0
    seqs: list[int] = field(default_factory=list)
    status: str = ""
    error: str = ""
    integrity: Integrity | None = None

    @property
    def ttft(self) -> float | None:
        return None if self.first_token is None else self.first_token - self.sent

    @property
    def streaming(self) -> float:
        if self.first_token is None or self.finished is None:
            return 0.0
        return self.finished - self.first_token


class Api:
    """The REST API of one server, as the bench user."""

    def __init__(self, server: Server, password: str):
        self.server = server
        self.password = password
        self.client = httpx.AsyncClient(base_url=server.http_url, timeout=60)
        self.token = ""

    async def sign_in(self) -> str:
        response = await self.client.post("/api/auth/token/", json={"username": BENCH_USER, "password": self.password})
        response.raise_for_status()
        self.token = response.json()["access"]
        return self.token

    async def conversations(self, count: int, label: str, parallel: int = 8) -> list[str]:
        gate = asyncio.Semaphore(parallel)
        headers = {"Authorization": f"Bearer {self.token}"}

        async def one(index: int) -> str:
            async with gate:
                response = await self.client.post(
                    "/api/assistant/conversations/", json={"title": f"bench {label} {index}"}, headers=headers
                )
                response.raise_for_status()
                return response.json()["id"]

        return await asyncio.gather(*(one(index) for index in range(count)))

    async def close(self) -> None:
        await self.client.aclose()


async def open_socket(server: Server, conversation_id: str, token: str, timeout: float = 60):
    """A chat socket, authenticated by its first frame, after its `ready`."""
    ws = await connect(
        server.ws_url(f"/ws/chat/{conversation_id}/"), open_timeout=timeout, max_size=2**22, ping_interval=None
    )
    try:
        await ws.send(json.dumps({"type": "auth", "token": token}))
        async with asyncio.timeout(timeout):
            while True:
                frame = json.loads(await ws.recv())
                if frame["type"] == "ready":
                    return ws
                if frame["type"] == "error":
                    raise RuntimeError(f"socket refused: {frame}")
    except BaseException:
        await ws.close()
        raise


async def open_sockets(
    servers: list[Server], conversations: list[str], token: str, parallel: int = 50, tolerate: bool = False
) -> list:
    """Sockets to the conversations, spread over the servers, `parallel` handshakes at a time.

    With `tolerate`, a socket that did not open is its exception in the list; otherwise the others are
    closed and the first failure raised.
    """
    gate = asyncio.Semaphore(parallel)

    async def one(index: int):
        async with gate:
            return await open_socket(servers[index % len(servers)], conversations[index], token)

    results = await asyncio.gather(*(one(index) for index in range(len(conversations))), return_exceptions=True)
    failed = [result for result in results if isinstance(result, BaseException)]
    if failed and not tolerate:
        await close_sockets([result for result in results if not isinstance(result, BaseException)])
        raise RuntimeError(f"{len(failed)} of {len(results)} sockets did not open: {failed[0]!r}")
    return results


async def close_sockets(sockets: list, parallel: int = 50) -> None:
    """Close, `parallel` at a time: the bench measures streams, not a storm of disconnections."""
    gate = asyncio.Semaphore(parallel)

    async def one(ws) -> None:
        async with gate:
            with contextlib.suppress(ConnectionClosed, OSError, TimeoutError):
                await asyncio.wait_for(ws.close(), 5)

    await asyncio.gather(*(one(ws) for ws in sockets if not isinstance(ws, BaseException)))


async def not_opened(error: BaseException, plan: StreamPlan) -> StreamResult:
    result = StreamResult(error=f"the socket did not open: {error!r}"[:300])
    result.integrity = check_stream("", plan.tag("agentchat"), plan.count)
    return result


async def agentchat_stream(ws, plan: StreamPlan, start: asyncio.Event, timeout: float) -> StreamResult:
    result = StreamResult()
    run_id = None
    tag = plan.tag("agentchat")
    await start.wait()
    try:
        async with asyncio.timeout(timeout):
            result.sent = time.perf_counter()
            await ws.send(json.dumps({"type": "message", "content": plan.prompt("agentchat"), "client_id": tag}))
            while True:
                raw = await ws.recv()
                now = time.perf_counter()
                frame = json.loads(raw)
                result.frames += 1
                kind = frame.get("type")
                if "seq" in frame:
                    run_id = run_id or frame.get("run_id")
                    if frame.get("run_id") == run_id:
                        result.seqs.append(frame["seq"])
                    else:
                        result.error = f"a frame of another run arrived: {frame.get('run_id')}"
                if kind == "message" and result.echo is None:
                    result.echo = now
                elif kind == "run_started":
                    result.run_started = now
                if kind == "token":
                    if result.first_token is None:
                        result.first_token = now
                    result.last_token = now
                    result.tokens_text.append(frame["delta"])
                elif kind == "error":
                    result.error = f"{frame.get('code')}: {frame.get('message')}"
                elif kind == "run_finished":
                    result.finished = now
                    result.status = frame.get("status", "")
                    break
    except TimeoutError:
        result.error = result.error or f"no run_finished within {timeout:g} s"
    except ConnectionClosed as exc:
        result.error = f"socket closed: {exc}"
    result.integrity = check_stream("".join(result.tokens_text), tag, plan.count, result.seqs)
    return result


def direct_client(base_url: str) -> aiohttp.ClientSession:
    """The direct leg's HTTP client, as AgentChat's provider has it: aiohttp, its connections kept between rounds
    however many streams a level has."""
    connector = aiohttp.TCPConnector(limit=1000, keepalive_timeout=60)
    return aiohttp.ClientSession(f"{base_url.rstrip('/')}/", connector=connector, headers=DIRECT_HEADERS)


async def direct_stream(client: aiohttp.ClientSession, plan: StreamPlan, start: asyncio.Event, timeout: float):
    """One stream, asked for and read as AgentChat's provider does: one request through aiohttp, and each event's
    line taken as plain JSON. All of a level's direct streams run in this one process, so what each costs its
    client adds up: through the `openai` SDK, a request costs about three times the processor time, and the median
    first token of 200 streams came 30 ms later, of 50 streams 7 to 60 ms later; the added figures would shrink by
    as much."""
    result = StreamResult()
    body = {"model": "bench-model", "messages": [{"role": "user", "content": plan.prompt("direct")}], "stream": True}
    await start.wait()
    try:
        async with asyncio.timeout(timeout):
            result.sent = time.perf_counter()
            async with client.post("chat/completions", json=body) as response:
                response.raise_for_status()
                while line := await response.content.readline():
                    if not line.startswith(b"data:") or line.startswith(b"data: [DONE]"):
                        continue
                    now = time.perf_counter()
                    chunk = json.loads(line.removeprefix(b"data:"))
                    result.frames += 1
                    choice = (chunk.get("choices") or [{}])[0]
                    if content := (choice.get("delta") or {}).get("content"):
                        if result.first_token is None:
                            result.first_token = now
                        result.last_token = now
                        result.tokens_text.append(content)
                    if choice.get("finish_reason"):
                        result.status = "completed"
            result.finished = time.perf_counter()
    except TimeoutError:
        result.error = f"not finished within {timeout:g} s"
    except (aiohttp.ClientError, ValueError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    result.integrity = check_stream("".join(result.tokens_text), plan.tag("direct"), plan.count)
    return result
