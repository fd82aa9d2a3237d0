"""Sockets against the real ASGI application: origin check, auth middleware, router, consumer, runs."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import connections
from rest_framework_simplejwt.tokens import AccessToken

from agentchat.asgi import application
from conversations import runs, services
from conversations.ratelimit import SharedWindow
from tests.servers import RemoteSocket, start_daphnes

TIMEOUT = 5

# The tests with several server processes need both; CI's second pass has them.
ON_POSTGRES_AND_REDIS = settings.DATABASES["default"]["ENGINE"].endswith("postgresql") and bool(
    getattr(settings, "REDIS_URL", "")
)
needs_postgres_and_redis = pytest.mark.skipif(
    not ON_POSTGRES_AND_REDIS, reason="needs PostgreSQL and Redis: runs in CI's second pass"
)
HEARTBEAT = 3  # RUN_HEARTBEAT_TIMEOUT of the servers (tests/servers.py) and of this process


@pytest.fixture(autouse=True)
async def _isolated_runs(monkeypatch):
    """The run manager outlives tests: each starts with its own message budget and leaves no run behind."""
    monkeypatch.setattr(runs.manager, "limiter", SharedWindow(f"messages-{uuid.uuid4()}", 10_000, seconds=60))
    yield
    left = [task for task in asyncio.all_tasks() if task.get_name().startswith("run ") and not task.done()]
    if left:
        await asyncio.wait(left, timeout=5)


class Socket:
    """A WebsocketCommunicator with the frame helpers every test wants."""

    def __init__(self, communicator: WebsocketCommunicator):
        self.communicator = communicator

    async def send(self, frame: dict[str, Any]) -> None:
        await self.communicator.send_json_to(frame)

    async def receive(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        return await self.communicator.receive_json_from(timeout=timeout)

    async def receive_until(self, kind: str, timeout: float = TIMEOUT, **match) -> list[dict[str, Any]]:
        """Every frame up to and including the first of type `kind` whose fields match."""
        frames = []
        async with asyncio.timeout(timeout):
            while True:
                frame = await self.receive(timeout)
                frames.append(frame)
                if frame["type"] == kind and all(frame.get(key) == value for key, value in match.items()):
                    return frames

    async def nothing(self, timeout: float = 0.2) -> bool:
        """No frame within `timeout`: for a socket that cannot answer a ping (not signed in, or flooded)."""
        return await self.communicator.receive_nothing(timeout=timeout)

    async def quiet(self) -> bool:
        """Nothing was sent to this signed-in socket: a ping sent now is answered before any other frame."""
        await self.send({"type": "ping"})
        return await self.receive() == {"type": "pong"}

    async def close(self) -> None:
        await self.communicator.disconnect()


@pytest.fixture
async def sockets():
    """Open sockets, each disconnected at the end of the test."""
    opened: list[Socket] = []

    async def open_socket(
        conversation, user=None, *, token: str | None = None, origin: bytes = b"http://localhost:8000", ready=True
    ) -> Socket:
        communicator = WebsocketCommunicator(
            application, f"/ws/chat/{conversation.pk}/", headers=[(b"origin", origin), (b"host", b"localhost:8000")]
        )
        connected, _ = await communicator.connect(timeout=TIMEOUT)
        assert connected
        socket = Socket(communicator)
        opened.append(socket)
        if user is not None or token is not None:
            await socket.send({"type": "auth", "token": token or str(AccessToken.for_user(user))})
        if ready:
            frame = await socket.receive()
            assert frame["type"] == "ready", frame
            socket.ready = frame
        return socket

    yield open_socket
    for socket in opened:
        await socket.close()


@pytest.fixture
async def conversation(alice):
    return await sync_to_async(services.conversation_create)(owner=alice)


@pytest.fixture
async def close_thread_connections():
    """This process's database connection in asgiref's sync thread (fixtures use it) is closed after the test.

    With the consumers in server processes nothing else closes it; left open, it keeps PostgreSQL from
    dropping the test database at the end of the run.
    """
    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture
async def remote_sockets():
    """Open sockets on server processes; each is closed at the end of the test."""
    opened: list[RemoteSocket] = []

    async def open_socket(server, conversation, user) -> RemoteSocket:
        socket = await RemoteSocket.open(server, f"/ws/chat/{conversation.pk}/", token=str(AccessToken.for_user(user)))
        opened.append(socket)
        return socket

    yield open_socket
    for socket in opened:
        await socket.close()


@pytest.fixture
def daphnes(settings, fake_llm, tmp_path, transactional_db):
    """Start daphne processes: `daphnes(2)`; every one is stopped at the end, whatever happened."""
    settings.RUN_HEARTBEAT_TIMEOUT = timedelta(seconds=HEARTBEAT)
    started = []

    def start(count: int = 2, *, preload=(), env: dict[str, str] | None = None):
        servers = start_daphnes(count, env, llm=fake_llm, preload=preload, log_dir=tmp_path)
        started.extend(servers)
        return servers

    yield start
    for server in started:
        server.stop()
    for server in started:  # shown under "Captured stdout teardown" when the test failed
        print(f"----- {server.name} (port {server.port}): {server.log_path}\n{server.tail(60)}")
