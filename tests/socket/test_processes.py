"""Scale-out (docs/operations.md): several daphne processes on PostgreSQL + Redis, real sockets over TCP.

Each test starts its own daphne processes (tests/servers.py) against the test database and Redis, with
the fake provider as LLM, and talks to them as a browser would: first-frame JWT, origin header, HTTP
with a bearer token. Rows are made in the test and committed (transactional db) so the servers see them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from redis import Redis
from rest_framework_simplejwt.tokens import AccessToken

from conversations import selectors, services
from conversations.models import Conversation, Message, PendingConfirmation
from tests.fake_provider import Reply

from .conftest import HEARTBEAT, needs_postgres_and_redis
from .helpers import of

pytestmark = [
    pytest.mark.django_db(transaction=True),
    needs_postgres_and_redis,
    pytest.mark.usefixtures("close_thread_connections"),
]

IDLE = 6.5  # longer than channels_redis's blocking read of the layer (5 s)
# tests/processes_tools.py, named here and not imported: importing it would put the tool in this process's registry.
TOOLS_MODULE = "tests.processes_tools"
TOOL_NAME = "processes_write_note"
TOOL_LOG_ENV = "AGENTCHAT_TEST_TOOL_LOG"
TOOL_DELAY_ENV = "AGENTCHAT_TEST_TOOL_DELAY"


def token_for(user) -> str:
    return str(AccessToken.for_user(user))


def active_path(conversation) -> str:
    return f"/api/agent/conversations/{conversation.pk}/active"


def history_path(conversation) -> str:
    return f"/api/assistant/conversations/{conversation.pk}/history/"


@database_sync_to_async
def stored_messages(conversation) -> list[Message]:
    return list(conversation.messages.order_by("created_at", "id"))


@database_sync_to_async
def active_here(conversation) -> bool:
    """The gate as this process's ORM sees it (with the same RUN_HEARTBEAT_TIMEOUT as the servers)."""
    return selectors.conversation_active_run(Conversation.objects.get(pk=conversation.pk))["active"]


async def test_a_run_on_one_process_streams_the_same_frames_to_sockets_on_another(
    daphnes, remote_sockets, fake_llm, conversation, alice
):
    text = "Two processes, one run: every socket of the conversation sees these tokens in this order. " * 2
    fake_llm.script(Reply(text=text, interval=0.02))
    a, b = await asyncio.to_thread(daphnes, 2)
    on_a = await remote_sockets(a, conversation, alice)
    on_b = await remote_sockets(b, conversation, alice)
    assert on_a.ready["run"] is None and on_b.ready["run"] is None

    await on_a.send({"type": "message", "content": "Stream, please.", "client_id": "fan-1"})
    head_b = await on_b.receive_until("token")
    # The run lives on process A; process B's HTTP API sees its gate in the shared database.
    during = await asyncio.to_thread(b.get_json, active_path(conversation), token_for(alice))
    frames_b = head_b + await on_b.receive_until("run_finished", timeout=15)
    frames_a = await on_a.receive_until("run_finished", timeout=15)
    after = await asyncio.to_thread(b.get_json, active_path(conversation), token_for(alice))

    started = of(frames_a, "run_started")[0]
    assert during["active"] is True, during
    assert during["run_id"] == started["run_id"]
    assert after["active"] is False, after

    for frames in (frames_a, frames_b):
        echo = of(frames, "message")[0]
        assert echo["client_id"] == "fan-1" and echo["message"]["content"] == "Stream, please."
        assert frames[-1]["status"] == "completed"
        assert not of(frames, "error")
    tokens_a, tokens_b = of(frames_a, "token"), of(frames_b, "token")
    assert tokens_a == tokens_b  # same seqs, same deltas, same order, same run and message
    seqs = [frame["seq"] for frame in tokens_a]
    assert seqs == sorted(set(seqs))
    assert "".join(frame["delta"] for frame in tokens_a) == text
    assert of(frames_a, "run_started") == of(frames_b, "run_started")
    assert frames_a[-1] == frames_b[-1]


