"""The chat socket on the way in: who may open a chat socket, and what a socket may send.

Every socket goes through the real ASGI application (origin check → auth middleware → router → consumer).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import timedelta
from types import SimpleNamespace

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from rest_framework_simplejwt.tokens import AccessToken, RefreshToken
from websockets.exceptions import InvalidStatus

from agentchat.asgi import application
from conversations import consumers, runs, services
from conversations.models import AuditEvent, Message
from conversations.ratelimit import SharedWindow
from conversations.services import MAX_CONTEXT_DEPTH
from tests.fake_provider import Reply
from tests.servers import RemoteSocket

from .conftest import TIMEOUT, Socket

pytestmark = pytest.mark.django_db(transaction=True)

GOOD_ORIGIN = b"http://localhost:8000"


# --- helpers ------------------------------------------------------------------------------------------


@pytest.fixture
async def raw_sockets():
    """Sockets opened with headers of the test's choosing (cookie, origin); disconnected at the end."""
    opened: list[WebsocketCommunicator] = []

    async def open_raw(path: str, *, origin: bytes | None = GOOD_ORIGIN, cookie: str | None = None):
        headers = [(b"host", b"localhost:8000")]
        if origin is not None:
            headers.append((b"origin", origin))
        if cookie is not None:
            headers.append((b"cookie", cookie.encode()))
        communicator = WebsocketCommunicator(application, path, headers=headers)
        opened.append(communicator)
        connected, _ = await communicator.connect(timeout=TIMEOUT)
        return communicator, connected

    yield open_raw
    for communicator in opened:
        await communicator.disconnect()


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


@pytest.fixture
def alice_cookie(alice) -> str:
    return session_cookie(alice)


@pytest.fixture
def bob_cookie(bob) -> str:
    return session_cookie(bob)


def nested(levels: int) -> dict:
    """A context of `levels` objects, one inside the other."""
    context: dict = {}
    for _ in range(levels - 1):
        context = {"focus": context}
    return context


def chat_path(conversation_id) -> str:
    return f"/ws/chat/{conversation_id}/"


@sync_to_async
def stored_messages(conversation) -> int:
    return Message.objects.filter(conversation=conversation).count()


@sync_to_async
def auth_failures() -> list[dict]:
    return list(AuditEvent.objects.filter(kind=AuditEvent.Kind.AUTH_FAILED).values_list("data", flat=True))


@sync_to_async
def deactivate(user) -> None:
    user.is_active = False
    user.save(update_fields=["is_active"])


async def expect_error(socket: Socket, code: str) -> dict:
    frame = await socket.receive()
    assert frame["type"] == "error", frame
    assert frame["code"] == code, frame
    assert isinstance(frame["message"], str) and frame["message"], frame
    return frame


async def expect_close(communicator: WebsocketCommunicator, code: int) -> None:
    assert await communicator.receive_output(timeout=TIMEOUT) == {"type": "websocket.close", "code": code}


async def still_works(socket: Socket) -> None:
    await socket.send({"type": "ping"})
    assert await socket.receive() == {"type": "pong"}
    assert await socket.nothing(0.05)


def expired_access(user) -> str:
    token = AccessToken.for_user(user)
    token.set_exp(lifetime=-timedelta(seconds=1))
    return str(token)


# --- authentication -------------------------------------------------------------------------------------


async def test_session_cookie_authenticates_without_an_auth_frame(raw_sockets, conversation, alice_cookie):
    communicator, connected = await raw_sockets(chat_path(conversation.pk), cookie=alice_cookie)
    assert connected
    socket = Socket(communicator)
    assert await socket.receive() == {
        "type": "ready",
        "conversation_id": str(conversation.pk),
        "run": None,
        "pending_confirmations": [],
    }
    await still_works(socket)


async def test_session_cookie_of_someone_else_is_not_found(raw_sockets, conversation, bob_cookie):
    communicator, connected = await raw_sockets(chat_path(conversation.pk), cookie=bob_cookie)
    assert connected
    await expect_error(Socket(communicator), "NOT_FOUND")
    await expect_close(communicator, consumers.CLOSE_NOT_FOUND)


async def test_first_frame_jwt_gives_ready(sockets, conversation, alice):
    socket = await sockets(conversation, ready=False)
    await socket.send({"type": "auth", "token": str(AccessToken.for_user(alice))})
    assert await socket.receive() == {
        "type": "ready",
        "conversation_id": str(conversation.pk),
        "run": None,
        "pending_confirmations": [],
    }
    await still_works(socket)
    assert await auth_failures() == []


