"""What a real server process does with bodies and frames that are too large or malformed (agentchat/server.py):
an answer in the one error shape at once, and nobody else's socket kept waiting meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest
from asgiref.sync import sync_to_async
from rest_framework_simplejwt.tokens import AccessToken
from websockets.exceptions import ConnectionClosed

from conversations import services
from tests.servers import HOST, RemoteSocket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_thread_connections")]

MiB = 1024 * 1024
HOSTILE = 60 * MiB
PING_WAIT = 1.0  # the longest another person's socket may wait for an answer meanwhile


def upload_path(conversation) -> str:
    return f"/api/assistant/conversations/{conversation.pk}/attachments/"


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, dict]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    status = int(head.split(" ", 2)[1])
    length = next(
        int(line.split(":", 1)[1]) for line in head.split("\r\n") if line.lower().startswith("content-length")
    )
    return status, json.loads(await reader.readexactly(length))


async def post(server, path: str, headers: dict[str, str], body_chunks=()) -> tuple[tuple[int, dict], int]:
    """Send a request's head, then its body chunk by chunk until the server answers; (answer, bytes sent)."""
    reader, writer = await asyncio.open_connection(HOST, server.port)
    head = f"POST {path} HTTP/1.1\r\nHost: {HOST}:{server.port}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
    writer.write(head.encode())
    answer = asyncio.ensure_future(read_answer(reader))
    sent = 0
    try:
        for chunk in body_chunks:
            if answer.done():
                break
            writer.write(chunk)
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            sent += len(chunk)
            # drain() returns without yielding while the kernel takes the bytes, and a server that discards the
            # rest of a refused body keeps taking them: let the answer's reader see what has arrived.
            await asyncio.sleep(0)
        return await asyncio.wait_for(answer, 10), sent
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def chunked(total: int, size: int = 256 * 1024):
    piece = b"%x\r\n" % size + b"x" * size + b"\r\n"
    for _ in range(total // size):
        yield piece
    yield b"0\r\n\r\n"


async def ping_loop(socket: RemoteSocket, stop: asyncio.Event) -> int:
    """Ping until told to stop; each pong must come within PING_WAIT. How many were answered."""
    answered = 0
    while not stop.is_set():
        await socket.send({"type": "ping"})
        async with asyncio.timeout(PING_WAIT):
            assert (await socket.receive())["type"] == "pong"
        answered += 1
        await asyncio.sleep(0.01)
    return answered


async def test_a_60_mb_body_is_refused_at_once_and_nobody_else_waits(daphnes, alice, bob):
    [server] = await asyncio.to_thread(daphnes, 1)
    alices = await sync_to_async(services.conversation_create)(owner=alice)
    bobs = await sync_to_async(services.conversation_create)(owner=bob)
    bob_socket = await RemoteSocket.open(server, f"/ws/chat/{bobs.pk}/", token=str(AccessToken.for_user(bob)))
    stop = asyncio.Event()
    pings = asyncio.ensure_future(ping_loop(bob_socket, stop))
    multipart = {"Content-Type": "multipart/form-data; boundary=x"}
    try:
        # Declared: answered from the head alone, none of the body sent.
        declared = {**multipart, "Content-Length": str(HOSTILE)}
        (status, body), sent = await post(server, upload_path(alices), declared, [b"x" * MiB] * 60)
        assert (status, body["code"]) == (413, "TOO_LARGE")
        assert "10 MB" in body["error"]
        # Undeclared (chunked): answered once the limit is passed, long before the 60 MB are through.
        streamed = {**multipart, "Transfer-Encoding": "chunked"}
        (status, body), sent = await post(server, upload_path(alices), streamed, chunked(HOSTILE))
        assert (status, body["code"]) == (413, "TOO_LARGE")
        assert sent < HOSTILE / 2
        # Any other route takes 1 MB.
        (status, body), _ = await post(server, "/api/auth/token/", {**multipart, "Content-Length": str(2 * MiB)})
        assert (status, body["code"]) == (413, "TOO_LARGE")
        assert "1 MB" in body["error"]
    finally:
        stop.set()
        answered = await pings
        await bob_socket.close()
    assert answered > 0
    status, _ = await asyncio.to_thread(server.request, "GET", "/healthz")
    assert status == 200


async def test_bodies_that_cannot_be_read_get_the_one_error_shape(daphnes, alice):
    [server] = await asyncio.to_thread(daphnes, 1)
    conversation = await sync_to_async(services.conversation_create)(owner=alice)
    token = str(AccessToken.for_user(alice))

    (status, body), _ = await post(
        server, "/api/auth/token/", {"Transfer-Encoding": "chunked"}, [b"zz\r\nnot a chunk\r\n"]
    )
    assert (status, body) == (400, {"error": "The request is malformed.", "code": "INVALID"})

    broken = b"--x\r\nContent-Disposition: form-data; name=file; filename=a.csv\r\n\r\na,b\r\n"  # never closed
    (status, body), _ = await post(
        server,
        upload_path(conversation),
        {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json",
            "Content-Type": "multipart/form-data; boundary=x",
            "Content-Length": str(len(broken)),
        },
        [broken],
    )
    assert status == 400
    assert body["code"] == "INVALID"
    assert set(body) >= {"error", "code"}


async def test_a_refusal_is_worded_in_the_readers_language(daphnes):
    [server] = await asyncio.to_thread(daphnes, 1)
    too_long = {"Content-Type": "application/json", "Content-Length": str(2 * MiB)}

    (status, body), _ = await post(server, "/api/auth/token/", {**too_long, "Accept-Language": "ru-RU,ru;q=0.9"})
    assert (status, body) == (
        413,
        {"error": "Тело запроса больше 1 МБ — это наибольший допустимый размер.", "code": "TOO_LARGE"},
    )
    # The language cookie wins over the header, as it does for every page.
    (status, body), _ = await post(
        server, "/api/auth/token/", {**too_long, "Accept-Language": "en", "Cookie": "theme=dark; django_language=ru"}
    )
    assert body["error"].startswith("Тело запроса больше 1 МБ")
    (status, body), _ = await post(
        server, "/api/auth/token/", {"Transfer-Encoding": "chunked", "Accept-Language": "ru"}, [b"zz\r\nnope\r\n"]
    )
    assert (status, body) == (400, {"error": "Запрос составлен неправильно.", "code": "INVALID"})


async def test_frames_over_the_limit_are_answered_not_dropped(daphnes, alice):
    [server] = await asyncio.to_thread(daphnes, 1)
    conversation = await sync_to_async(services.conversation_create)(owner=alice)
    socket = await RemoteSocket.open(server, f"/ws/chat/{conversation.pk}/", token=str(AccessToken.for_user(alice)))
    try:
        await socket.send({"type": "message", "content": "a" * (2 * MiB), "client_id": "big"})
        frame = await socket.receive()
        assert (frame["type"], frame["code"]) == ("error", "TOO_LARGE")
        await socket.send({"type": "ping"})
        assert (await socket.receive())["type"] == "pong"

        await socket.send({"type": "message", "content": "a" * (5 * MiB), "client_id": "huge"})
        with pytest.raises(ConnectionClosed):
            await socket.receive()
        assert socket.connection.close_code == 1009
    finally:
        await socket.close()
    assert await sync_to_async(conversation.messages.count)() == 0
