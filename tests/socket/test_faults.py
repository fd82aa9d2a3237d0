"""Faults during a run: what a person sees when Redis restarts, PostgreSQL goes away for a while, or the
provider stalls, fails or cuts its stream.

The Redis and PostgreSQL faults are real: a private redis-server that the test kills and starts again (never
the shared one), and a TCP proxy in front of PostgreSQL that the test cuts. They need real daphne processes on
PostgreSQL + Redis, so they run in CI's second pass; the provider faults run in both passes, in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.db import connection
from django.utils import timezone
from rest_framework_simplejwt.tokens import AccessToken
from websockets.exceptions import ConnectionClosed

from conversations import services
from conversations.consumers import CLOSE_SERVER_ERROR
from conversations.models import Conversation, Message
from tests.fake_provider import Reply
from tests.servers import RemoteSocket, database_url
from tests.tcp_proxy import TCPProxy

from .conftest import needs_postgres_and_redis
from .helpers import of

pytestmark = pytest.mark.django_db(transaction=True)

OUTAGE = 5.0  # seconds PostgreSQL is unreachable
REDIS_DOWN = 1.0  # seconds Redis is gone before it starts again, empty
KEY = "sk-test-SECRET-123"
STALL = 10.0  # seconds a stalled provider stays silent


# --- fixtures ----------------------------------------------------------------------------------------


@pytest.fixture
def database_proxy():
    """A cuttable TCP proxy in front of this test run's PostgreSQL server."""
    config = connection.settings_dict
    with TCPProxy((config.get("HOST") or "127.0.0.1", int(config.get("PORT") or 5432))) as proxy:
        yield proxy
        proxy.restore()


def through(proxy: TCPProxy) -> str:
    """The test database's URL, by way of the proxy."""
    parts = urlsplit(database_url())
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@" if credentials else ""
    return urlunsplit(parts._replace(netloc=f"{netloc}{proxy.host}:{proxy.port}"))


# --- helpers -----------------------------------------------------------------------------------------


def text_of(frames) -> str:
    return "".join(frame["delta"] for frame in of(frames, "token"))


def token_for(user) -> str:
    return str(AccessToken.for_user(user))


def history_path(conversation) -> str:
    return f"/api/assistant/conversations/{conversation.pk}/history/"


@database_sync_to_async
def stored_messages(conversation) -> list[Message]:
    return list(conversation.messages.order_by("created_at", "id"))


@database_sync_to_async
def gate_holder(conversation):
    return Conversation.objects.values_list("active_run_id", flat=True).get(pk=conversation.pk)


async def run_settled(conversation) -> bool:
    """The gate is released and no answer is left `streaming`."""
    if await gate_holder(conversation) is not None:
        return False
    return all(m.status != Message.Status.STREAMING for m in await stored_messages(conversation))


async def frames_until_finished(socket: RemoteSocket, timeout: float) -> tuple[list[dict], str]:
    """Frames until `run_finished` ("finished"), the socket's close ("closed") or `timeout` ("waiting")."""
    frames: list[dict] = []
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            while True:
                try:
                    frame = await socket.receive(timeout)
                except ConnectionClosed:
                    return frames, "closed"
                frames.append(frame)
                if frame["type"] == "run_finished":
                    return frames, "finished"
    return frames, "waiting"