async def test_frames_before_auth_get_auth_required_and_change_nothing(sockets, conversation, alice):
    socket = await sockets(conversation, ready=False)
    for frame in [
        {"type": "message", "content": "Hi", "client_id": "c1"},
        {"type": "ping"},
        {"type": "cancel"},
        {"type": "confirm", "confirmation_id": str(uuid.uuid4()), "decision": "approve"},
        {"type": "no-such-type"},
    ]:
        await socket.send(frame)
        await expect_error(socket, "AUTH_REQUIRED")
    assert await socket.nothing()
    assert await stored_messages(conversation) == 0
    # The socket stays open: signing in now still works, and the earlier message was not kept.
    await socket.send({"type": "auth", "token": str(AccessToken.for_user(alice))})
    ready = await socket.receive()
    assert ready["type"] == "ready" and ready["run"] is None
    assert await socket.nothing()
    assert await stored_messages(conversation) == 0


async def test_no_auth_within_the_timeout_closes_the_socket(monkeypatch, sockets, conversation):
    monkeypatch.setattr(consumers, "AUTH_TIMEOUT", 0.3)
    socket = await sockets(conversation, ready=False)
    started = time.monotonic()
    await expect_error(socket, "AUTH_REQUIRED")
    assert time.monotonic() - started >= 0.25
    await expect_close(socket.communicator, consumers.CLOSE_UNAUTHENTICATED)


async def test_auth_in_time_cancels_the_timeout(monkeypatch, sockets, conversation, alice):
    monkeypatch.setattr(consumers, "AUTH_TIMEOUT", 0.3)
    socket = await sockets(conversation, alice)
    assert await socket.nothing(0.5)
    await still_works(socket)


@pytest.mark.parametrize(
    "make_token",
    [
        pytest.param(lambda user: "not-a-jwt", id="garbage"),
        pytest.param(lambda user: str(AccessToken.for_user(user))[:-4] + "AAAA", id="bad-signature"),
        pytest.param(expired_access, id="expired"),
        pytest.param(lambda user: str(RefreshToken.for_user(user)), id="refresh-as-access"),
    ],
)
async def test_a_bad_token_is_refused_closed_and_audited(sockets, conversation, alice, make_token):
    socket = await sockets(conversation, ready=False)
    await socket.send({"type": "auth", "token": make_token(alice)})
    await expect_error(socket, "AUTH_REQUIRED")
    await expect_close(socket.communicator, consumers.CLOSE_UNAUTHENTICATED)
    failures = await auth_failures()
    assert len(failures) == 1
    assert failures[0]["via"] == "websocket"
    assert failures[0]["path"] == chat_path(conversation.pk)


@pytest.mark.parametrize("token", [None, "", 42, ["a"]], ids=["missing", "empty", "number", "list"])
async def test_an_auth_frame_without_a_usable_token_is_refused(sockets, conversation, token):
    socket = await sockets(conversation, ready=False)
    frame = {"type": "auth"} if token is None else {"type": "auth", "token": token}
    await socket.send(frame)
    await expect_error(socket, "AUTH_REQUIRED")
    await expect_close(socket.communicator, consumers.CLOSE_UNAUTHENTICATED)
    assert len(await auth_failures()) == 1


async def test_the_token_of_an_inactive_user_is_refused(sockets, conversation, alice):
    token = str(AccessToken.for_user(alice))
    await deactivate(alice)
    socket = await sockets(conversation, ready=False)
    await socket.send({"type": "auth", "token": token})
    frame = await socket.receive()
    assert frame["type"] == "error" and frame["code"] in {"AUTH_REQUIRED", "FORBIDDEN"}, frame
    close = await socket.communicator.receive_output(timeout=TIMEOUT)
    assert close["type"] == "websocket.close"
    assert close["code"] in {consumers.CLOSE_UNAUTHENTICATED, consumers.CLOSE_FORBIDDEN}
    assert len(await auth_failures()) == 1


async def test_someone_elses_conversation_is_not_found(sockets, conversation, bob):
    socket = await sockets(conversation, ready=False)
    await socket.send({"type": "auth", "token": str(AccessToken.for_user(bob))})
    await expect_error(socket, "NOT_FOUND")
    await expect_close(socket.communicator, consumers.CLOSE_NOT_FOUND)


async def test_a_conversation_that_does_not_exist_is_not_found(sockets, alice):
    socket = await sockets(SimpleNamespace(pk=uuid.uuid4()), ready=False)
    await socket.send({"type": "auth", "token": str(AccessToken.for_user(alice))})
    await expect_error(socket, "NOT_FOUND")
    await expect_close(socket.communicator, consumers.CLOSE_NOT_FOUND)