async def test_a_confirmation_requested_on_one_process_is_decided_on_another(
    daphnes, remote_sockets, fake_llm, conversation, alice, tmp_path
):
    tool_log = tmp_path / "tool.log"
    tool_log.touch()
    fake_llm.script(
        Reply(tool_calls=[(TOOL_NAME, {"note": "decided elsewhere"}, "call_note_1")]),
        Reply(text="The note is written."),
    )
    a, b = await asyncio.to_thread(daphnes, 2, preload=[TOOLS_MODULE], env={TOOL_LOG_ENV: str(tool_log)})
    on_a = await remote_sockets(a, conversation, alice)
    on_b = await remote_sockets(b, conversation, alice)

    await on_a.send({"type": "message", "content": "Write the note.", "client_id": "confirm-1"})
    asked_a = await on_a.receive_until("run_finished")
    asked_b = await on_b.receive_until("run_finished")
    for frames in (asked_a, asked_b):
        assert frames[-1]["status"] == "awaiting_confirmation", frames
    confirm_a, confirm_b = of(asked_a, "confirm_required"), of(asked_b, "confirm_required")
    assert len(confirm_a) == 1 and confirm_a == confirm_b
    assert confirm_a[0]["tool"] == TOOL_NAME and confirm_a[0]["input"] == {"note": "decided elsewhere"}
    assert tool_log.read_text() == ""  # nothing runs before the decision

    await on_b.send({"type": "confirm", "confirmation_id": confirm_a[0]["confirmation_id"], "decision": "approve"})
    resumed_b = await on_b.receive_until("run_finished", timeout=15)
    resumed_a = await on_a.receive_until("run_finished", timeout=15)

    for frames in (resumed_a, resumed_b):
        assert not of(frames, "error"), frames
        ends = of(frames, "tool_end")
        assert len(ends) == 1 and ends[0]["tool_call_id"] == "call_note_1" and ends[0]["tool"] == TOOL_NAME
        assert "".join(frame["delta"] for frame in of(frames, "token")) == "The note is written."
        assert frames[-1]["status"] == "completed"
    assert of(resumed_a, "tool_end") == of(resumed_b, "tool_end")
    assert len(tool_log.read_text().splitlines()) == 1  # the tool ran exactly once, on one process

    confirmation = await database_sync_to_async(PendingConfirmation.objects.get)(pk=confirm_a[0]["confirmation_id"])
    assert confirmation.status == PendingConfirmation.Status.APPROVED
    messages = await stored_messages(conversation)
    assert [m.tool_call_id for m in messages if m.role == Message.Role.TOOL] == ["call_note_1"]
    assert messages[-1].role == Message.Role.ASSISTANT and messages[-1].content == "The note is written."
    assert messages[-1].status == Message.Status.COMPLETE
    assert len(fake_llm.requests) == 2


async def test_a_process_killed_mid_run_leaves_the_conversation_usable_from_another(
    daphnes, remote_sockets, fake_llm, conversation, alice
):
    text = "".join(f"word{index:03d} " for index in range(300))  # 600 chunks at 50 ms: far longer than the test
    fake_llm.script(Reply(text=text, chunk_chars=4, interval=0.05), Reply(text="Still here."))
    a, b = await asyncio.to_thread(daphnes, 2)
    on_a = await remote_sockets(a, conversation, alice)
    on_b = await remote_sockets(b, conversation, alice)
    token = token_for(alice)

    await on_a.send({"type": "message", "content": "Tell me everything.", "client_id": "kill-1"})
    await on_b.receive_until("token")
    # About a second of streaming: the run flushed its text (every 0.3 s) and beat its heart at least once.
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(1.2):
            while True:
                await on_b.receive()
    during = await asyncio.to_thread(b.get_json, active_path(conversation), token)
    assert during["active"] is True, during

    await asyncio.to_thread(a.kill)
    killed = time.monotonic()

    # The dead run's gate holds until its heartbeat lapses: meanwhile the conversation is busy.
    await on_b.send({"type": "message", "content": "Too soon?", "client_id": "kill-2"})
    refused = await on_b.receive_until("error")
    assert refused[-1]["code"] == "BUSY", refused

    while (await asyncio.to_thread(b.get_json, active_path(conversation), token))["active"]:
        assert time.monotonic() - killed < HEARTBEAT + 3, "the dead run's gate never lapsed"
        await asyncio.sleep(0.2)
    assert not await active_here(conversation)
    # What a page loaded now shows of the killed run's answer: interrupted once the heartbeat lapses.
    shown = (await asyncio.to_thread(b.get_json, history_path(conversation), token))["results"]

    # Usable again from process B: a new message is accepted and answered.
    await on_b.send({"type": "message", "content": "Are you there?", "client_id": "kill-3"})
    frames = await on_b.receive_until("run_finished", timeout=15)
    assert not of(frames, "error"), frames
    assert of(frames, "message")[0]["client_id"] == "kill-3"
    assert frames[-1]["status"] == "completed"
    assert "".join(frame["delta"] for frame in of(frames, "token")) == "Still here."

    messages = await stored_messages(conversation)
    assert [(m.role, m.content) for m in messages if m.role == Message.Role.USER] == [
        (Message.Role.USER, "Tell me everything."),
        (Message.Role.USER, "Are you there?"),
    ]
    new_run = of(frames, "run_started")[0]["run_id"]
    partial = [m for m in messages if m.role == Message.Role.ASSISTANT and m.metadata.get("run_id") != new_run]
    assert len(partial) == 1, [(m.role, m.status, m.content[:20]) for m in messages]
    assert partial[0].status == Message.Status.INTERRUPTED
    assert partial[0].content and text.startswith(partial[0].content)
    assert partial[0].content != text
    assert messages[-1].role == Message.Role.ASSISTANT and messages[-1].content == "Still here."
    assert messages[-1].status == Message.Status.COMPLETE
    assert (await asyncio.to_thread(b.get_json, active_path(conversation), token))["active"] is False

    shown_partial = [m for m in shown if m["id"] == partial[0].pk]
    assert shown_partial and shown_partial[0]["status"] == Message.Status.INTERRUPTED, (
        "after the heartbeat lapsed, before any new message, the killed run's answer is still shown as "
        f"{shown_partial and shown_partial[0]['status']!r}"
    )