async def eventually(check, timeout: float, message: str, interval: float = 0.1):
    """Wait until `await check()` is truthy and return it; fail with `message` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (result := await check()):
        assert time.monotonic() < deadline, message
        await asyncio.sleep(interval)
    return result


async def frames_of_another_run(socket: RemoteSocket, earlier_run_id: str, timeout: float = 10):
    """(frames of the earlier run still arriving, frames of the next run up to its `run_finished`)."""
    earlier, later = [], []
    async with asyncio.timeout(timeout):
        while True:
            frame = await socket.receive(timeout)
            (earlier if frame.get("run_id") == earlier_run_id else later).append(frame)
            if frame["type"] == "run_finished" and frame["run_id"] != earlier_run_id:
                return earlier, later


def assert_no_repeats(frames) -> None:
    seqs = [frame["seq"] for frame in frames if "seq" in frame]
    assert seqs == sorted(set(seqs)), seqs


# --- Redis restarted mid-run -------------------------------------------------------------------------


@needs_postgres_and_redis
@pytest.mark.usefixtures("close_thread_connections")
async def test_redis_restarted_mid_run(daphnes, remote_sockets, private_redis, fake_llm, conversation, alice):
    text = "".join(f"part{index:02d} " for index in range(48))  # 48 chunks 60 ms apart: about 3 s of stream
    fake_llm.script(Reply(text=text, chunk_chars=7, interval=0.06), Reply(text="Back to normal."))
    server = (await asyncio.to_thread(daphnes, 1, env={"REDIS_URL": private_redis.url}))[0]
    socket = await remote_sockets(server, conversation, alice)

    await socket.send({"type": "message", "content": "Take your time.", "client_id": "redis-1"})
    before = await socket.receive_until("token")
    while len(of(before, "token")) < 5:
        before.append(await socket.receive())
    run_id = of(before, "run_started")[0]["run_id"]

    await asyncio.to_thread(private_redis.kill)
    during, outcome = await frames_until_finished(socket, REDIS_DOWN)
    await asyncio.to_thread(private_redis.start)
    if outcome == "waiting":
        more, outcome = await frames_until_finished(socket, 15)
        during += more
    frames = before + during

    # The page either hears how the run ended or sees its socket close, and so reconnects and resyncs.
    assert outcome in {"finished", "closed"}, frames
    assert_no_repeats(frames)
    assert text.startswith(text_of(before))
    if outcome == "finished":
        assert frames[-1]["status"] in {"completed", "failed"}, frames
    else:
        assert socket.connection.close_code == CLOSE_SERVER_ERROR  # a code the page reconnects after

    # Reconnected at once (the page waits a little longer): joining a run still going, or after it ended.
    page = await remote_sockets(server, conversation, alice)
    assert page.ready["pending_confirmations"] == []
    if page.ready["run"] is not None:
        assert page.ready["run"]["run_id"] == run_id
        rest = await page.receive_until("run_finished", timeout=15, run_id=run_id)
        assert rest[-1]["status"] in {"completed", "failed"}, rest
        assert_no_repeats(rest)

    await eventually(lambda: run_settled(conversation), 10, "the run never released its gate or its answer")
    messages = await stored_messages(conversation)
    assert [m.role for m in messages] == [Message.Role.USER, Message.Role.ASSISTANT]
    question, answer = messages
    assert (question.content, question.client_id) == ("Take your time.", "redis-1")
    assert answer.metadata["run_id"] == run_id
    if answer.status == Message.Status.COMPLETE:
        assert answer.content == text  # every token stored once, in order
    else:
        assert answer.status in {Message.Status.FAILED, Message.Status.INTERRUPTED}, answer.status
        assert answer.content and text.startswith(answer.content)

    # What the reconnected page loads is what is stored.
    shown = (await asyncio.to_thread(server.get_json, history_path(conversation), token_for(alice)))["results"]
    assert [(m["id"], m["role"], m["status"], m["content"]) for m in shown] == [
        (m.pk, m.role, m.status, m.content) for m in messages
    ]

    # The conversation is usable: the next message gets its whole answer.
    await page.send({"type": "message", "content": "Still there?", "client_id": "redis-2"})
    earlier, after = await frames_of_another_run(page, run_id)
    assert_no_repeats(earlier)
    assert not of(after, "error"), after
    assert of(after, "message")[0]["client_id"] == "redis-2"
    assert after[-1]["status"] == "completed"
    assert text_of(after) == "Back to normal."
    messages = await stored_messages(conversation)
    assert [(m.role, m.status) for m in messages] == [
        (Message.Role.USER, Message.Status.COMPLETE),
        (Message.Role.ASSISTANT, answer.status),
        (Message.Role.USER, Message.Status.COMPLETE),
        (Message.Role.ASSISTANT, Message.Status.COMPLETE),
    ]
    assert messages[-1].content == "Back to normal."


# --- PostgreSQL unreachable for a while --------------------------------------------------------------


@database_sync_to_async
def earlier_exchange(conversation, user) -> list[Message]:
    question, _ = services.message_append(
        conversation=conversation, role=Message.Role.USER, content="What is on the board?", actor=user
    )
    answer, _ = services.message_append(
        conversation=conversation, role=Message.Role.ASSISTANT, content="Three dashboards need review."
    )
    return [question, answer]


def fingerprint(messages) -> list[tuple]:
    return [(m.pk, m.role, m.content, m.status, m.client_id) for m in messages]


@needs_postgres_and_redis
@pytest.mark.usefixtures("close_thread_connections")
@pytest.mark.parametrize("pool_timeout", [1.0, 10.0], ids=["outage-longer-than-the-pool-waits", "pool-waits-it-out"])
async def test_postgres_unreachable_for_five_seconds_mid_run(
    daphnes, remote_sockets, database_proxy, fake_llm, conversation, alice, pool_timeout
):
    text = "".join(f"line{index:02d} " for index in range(30))  # 30 chunks 50 ms apart: ends during the outage
    fake_llm.script(Reply(text=text, chunk_chars=7, interval=0.05), Reply(text="Back again."))
    earlier = await earlier_exchange(conversation, alice)
    env = {"DATABASE_URL": through(database_proxy), "DATABASE_POOL_TIMEOUT": str(pool_timeout)}
    server = (await asyncio.to_thread(daphnes, 1, env=env))[0]
    socket = await remote_sockets(server, conversation, alice)

    await socket.send({"type": "message", "content": "Summarise the week.", "client_id": "pg-1"})
    frames = await socket.receive_until("token")
    run_id = of(frames, "run_started")[0]["run_id"]
    stored_before = await stored_messages(conversation)
    assert fingerprint(stored_before[:2]) == fingerprint(earlier)
    assert stored_before[2].content == "Summarise the week."

    database_proxy.cut()
    cut_at = time.monotonic()
    restore = asyncio.get_running_loop().call_later(OUTAGE, database_proxy.restore)
    try:
        frames += await socket.receive_until("run_finished", timeout=OUTAGE + 15)
    finally:
        restore.cancel()
        database_proxy.restore()
    finished_after = time.monotonic() - cut_at

    assert frames[-1]["run_id"] == run_id
    assert finished_after >= OUTAGE - 0.5, f"run_finished {finished_after:.1f} s after the cut: the database was away"
    assert_no_repeats(frames)
    seen = text_of(frames)
    assert seen and text.startswith(seen)
    errors = of(frames, "error")
    if pool_timeout < OUTAGE:
        # The answer could not be stored in time: the run fails, the person is told, and it says so only once its
        # answer is safely stored.
        assert len(errors) == 1 and errors[0]["code"] == "PROVIDER_ERROR", frames
        assert frames[-1]["status"] == "failed", frames
        kept = {Message.Status.FAILED, Message.Status.INTERRUPTED}
    else:
        # Its last steps waited for the database to come back: the whole answer, stored as it ended.
        assert not errors and frames[-1]["status"] == "completed", frames
        assert seen == text
        kept = {Message.Status.COMPLETE}

    # Nothing stored before the outage is lost; the answer is kept as far as it got, and not as streaming.
    messages = await stored_messages(conversation)
    assert fingerprint(messages[:3]) == fingerprint(stored_before[:3])
    assert len(messages) == 4, [(m.role, m.status, m.content[:20]) for m in messages]
    answer = messages[3]
    assert answer.role == Message.Role.ASSISTANT and answer.metadata["run_id"] == run_id
    assert answer.status in kept, answer.status
    assert answer.content == seen
    assert frames[-1]["message_id"] == answer.pk
    assert await gate_holder(conversation) is None

    # The server still serves, and the conversation takes the next message at once.
    assert server.running()
    status, _ = await asyncio.to_thread(server.request, "GET", history_path(conversation), token=token_for(alice))
    assert status == 200
    asked_at = time.monotonic()
    await socket.send({"type": "message", "content": "Are you back?", "client_id": "pg-2"})
    after = await socket.receive_until("run_finished", timeout=10)
    assert time.monotonic() - asked_at < 5
    assert not of(after, "error"), after
    assert after[-1]["status"] == "completed" and text_of(after) == "Back again."
    final = await stored_messages(conversation)
    assert fingerprint(final[:4]) == fingerprint(messages)
    assert [(m.role, m.content, m.status) for m in final[4:]] == [
        (Message.Role.USER, "Are you back?", Message.Status.COMPLETE),
        (Message.Role.ASSISTANT, "Back again.", Message.Status.COMPLETE),
    ]


@database_sync_to_async
def gate_and_text(conversation, message_id) -> tuple[Any, str]:
    """The gate's last heartbeat and the answer's text as stored."""
    heartbeat = Conversation.objects.values_list("active_run_heartbeat", flat=True).get(pk=conversation.pk)
    return heartbeat, Message.objects.values_list("content", flat=True).get(pk=message_id)


@needs_postgres_and_redis
@pytest.mark.usefixtures("close_thread_connections")
async def test_a_run_that_outlives_a_database_outage_completes_and_keeps_its_gate(
    daphnes, remote_sockets, database_proxy, fake_llm, conversation, alice
):
    # 250 chunks 50 ms apart: outlives the outage, and the pool's reconnecting after it, by seconds.
    text = "".join(f"word{index:03d} " for index in range(250))
    fake_llm.script(Reply(text=text, chunk_chars=8, interval=0.05), Reply(text="Never asked for."))
    server = (await asyncio.to_thread(daphnes, 1, env={"DATABASE_URL": through(database_proxy)}))[0]
    socket = await remote_sockets(server, conversation, alice)

    await socket.send({"type": "message", "content": "Tell me everything.", "client_id": "long-1"})
    frames = await socket.receive_until("token")
    message_id = of(frames, "run_started")[0]["message_id"]
    database_proxy.cut()
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(OUTAGE):
                while True:  # the answer streams on meanwhile
                    frames.append(await socket.receive())
                    assert frames[-1]["type"] != "run_finished", frames[-1]
    finally:
        database_proxy.restore()
    restored = timezone.now()

    # Back from the outage, the run beats its heart again (its gate had lapsed meanwhile) and writes its text.
    _, at_restore = await gate_and_text(conversation, message_id)

    async def beating_and_flushing():
        heartbeat, stored_text = await gate_and_text(conversation, message_id)
        return heartbeat is not None and heartbeat > restored and len(stored_text) > len(at_restore)

    await eventually(beating_and_flushing, 5, "after the outage the run neither beat its heart nor stored its text")
    await socket.send({"type": "message", "content": "Me too?", "client_id": "long-2"})
    frames += await socket.receive_until("run_finished", timeout=15)

    # Still one run at a time: the message sent meanwhile was refused, not answered by a second run.
    [busy] = of(frames, "error")
    assert busy["code"] == "BUSY", busy
    assert frames[-1]["status"] == "completed", frames[-1]
    assert_no_repeats(frames)
    assert text_of(frames) == text
    messages = await stored_messages(conversation)
    assert [(m.role, m.content, m.status) for m in messages] == [
        (Message.Role.USER, "Tell me everything.", Message.Status.COMPLETE),
        (Message.Role.ASSISTANT, text, Message.Status.COMPLETE),
    ]
    assert await gate_holder(conversation) is None
    assert len(fake_llm.requests) == 1


# --- the provider stalls, fails or cuts its stream --------------------------------------------------
# A stream cut after some text is tested in test_runs.py (test_provider_failures_fail_the_run_and_keep_the_text).


async def ask(socket, content: str, client_id: str) -> list[dict]:
    await socket.send({"type": "message", "content": content, "client_id": client_id})
    return await socket.receive_until("run_finished")


@sync_to_async
def stored(conversation) -> list[tuple[str, str, str]]:
    return [(m.role, m.content, m.status) for m in conversation.messages.order_by("created_at", "id")]


async def test_a_stalled_provider_fails_the_run_after_llm_timeout_and_keeps_the_text(
    llm, sockets, conversation, alice, settings
):
    settings.LLM_TIMEOUT = 1
    text = "Revenue grew by twelve percent."
    # Silent from the start, then silent after the role and three pieces of text: far longer than LLM_TIMEOUT.
    llm.script(Reply(text=text, stall=STALL), Reply(text=text, stall=STALL, stall_after=4), Reply(text="Awake again."))
    socket = await sockets(conversation, alice)

    asked = time.monotonic()
    silent = await ask(socket, "First", "stall-1")
    assert time.monotonic() - asked < STALL / 2
    [error] = of(silent, "error")
    assert error["code"] == "PROVIDER_ERROR" and "did not answer in time" in error["message"], error
    assert silent[-1]["status"] == "failed"
    assert not of(silent, "token")
    # The answer stays, without text, saying what went wrong: a reload shows where the run failed.
    [answer] = [frame["message"] for frame in of(silent, "message") if frame["message"]["role"] == "assistant"]
    assert answer["status"] == "failed" and "did not answer in time" in answer["error"], answer
    assert silent[-1]["message_id"] == answer["id"]
    assert await stored(conversation) == [("user", "First", "complete"), ("assistant", "", "failed")]

    asked = time.monotonic()
    halfway = await ask(socket, "Second", "stall-2")
    assert time.monotonic() - asked < STALL / 2
    [error] = of(halfway, "error")
    assert error["code"] == "PROVIDER_ERROR" and "stopped halfway" in error["message"], error
    assert halfway[-1]["status"] == "failed"
    assert text_of(halfway) == "Revenue g"
    assert await stored(conversation) == [
        ("user", "First", "complete"),
        ("assistant", "", "failed"),
        ("user", "Second", "complete"),
        ("assistant", "Revenue g", "failed"),
    ]
    assert len(llm.requests) == 2  # a timeout is not asked again

    after = await ask(socket, "Third", "stall-3")
    assert after[-1]["status"] == "completed" and text_of(after) == "Awake again."


async def test_a_provider_server_error_is_asked_once_more_then_fails_the_run(llm, sockets, conversation, alice):
    llm.script(
        Reply(status=502),
        Reply(text="Second time lucky."),
        Reply(status=500),
        Reply(status=503),
        Reply(text="Fine now."),
    )
    socket = await sockets(conversation, alice)

    retried = await ask(socket, "First", "5xx-1")
    [notice] = of(retried, "notice")
    assert notice["code"] == "PROVIDER_RETRY" and "HTTP 502" in notice["detail"], notice
    assert not of(retried, "error")
    assert retried[-1]["status"] == "completed" and text_of(retried) == "Second time lucky."

    failed = await ask(socket, "Second", "5xx-2")
    [notice] = of(failed, "notice")
    assert notice["code"] == "PROVIDER_RETRY" and "HTTP 500" in notice["detail"], notice
    [error] = of(failed, "error")
    assert error["code"] == "PROVIDER_ERROR" and "HTTP 503" in error["message"], error
    assert KEY not in error["message"]
    assert failed[-1]["status"] == "failed"
    assert await stored(conversation) == [
        ("user", "First", "complete"),
        ("assistant", "Second time lucky.", "complete"),
        ("user", "Second", "complete"),
        ("assistant", "", "failed"),
    ]
    assert KEY not in (await sync_to_async(conversation.messages.last)()).error

    after = await ask(socket, "Third", "5xx-3")
    assert after[-1]["status"] == "completed" and text_of(after) == "Fine now."
    assert len(llm.requests) == 5