async def test_a_foreign_origin_is_refused_at_the_handshake(raw_sockets, conversation, alice_cookie):
    communicator, connected = await raw_sockets(
        chat_path(conversation.pk), origin=b"http://evil.example", cookie=alice_cookie
    )
    assert connected is False
    assert await communicator.receive_nothing(0.1)  # no `ready`, not even for a signed-in user


async def test_a_script_that_sends_no_origin_may_connect_with_its_token(raw_sockets, conversation, alice):
    communicator, connected = await raw_sockets(chat_path(conversation.pk), origin=None)
    assert connected
    await communicator.send_json_to({"type": "auth", "token": str(AccessToken.for_user(alice))})
    assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "ready"


async def test_a_token_that_expires_while_open_closes_the_socket(sockets, conversation, alice):
    token = AccessToken.for_user(alice)
    token.set_exp(lifetime=timedelta(seconds=1.5))
    expires_at = token["exp"]
    socket = await sockets(conversation, token=str(token))
    await still_works(socket)
    await expect_error(socket, "AUTH_REQUIRED")
    assert time.time() >= expires_at - 0.05  # not before the token's expiry
    await expect_close(socket.communicator, consumers.CLOSE_UNAUTHENTICATED)


# --- frames that are not what the protocol allows ------------------------------------------------------------


async def test_a_frame_over_one_mib_is_too_large(sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    frame = {"type": "message", "content": "a" * (1024 * 1024), "client_id": "big"}
    await socket.send(frame)
    await expect_error(socket, "TOO_LARGE")
    await still_works(socket)
    assert await stored_messages(conversation) == 0


async def test_one_mib_counts_bytes_not_characters(sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    await socket.send({"type": "message", "content": "é" * 600_000, "client_id": "accents"})  # 1.2 MB
    await expect_error(socket, "TOO_LARGE")
    await still_works(socket)
    assert await stored_messages(conversation) == 0


async def test_a_frame_of_exactly_one_mib_is_accepted(sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    envelope = json.dumps({"type": "ping", "pad": ""})
    await socket.communicator.send_to(
        text_data=json.dumps({"type": "ping", "pad": "p" * (1024 * 1024 - len(envelope))})
    )
    assert await socket.receive() == {"type": "pong"}


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('{"type": "ping"', id="malformed-json"),
        pytest.param("not json at all", id="not-json"),
        pytest.param('[{"type": "ping"}]', id="array"),
        pytest.param('"ping"', id="string"),
        pytest.param("null", id="null"),
        pytest.param('{"content": "Hi"}', id="no-type"),
        pytest.param('{"type": 7, "content": "Hi"}', id="type-not-a-string"),
        pytest.param('{"type": "shout", "content": "Hi"}', id="unknown-type"),
        pytest.param('{"type": "MESSAGE", "content": "Hi"}', id="type-wrong-case"),
    ],
)
async def test_frames_outside_the_protocol_are_invalid(sockets, conversation, alice, text):
    socket = await sockets(conversation, alice)
    await socket.communicator.send_to(text_data=text)
    await expect_error(socket, "INVALID")
    await still_works(socket)
    assert await stored_messages(conversation) == 0


async def test_a_binary_frame_is_invalid(sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    await socket.communicator.send_to(bytes_data=b'{"type": "message", "content": "Hi"}')
    await expect_error(socket, "INVALID")
    await still_works(socket)
    assert await stored_messages(conversation) == 0


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({}, id="content-missing"),
        pytest.param({"content": None}, id="content-null"),
        pytest.param({"content": 42}, id="content-number"),
        pytest.param({"content": ["Hi"]}, id="content-list"),
        pytest.param({"content": {"text": "Hi"}}, id="content-object"),
        pytest.param({"content": ""}, id="content-empty"),
        pytest.param({"content": "  \n\t "}, id="content-blank"),
        pytest.param({"content": "Hi", "client_id": "c" * 65}, id="client-id-65-chars"),
        pytest.param({"content": "Hi", "client_id": 12345}, id="client-id-number"),
        pytest.param({"content": "Hi", "client_id": ["c1"]}, id="client-id-list"),
        pytest.param({"content": "Hi", "client_id": ""}, id="client-id-empty"),
        pytest.param({"content": "Hi", "attachments": "not-a-list"}, id="attachments-string"),
        pytest.param({"content": "Hi", "attachments": {"id": str(uuid.uuid4())}}, id="attachments-object"),
        pytest.param({"content": "Hi", "attachments": {}}, id="attachments-empty-object"),
        pytest.param({"content": "Hi", "attachments": ["not-a-uuid"]}, id="attachments-not-uuids"),
        pytest.param({"content": "Hi", "attachments": [123]}, id="attachments-numbers"),
        pytest.param({"content": "Hi", "context": "dashboard 42"}, id="context-string"),
        pytest.param({"content": "Hi", "context": [{"focus": 1}]}, id="context-list"),
        pytest.param({"content": "Hi", "context": []}, id="context-empty-list"),
        pytest.param({"content": "Hi", "context": 7}, id="context-number"),
        pytest.param({"content": "nul\x00here"}, id="content-nul"),
        pytest.param({"content": "Hi", "client_id": "c\x001"}, id="client-id-nul"),
        pytest.param({"content": "Hi", "context": {"focus": ["a\x00"]}}, id="context-value-nul"),
        pytest.param({"content": "Hi", "context": {"fo\x00cus": 1}}, id="context-key-nul"),
        pytest.param({"content": "half \ud800 a pair"}, id="content-lone-surrogate"),
        pytest.param({"content": "Hi", "client_id": "c\udfff"}, id="client-id-lone-surrogate"),
        pytest.param({"content": "Hi", "context": {"\udc00focus": 1}}, id="context-key-lone-surrogate"),
        pytest.param({"content": "Hi", "context": nested(MAX_CONTEXT_DEPTH + 1)}, id="context-too-deep"),
    ],
)
async def test_invalid_message_frames_store_nothing(llm, sockets, conversation, alice, fields):
    socket = await sockets(conversation, alice)
    await socket.send({"type": "message", **fields})
    await expect_error(socket, "INVALID")
    await still_works(socket)  # and no echo, no run: nothing else arrived
    assert await stored_messages(conversation) == 0
    assert llm.requests == []


