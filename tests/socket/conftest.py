"""Sockets against the real ASGI application: origin check, auth middleware, router, consumer, runs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from rest_framework_simplejwt.tokens import AccessToken

from agentchat.asgi import application
from conversations import runs as runs_module
from conversations import services

TIMEOUT = 5


@pytest.fixture(autouse=True)
async def _isolated_runs(monkeypatch):
    """The run manager outlives tests: each starts with its own message budget and leaves no run behind."""
    monkeypatch.setattr(runs_module.runs, "limiter", runs_module.MessageLimiter(10_000))
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
        return await self.communicator.receive_nothing(timeout=timeout)

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