async def test_a_socket_left_idle_keeps_working(daphnes, remote_sockets, fake_llm, conversation, alice):
    """A tab left open with no traffic for longer than the channel layer's blocking read still gets its runs."""
    fake_llm.script(Reply(text="Still awake."))
    (server,) = await asyncio.to_thread(daphnes, 1)
    socket = await remote_sockets(server, conversation, alice)
    await asyncio.sleep(IDLE)

    await socket.send({"type": "ping"})
    assert (await socket.receive())["type"] == "pong"
    await socket.send({"type": "message", "content": "Are you awake?", "client_id": "idle-1"})
    frames = await socket.receive_until("run_finished")
    assert not of(frames, "error"), frames
    assert frames[-1]["status"] == "completed"
    assert "".join(frame["delta"] for frame in of(frames, "token")) == "Still awake."


@pytest.mark.parametrize("kill_after", [0.0, 0.03, 0.05, 0.08, 0.15, 0.6])
async def test_an_approved_call_is_carried_out_once_whenever_its_process_is_killed(
    daphnes, remote_sockets, fake_llm, conversation, alice, tmp_path, kill_after
):
    """kill -9 at moments from "approval not yet seen" to "tool done": never a second run, never a call without
    its result, and the page that comes back is told how it ended (run, done, or not known)."""
    tool_log = tmp_path / "tool.log"
    tool_log.touch()
    fake_llm.script(
        Reply(tool_calls=[(TOOL_NAME, {"note": "once"}, "call_once")]),
        Reply(text="Here is how it went."),
    )
    env = {TOOL_LOG_ENV: str(tool_log), TOOL_DELAY_ENV: "0.1"}
    a, b = await asyncio.to_thread(daphnes, 2, preload=[TOOLS_MODULE], env=env)
    on_a = await remote_sockets(a, conversation, alice)
    await on_a.send({"type": "message", "content": "Write the note once.", "client_id": "once-1"})
    [confirm] = of(await on_a.receive_until("run_finished"), "confirm_required")

    await on_a.send({"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "approve"})
    await asyncio.sleep(kill_after)
    await asyncio.to_thread(a.kill)
    killed = time.monotonic()
    while await active_here(conversation):
        assert time.monotonic() - killed < HEARTBEAT + 3, "the dead run's gate never lapsed"
        await asyncio.sleep(0.2)

    # The page comes back, on the other process. An approval the killed process never stored is asked again.
    on_b = await remote_sockets(b, conversation, alice)
    if on_b.ready["pending_confirmations"]:
        assert [item["tool_call_id"] for item in on_b.ready["pending_confirmations"]] == ["call_once"]
        await on_b.send({"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "approve"})
    frames = []
    while not (await stored_result(conversation, "call_once")) or await active_here(conversation):
        with contextlib.suppress(TimeoutError):
            frames.append(await on_b.receive(timeout=0.5))
        assert time.monotonic() - killed < HEARTBEAT + 15, frames

    [result] = await stored_result(conversation, "call_once")
    runs = len(tool_log.read_text().splitlines())
    assert runs <= 1
    assert result.outcome in {"done", "unknown"}, result.content
    if result.outcome == "done":
        assert runs == 1
    else:
        assert "stopped while processes_write_note was running" in result.content
    confirmation = await database_sync_to_async(PendingConfirmation.objects.get)(pk=confirm["confirmation_id"])
    assert confirmation.result_id == result.pk
    assert not of(frames, "error"), frames
    # The model was asked again only with the call's result in place (the fake provider refuses anything else).
    assert 1 <= len(fake_llm.requests) <= 2
    for request in fake_llm.requests[1:]:
        assert [m["content"] for m in request.messages if m.get("tool_call_id") == "call_once"] == [result.content]

    # Nothing more happens when the page is opened once more.
    again = await remote_sockets(b, conversation, alice)
    await again.send({"type": "ping"})
    assert (await again.receive_until("pong"))[-1]["type"] == "pong"
    assert len(tool_log.read_text().splitlines()) == runs
    assert len(await stored_result(conversation, "call_once")) == 1


@database_sync_to_async
def stored_result(conversation, call_id: str) -> list[Message]:
    return list(conversation.messages.filter(role=Message.Role.TOOL, tool_call_id=call_id))


async def test_a_users_message_rate_is_counted_across_processes(daphnes, remote_sockets, fake_llm, conversation, alice):
    fake_llm.script(Reply(text="One."), Reply(text="Two."))
    a, b = await asyncio.to_thread(daphnes, 2, env={"WS_MESSAGES_PER_MINUTE": "2"})
    on_a = await remote_sockets(a, conversation, alice)
    on_b = await remote_sockets(b, conversation, alice)

    await on_a.send({"type": "message", "content": "first", "client_id": "rate-1"})
    await on_a.receive_until("run_finished")
    await on_b.receive_until("run_finished")  # the first run's end reaches every socket
    await on_b.send({"type": "message", "content": "second", "client_id": "rate-2"})
    second = await on_b.receive_until("run_finished")
    assert second[0]["type"] == "message" and second[0]["client_id"] == "rate-2", second
    await on_a.receive_until("run_finished")
    await on_a.send({"type": "message", "content": "third", "client_id": "rate-3"})

    refused = await on_a.receive_until("error")
    assert refused[-1]["code"] == "RATE_LIMITED", refused
    assert [m.content for m in await stored_messages(conversation) if m.role == Message.Role.USER] == [
        "first",
        "second",
    ]


async def test_a_process_keeps_its_redis_connections_however_many_sockets_send(
    daphnes, remote_sockets, private_redis, fake_llm, alice
):
    fake_llm.script(*[Reply(text="Noted.")] * 6)
    server = (await asyncio.to_thread(daphnes, 1, env={"REDIS_URL": private_redis.url}))[0]
    make = sync_to_async(services.conversation_create)
    sockets = [await remote_sockets(server, await make(owner=alice), alice) for _ in range(6)]

    def connections() -> int:
        with Redis.from_url(private_redis.url) as redis:
            return redis.info("clients")["connected_clients"] - 1  # not counting this one

    async def ask(socket, index: int) -> None:
        await socket.send({"type": "message", "content": "Note this.", "client_id": f"redis-clients-{index}"})
        frames = await socket.receive_until("run_finished")
        assert frames[-1]["status"] == "completed", frames

    await ask(sockets[0], 0)
    before = await asyncio.to_thread(connections)
    for index, socket in enumerate(sockets[1:], start=1):
        await ask(socket, index)

    # The message limit is counted in Redis for every socket through one client: a socket's first message used to
    # open a connection of its own, held while the socket stayed open.
    assert await asyncio.to_thread(connections) == before


async def test_a_run_whose_sockets_are_all_on_its_own_process_sends_its_frames_without_redis(
    daphnes, remote_sockets, private_redis, fake_llm, conversation, alice
):
    text = "Every word of this answer goes straight to the socket on the run's own process. " * 2
    fake_llm.script(Reply(text=text, interval=0.01))
    server = (await asyncio.to_thread(daphnes, 1, env={"REDIS_URL": private_redis.url}))[0]
    socket = await remote_sockets(server, conversation, alice)

    def publishes() -> int:
        with Redis.from_url(private_redis.url) as redis:
            return redis.info("commandstats").get("cmdstat_publish", {}).get("calls", 0)

    before = await asyncio.to_thread(publishes)
    await socket.send({"type": "message", "content": "Answer here.", "client_id": "here-1"})
    frames = await socket.receive_until("run_finished", timeout=15)
    published = await asyncio.to_thread(publishes) - before

    tokens = of(frames, "token")
    assert frames[-1]["status"] == "completed" and "".join(frame["delta"] for frame in tokens) == text
    seqs = [frame["seq"] for frame in frames if "seq" in frame]
    assert seqs == list(range(1, len(seqs) + 1))
    # Nothing of the run went through Redis: not its frames (there were more than 10 of them), nor its control.
    assert len(seqs) > 10 and published == 0, published


async def test_a_stop_pressed_on_another_process_stops_the_run(daphnes, remote_sockets, fake_llm, conversation, alice):
    fake_llm.script(Reply(text="A long answer that nobody wants to wait for. " * 20, interval=0.05))
    a, b = await asyncio.to_thread(daphnes, 2)
    on_a = await remote_sockets(a, conversation, alice)
    on_b = await remote_sockets(b, conversation, alice)

    await on_a.send({"type": "message", "content": "Tell me everything.", "client_id": "stop-1"})
    await on_b.receive_until("token")
    await on_b.send({"type": "cancel"})
    frames_b = await on_b.receive_until("run_finished", timeout=15)
    frames_a = await on_a.receive_until("run_finished", timeout=15)

    assert frames_a[-1]["status"] == frames_b[-1]["status"] == "cancelled"
    answer = (await stored_messages(conversation))[-1]
    assert answer.role == Message.Role.ASSISTANT and answer.status == Message.Status.INTERRUPTED
    assert answer.content == "".join(frame["delta"] for frame in of(frames_a, "token"))


async def test_a_process_subscribes_to_nothing_more_for_each_run(
    daphnes, remote_sockets, private_redis, fake_llm, conversation, alice
):
    fake_llm.script(*[Reply(text="Done.")] * 5)
    server = (await asyncio.to_thread(daphnes, 1, env={"REDIS_URL": private_redis.url}))[0]
    socket = await remote_sockets(server, conversation, alice)

    def subscriptions() -> int:
        with Redis.from_url(private_redis.url) as redis:
            return sum(int(client["sub"]) for client in redis.client_list())

    async def ask(index: int) -> None:
        await socket.send({"type": "message", "content": "Once more.", "client_id": f"subscribed-{index}"})
        assert (await socket.receive_until("run_finished"))[-1]["status"] == "completed"

    await ask(0)
    after_one = await asyncio.to_thread(subscriptions)
    for index in range(1, 5):
        await ask(index)

    # A channel subscribed for each run's control would stay subscribed for as long as the process lives.
    assert await asyncio.to_thread(subscriptions) == after_one


async def test_a_socket_of_another_process_joining_mid_run_gets_the_text_so_far_and_every_frame_after(
    daphnes, remote_sockets, fake_llm, conversation, alice
):
    text = "A run that began with its only socket on its own process, and then another joined from elsewhere. " * 3
    fake_llm.script(Reply(text=text, interval=0.04))  # about 4 s: time enough for the second socket to join
    a, b = await asyncio.to_thread(daphnes, 2)
    on_a = await remote_sockets(a, conversation, alice)
    await on_a.send({"type": "message", "content": "Stream, please.", "client_id": "join-1"})
    await on_a.receive_until("token")
    await on_a.receive_until("token")

    on_b = await remote_sockets(b, conversation, alice)
    frames_b = await on_b.receive_until("run_finished", timeout=15)
    frames_a = await on_a.receive_until("run_finished", timeout=15)

    run = on_b.ready["run"]
    assert run is not None and run["content"], on_b.ready
    later = [frame for frame in frames_b if frame["seq"] > run["seq"]]
    assert [frame["seq"] for frame in later] == list(range(run["seq"] + 1, run["seq"] + 1 + len(later)))
    assert run["content"] + "".join(frame["delta"] for frame in of(later, "token")) == text
    assert frames_b[-1] == frames_a[-1] and frames_b[-1]["status"] == "completed"