async def test_a_context_nested_as_deep_as_allowed_is_accepted(llm, sockets, conversation, alice):
    llm.script(Reply(text="ok"))
    socket = await sockets(conversation, alice)
    await socket.send({"type": "message", "content": "Hi", "context": nested(MAX_CONTEXT_DEPTH)})
    frames = await socket.receive_until("run_finished")
    assert frames[0]["type"] == "message" and frames[-1]["status"] == "completed"


async def test_a_client_id_of_64_chars_is_accepted(llm, sockets, conversation, alice):
    llm.script(Reply(text="ok"))
    socket = await sockets(conversation, alice)
    await socket.send({"type": "message", "content": "Hi", "client_id": "c" * 64})
    frames = await socket.receive_until("run_finished")
    assert frames[0]["type"] == "message" and frames[0]["client_id"] == "c" * 64
    assert frames[-1]["status"] == "completed"


# --- limits ----------------------------------------------------------------------------------------------


async def test_more_messages_than_the_limit_per_minute_are_rate_limited(
    monkeypatch, settings, llm, sockets, conversation, alice
):
    settings.WS_MESSAGES_PER_MINUTE = 3
    monkeypatch.setattr(runs.manager, "limiter", SharedWindow(f"messages-{uuid.uuid4()}", 3, seconds=60))
    socket = await sockets(conversation, alice)
    for number in range(3):
        await socket.send({"type": "message", "content": f"Message {number}", "client_id": f"m{number}"})
        frames = await socket.receive_until("run_finished")
        assert frames[-1]["status"] == "completed", frames
    assert await stored_messages(conversation) == 6  # three questions, three answers

    await socket.send({"type": "message", "content": "One too many", "client_id": "m3"})
    await expect_error(socket, "RATE_LIMITED")
    assert await socket.nothing()
    # The limit is the user's, not the socket's: another tab of the same user is held back too.
    other = await sockets(conversation, alice)
    await other.send({"type": "message", "content": "From another tab", "client_id": "m4"})
    await expect_error(other, "RATE_LIMITED")
    assert await socket.nothing(0.1)
    assert await stored_messages(conversation) == 6
    await still_works(socket)


async def signed_in_by_cookie(raw_sockets, conversation, cookie: str) -> Socket:
    """A ready socket that has sent no frame yet (the auth frame counts against the frame budget too)."""
    communicator, connected = await raw_sockets(chat_path(conversation.pk), cookie=cookie)
    assert connected
    socket = Socket(communicator)
    assert (await socket.receive())["type"] == "ready"
    return socket


async def test_too_many_frames_from_one_socket_are_rate_limited(monkeypatch, raw_sockets, conversation, alice_cookie):
    monkeypatch.setattr(consumers, "MAX_FRAMES", 5)
    socket = await signed_in_by_cookie(raw_sockets, conversation, alice_cookie)
    for _ in range(6):
        await socket.send({"type": "ping"})
    for _ in range(5):
        assert await socket.receive() == {"type": "pong"}
    await expect_error(socket, "RATE_LIMITED")
    assert await socket.nothing()


async def test_a_socket_may_send_again_once_the_frame_window_has_passed(
    monkeypatch, raw_sockets, conversation, alice_cookie
):
    monkeypatch.setattr(consumers, "MAX_FRAMES", 2)
    monkeypatch.setattr(consumers, "FRAME_WINDOW", 0.3)
    socket = await signed_in_by_cookie(raw_sockets, conversation, alice_cookie)
    for _ in range(3):
        await socket.send({"type": "ping"})
    assert [await socket.receive() for _ in range(2)] == [{"type": "pong"}] * 2
    await expect_error(socket, "RATE_LIMITED")
    await asyncio.sleep(0.35)
    await still_works(socket)


async def test_ping_gets_pong(sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    await socket.send({"type": "ping"})
    assert await socket.receive() == {"type": "pong"}
    assert await socket.nothing()


@pytest.mark.parametrize(
    "origin",
    [b"http://localhost:9999", b"https://localhost:8000", b"http://localhost", b"http://127.0.0.1:8000"],
)
async def test_an_origin_other_than_this_sites_scheme_host_and_port_is_refused(
    raw_sockets, conversation, alice_cookie, origin
):
    _, connected = await raw_sockets(chat_path(conversation.pk), origin=origin, cookie=alice_cookie)
    assert connected is False


async def test_an_origin_csrf_trusts_may_connect(raw_sockets, conversation, alice_cookie, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://chat.example.com", "https://*.intranet.example"]
    for origin in (b"https://chat.example.com", b"https://team.intranet.example"):
        communicator, connected = await raw_sockets(chat_path(conversation.pk), origin=origin, cookie=alice_cookie)
        assert connected, origin
        assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "ready"
    _, connected = await raw_sockets(chat_path(conversation.pk), origin=b"http://chat.example.com", cookie=alice_cookie)
    assert connected is False


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_thread_connections")
async def test_a_real_server_takes_only_its_own_origin_and_path(daphnes, conversation, alice):
    [server] = await asyncio.to_thread(daphnes, 1)
    path, token = chat_path(conversation.pk), str(AccessToken.for_user(alice))
    own = await RemoteSocket.open(server, path, token=token)
    assert own.ready["conversation_id"] == str(conversation.pk)
    await own.close()
    port = server.origin.rsplit(":", 1)[1]
    for foreign in (f"http://127.0.0.1:{int(port) + 1}", f"https://127.0.0.1:{port}", "http://evil.example"):
        with pytest.raises(InvalidStatus) as refused:
            await RemoteSocket.open(server, path, token=token, origin=foreign)
        assert refused.value.response.status_code == 403
    for unknown in ("/ws/assistant/", f"/ws/chat/{conversation.pk}/extra/", "/ws/chat/not-a-uuid/", "/"):
        with pytest.raises(InvalidStatus) as refused:
            await RemoteSocket.open(server, unknown, token=token)
        assert refused.value.response.status_code == 403, unknown
    assert "Traceback" not in server.tail()


async def test_a_user_may_hold_only_so_many_sockets(settings, sockets, conversation, alice, bob):
    settings.WS_SOCKETS_PER_USER = 2
    first = await sockets(conversation, alice)
    await sockets(conversation, alice)

    third = await sockets(conversation, alice, ready=False)
    await expect_error(third, "RATE_LIMITED")
    await expect_close(third.communicator, consumers.CLOSE_FORBIDDEN)
    bobs = await sockets(await sync_to_async(services.conversation_create)(owner=bob), bob)  # others are unaffected
    assert await bobs.quiet()

    await first.close()  # a closed one frees its place
    fourth = await sockets(conversation, alice)
    assert await fourth.quiet()


async def test_json_nested_too_deep_is_invalid_and_the_socket_stays(sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    await socket.communicator.send_to(text_data='{"type": "ping", "x": ' + "[" * 5000 + "]" * 5000 + "}")
    await expect_error(socket, "INVALID")

    deep: dict = {}
    for _ in range(40):
        deep = {"inner": deep}
    await socket.send({"type": "message", "content": "hello", "client_id": "deep", "context": deep})
    refused = await expect_error(socket, "INVALID")
    assert "16 levels" in refused["message"]
    assert await stored_messages(conversation) == 0
    assert await socket.quiet()
