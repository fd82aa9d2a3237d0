"""Runs over the chat socket, end to end: real ASGI app, real run manager, fake provider.

Every test asserts both what the sockets receive and what the database keeps, and waits for `run_finished`
(and for the run's task to end) so that no run outlives its test.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time

import pytest
from asgiref.sync import sync_to_async
from django.db.backends.utils import CursorWrapper

from agentchat.agent.context import TRUNCATION_LIMIT, TRUNCATION_SUFFIX
from agentchat.agent.orchestrator import LIMIT_MESSAGE
from conversations import runs, services
from conversations.models import AuditEvent, Message
from conversations.runs import db
from conversations.runs.manager import FLUSH_INTERVAL
from tests.fake_provider import Reply
from tools.registry import ToolArgs, ToolContext, ToolRegistry

from .helpers import of, text_of, well_formed

pytestmark = pytest.mark.django_db(transaction=True)

# Frames that belong to a run and so carry its run_id and a per-run increasing seq.
RUN_EVENTS = {
    "run_started",
    "token",
    "tool_start",
    "tool_end",
    "tool_error",
    "confirm_required",
    "notice",
    "run_finished",
}
SLOW = 0.05  # seconds between chunks of a slow stream
KEY = "sk-test-SECRET-123"


# --- tools --------------------------------------------------------------------------------------------


class LookupArgs(ToolArgs):
    q: str


class NoArgs(ToolArgs):
    pass


def lookup(args: LookupArgs, ctx: ToolContext) -> dict:
    """Look a word up."""
    return {"found": args.q.upper()}


def explode(args: NoArgs, ctx: ToolContext) -> dict:
    """Always fails."""
    raise RuntimeError("kaboom")


async def slow(args: NoArgs, ctx: ToolContext) -> str:
    """Takes its time: far longer than any test waits, so only a cancel ends it."""
    await asyncio.sleep(60)
    return "done"


@pytest.fixture
def tools(monkeypatch) -> ToolRegistry:
    registry = ToolRegistry()
    for func in (lookup, explode, slow):
        registry.tool(func)
    monkeypatch.setattr(runs.manager, "registry", registry)
    return registry


# --- isolation between tests -------------------------------------------------------------------------


def _run_tasks() -> list[asyncio.Task]:
    return [
        task
        for task in asyncio.all_tasks()
        if task.get_name().startswith("run ") and not task.done() and task is not asyncio.current_task()
    ]


async def settle(timeout: float = 3) -> None:
    """Wait until every run task has ended (run_finished is sent before its last audit write)."""
    tasks = _run_tasks()
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=timeout)
        for task in pending:
            task.cancel()
        assert not pending, "a run did not end"


@pytest.fixture(autouse=True)
async def _no_leaked_runs(monkeypatch):
    yield
    await settle()


# --- helpers -----------------------------------------------------------------------------------------


@sync_to_async
def stored(conversation) -> list[Message]:
    return list(Message.objects.filter(conversation=conversation).order_by("created_at", "id"))


@sync_to_async
def audit_kinds(conversation) -> list[str]:
    return list(AuditEvent.objects.filter(conversation=conversation).order_by("id").values_list("kind", flat=True))


@sync_to_async
def append(conversation, **fields) -> Message:
    message, _ = services.message_append(conversation=conversation, **fields)
    return message


@contextlib.contextmanager
def message_writes(on_write=None):
    """The UPDATEs of message text, as (time, sql, params), whichever connection and thread they come from.

    `on_write(sql, params)` is called before each one runs (to make the database slow, say).
    """
    writes: list[tuple[float, str, tuple]] = []
    execute = CursorWrapper.execute

    def watched(self, sql, params=None):
        if sql.startswith('UPDATE "conversations_message"') and '"content"' in sql:
            if on_write is not None:
                on_write(sql, params)
            writes.append((time.monotonic(), sql, tuple(params or ())))
        return execute(self, sql, params)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CursorWrapper, "execute", watched)
        yield writes


def kinds(frames: list[dict]) -> list[str]:
    return [frame["type"] for frame in frames]


def assert_run_events(frames: list[dict]) -> str:
    """Every run event of these frames has the same run_id and a strictly increasing seq; returns the run_id."""
    events = [frame for frame in frames if frame["type"] in RUN_EVENTS or "seq" in frame]
    assert events, frames
    run_id = events[0]["run_id"]
    assert run_id
    assert all(frame["run_id"] == run_id for frame in events), events
    seqs = [frame["seq"] for frame in events]
    assert all(isinstance(seq, int) for seq in seqs), seqs
    assert all(later > earlier for earlier, later in itertools.pairwise(seqs)), seqs
    return run_id


async def drain(socket, timeout: float = 0.2) -> list[dict]:
    """Whatever else arrives within `timeout`."""
    frames = []
    while not await socket.nothing(timeout):
        frames.append(await socket.receive())
    return frames


async def ask(socket, content: str, client_id: str | None = None, **fields) -> list[dict]:
    frame = {"type": "message", "content": content, **fields}
    if client_id:
        frame["client_id"] = client_id
    await socket.send(frame)
    return await socket.receive_until("run_finished")


async def tokens(socket, count: int) -> list[dict]:
    """Frames up to and including the `count`th token."""
    frames = []
    while len(of(frames, "token")) < count:
        frames.append(await socket.receive())
    return frames


# --- a message and its run ---------------------------------------------------------------------------


async def test_message_is_stored_echoed_everywhere_and_answered(llm, sockets, conversation, alice):
    llm.script(Reply(text="Hello there, Alice! How are you today?"))
    first = await sockets(conversation, alice)
    second = await sockets(conversation, alice)

    frames = await ask(first, "Hi", "c1")
    other = await second.receive_until("run_finished")

    for got in (frames, other):
        echo = got[0]
        assert echo["type"] == "message" and echo["client_id"] == "c1"
        assert echo["message"]["role"] == "user" and echo["message"]["content"] == "Hi"
        assert kinds(got)[1] == "run_started"
        assert set(kinds(got)) == {"message", "run_started", "token", "run_finished"}
        assert kinds(got)[-2:] == ["message", "run_finished"]
    run_id = assert_run_events(frames)
    started, finished = frames[1], frames[-1]
    assert started["message_id"] and finished["message_id"] == started["message_id"]
    assert finished["status"] == "completed"
    tokens_ = of(frames, "token")
    assert all(frame["message_id"] == started["message_id"] for frame in tokens_)
    assert text_of(frames) == "Hello there, Alice! How are you today?"
    answer = frames[-2]["message"]
    assert answer["id"] == started["message_id"] and answer["status"] == "complete"
    assert answer["content"] == "Hello there, Alice! How are you today?"

    user, assistant = await stored(conversation)
    assert (user.role, user.content, user.client_id, user.status) == ("user", "Hi", "c1", "complete")
    assert (assistant.role, assistant.status) == ("assistant", "complete")
    assert assistant.pk == started["message_id"]
    assert assistant.content == "Hello there, Alice! How are you today?"
    assert assistant.metadata["run_id"] == run_id
    assert await first.quiet() and await second.quiet()

    request = llm.requests[0]
    assert request.messages[0]["role"] == "system"
    assert request.messages[1:] == [{"role": "user", "content": "Hi"}]


async def test_same_client_id_twice_is_stored_once_and_answered_once(llm, sockets, conversation, alice):
    llm.script(Reply(text="Only once."), Reply(text="Never sent."))
    socket = await sockets(conversation, alice)

    def echoes() -> list[dict]:
        return [frame for frame in of(frames, "message") if frame["message"]["role"] == "user"]

    await socket.send({"type": "message", "content": "Hi", "client_id": "same"})
    await socket.send({"type": "message", "content": "Hi", "client_id": "same"})
    frames = await socket.receive_until("run_finished")
    # Sent again after the answer: still the echo only.
    await socket.send({"type": "message", "content": "Hi", "client_id": "same"})
    while len(echoes()) < 3:  # each send is echoed, however busy the machine
        frames.append(await socket.receive())
    frames += await drain(socket)

    assert kinds(frames).count("run_started") == 1
    assert kinds(frames).count("run_finished") == 1
    assert len(echoes()) == 3
    assert {frame["client_id"] for frame in echoes()} == {"same"}
    assert len({frame["message"]["id"] for frame in echoes()}) == 1
    assert text_of(frames) == "Only once."
    assert len(llm.requests) == 1
    rows = await stored(conversation)
    assert [(row.role, row.content) for row in rows] == [("user", "Hi"), ("assistant", "Only once.")]
    assert (await audit_kinds(conversation)).count("message_sent") == 1


async def test_same_client_id_from_two_tabs_at_once_is_answered_once(llm, sockets, conversation, alice):
    llm.script(Reply(text="Only once."), Reply(text="Never sent."))
    first = await sockets(conversation, alice)
    second = await sockets(conversation, alice)
    frame = {"type": "message", "content": "Hi", "client_id": "both"}
    await asyncio.gather(first.send(frame), second.send(frame))
    one = await first.receive_until("run_finished")
    two = await second.receive_until("run_finished")
    one += await drain(first)
    two += await drain(second)

    for frames in (one, two):
        assert kinds(frames).count("run_started") == 1, frames
        assert of(frames, "error") == []  # the tab that lost the race gets the echo, not BUSY
        assert text_of(frames) == "Only once."
    assert len(llm.requests) == 1
    rows = await stored(conversation)
    assert [(row.role, row.content) for row in rows] == [("user", "Hi"), ("assistant", "Only once.")]


async def test_message_during_a_run_is_busy_and_not_stored(llm, sockets, conversation, alice):
    llm.script(Reply(text="A slow answer that takes a while.", interval=SLOW), Reply(text="Second answer."))
    socket = await sockets(conversation, alice)
    await socket.send({"type": "message", "content": "First", "client_id": "a"})
    frames = await tokens(socket, 1)

    await socket.send({"type": "message", "content": "Too soon", "client_id": "b"})
    frames += await socket.receive_until("error")
    assert frames[-1]["code"] == "BUSY"
    frames += await socket.receive_until("run_finished")
    assert frames[-1]["status"] == "completed"
    assert text_of(frames) == "A slow answer that takes a while."
    assert "Too soon" not in str(frames[:-1])
    rows = await stored(conversation)
    assert [row.content for row in rows if row.role == "user"] == ["First"]
    assert len(llm.requests) == 1

    after = await ask(socket, "Now", "c")
    assert after[-1]["status"] == "completed"
    assert text_of(after) == "Second answer."
    rows = await stored(conversation)
    assert [row.content for row in rows if row.role == "user"] == ["First", "Now"]


async def test_two_sockets_receive_identical_token_sequences(llm, sockets, conversation, alice):
    text = "Every tab sees the very same words, in order."
    llm.script(Reply(text=text, chunk_chars=2))
    first = await sockets(conversation, alice)
    second = await sockets(conversation, alice)
    one = await ask(first, "Go", "g")
    two = await second.receive_until("run_finished")

    def run_events(frames):
        return [
            {key: frame.get(key) for key in ("type", "run_id", "seq", "delta", "status")}
            for frame in frames
            if frame["type"] in RUN_EVENTS
        ]

    assert run_events(one) == run_events(two)
    assert [(f["seq"], f["delta"]) for f in of(one, "token")] == [(f["seq"], f["delta"]) for f in of(two, "token")]
    # 23 chunks; those that arrive while a frame is being sent go out together in the next one.
    assert "".join(f["delta"] for f in of(one, "token")) == text and 1 <= len(of(one, "token")) <= 23
    assert_run_events(two)


async def test_a_socket_joining_mid_run_gets_the_text_so_far_then_continues(llm, sockets, conversation, alice):
    text = "The quick brown fox jumps over the lazy dog, twice, and then once more for luck, and again. " * 1
    text += "It keeps going for a while."
    llm.script(Reply(text=text, interval=SLOW))  # ~40 chunks: about 2 s
    first = await sockets(conversation, alice)
    await first.send({"type": "message", "content": "Tell me", "client_id": "t"})
    early = await tokens(first, 6)

    late = await sockets(conversation, alice)
    run = late.ready["run"]
    assert run is not None
    started = of(early, "run_started")[0]
    assert run["run_id"] == started["run_id"]
    assert run["message_id"] == started["message_id"]
    assert run["status"] == "streaming"
    assert run["content"] and text.startswith(run["content"])
    assert run["seq"] >= of(early, "token")[-1]["seq"]

    joined = await late.receive_until("run_finished")
    rest = await first.receive_until("run_finished")
    live = of(joined, "token")
    assert live, joined
    assert [frame["seq"] for frame in live] == list(range(run["seq"] + 1, run["seq"] + 1 + len(live)))
    assert run["content"] + text_of(joined) == text
    # The newcomer got exactly the tail the first tab got after the snapshot.
    assert [(f["seq"], f["delta"]) for f in of(early + rest, "token") if f["seq"] > run["seq"]] == [
        (f["seq"], f["delta"]) for f in live
    ]
    assert joined[-1]["status"] == "completed"
    assert all(frame["run_id"] == run["run_id"] for frame in joined if frame["type"] in RUN_EVENTS)
    assistant = (await stored(conversation))[-1]
    assert (assistant.pk, assistant.content, assistant.status) == (run["message_id"], text, "complete")


async def test_tokens_are_stored_in_batches_while_streaming(llm, sockets, conversation, alice):
    text = "Batches of text reach the database every few hundred milliseconds. " * 2  # 46 chunks: ~2.3 s
    llm.script(Reply(text=text, interval=SLOW))
    socket = await sockets(conversation, alice)
    seen: list[tuple[str, str]] = []

    @sync_to_async
    def row(pk):
        message = Message.objects.get(pk=pk)
        return message.status, message.content

    async def poll(pk):
        while True:
            seen.append(await row(pk))
            await asyncio.sleep(0.05)

    with message_writes() as writes:
        began = time.monotonic()
        await socket.send({"type": "message", "content": "Stream it", "client_id": "s"})
        started = (await socket.receive_until("run_started"))[-1]
        poller = asyncio.create_task(poll(started["message_id"]))
        try:
            frames = await socket.receive_until("run_finished")
        finally:
            poller.cancel()
            await asyncio.gather(poller, return_exceptions=True)
        elapsed = time.monotonic() - began
        await settle()

    assert frames[-1]["status"] == "completed"
    midway = [content for status, content in seen if status == "streaming" and content]
    assert midway, seen
    assert all(text.startswith(content) for content in midway)  # the whole text may land just before the end
    assert len(set(midway)) >= 2  # it grew more than once before the end
    # At most one write per ~300 ms, plus the final one: not one per token (there are 46).
    assert 3 <= len(writes) <= elapsed / FLUSH_INTERVAL + 2, writes
    assistant = (await stored(conversation))[-1]
    assert (assistant.content, assistant.status) == (text, "complete")


async def test_the_answers_streaming_in_a_process_are_stored_together(llm, sockets, conversation, alice):
    text = "Two answers at once share each write of their text so far. " * 2  # 26 chunks: ~1.3 s each
    llm.script(Reply(text=text, interval=SLOW), Reply(text=text.upper(), interval=SLOW))
    other = await sync_to_async(services.conversation_create)(owner=alice)
    first, second = await sockets(conversation, alice), await sockets(other, alice)

    with message_writes() as writes:
        began = time.monotonic()
        await first.send({"type": "message", "content": "One", "client_id": "one"})
        await second.send({"type": "message", "content": "Two", "client_id": "two"})
        ids = [(await socket.receive_until("run_started"))[-1]["message_id"] for socket in (first, second)]
        ended = [(await socket.receive_until("run_finished"))[-1] for socket in (first, second)]
        elapsed = time.monotonic() - began
        await settle()

    assert [frame["status"] for frame in ended] == ["completed", "completed"]
    # Both answers' text in one statement, tick after tick; plus each answer's final write.
    together = [params for _, _, params in writes if set(ids) <= set(params)]
    assert len(together) >= 2, writes
    assert len(writes) <= elapsed / FLUSH_INTERVAL + 3, writes
    answers = [(await stored(each))[-1] for each in (conversation, other)]
    assert {(row.content, row.status) for row in answers} == {(text, "complete"), (text.upper(), "complete")}


async def test_the_final_write_is_not_overtaken_by_a_batch_write(llm, sockets, conversation, alice, tools):
    """A slow database: a batch write queued during a round's final write must not land after it.

    The first round's whole answer (text and a tool call) arrives at once, well before the batch timer's first
    tick; its final write takes longer than one tick, so the timer fires meanwhile with unsaved text in hand.
    The run then goes on (the tool, a second round), so whatever the timer queued is carried out.
    """
    llm.script(Reply(text="Let me look.", tool_calls=[("lookup", {"q": "x"}, "call_1")]), Reply(text="Found it."))
    slowed = []

    def slow_final_write(sql, params):
        if Message.Status.COMPLETE in params and not slowed:
            slowed.append(params)
            time.sleep(FLUSH_INTERVAL + 0.2)

    socket = await sockets(conversation, alice)
    with message_writes(slow_final_write):
        frames = await ask(socket, "Answer", "f")
        await settle()

    assert slowed
    assert frames[-1]["status"] == "completed"
    rows = await stored(conversation)
    assert [(row.role, row.content, row.status) for row in rows] == [
        ("user", "Answer", "complete"),
        ("assistant", "Let me look.", "complete"),
        ("tool", '{"found": "X"}', "complete"),
        ("assistant", "Found it.", "complete"),
    ]
    assert rows[1].tool_calls == [{"id": "call_1", "name": "lookup", "args": {"q": "x"}}]


async def test_active_endpoint_follows_the_run(llm, sockets, conversation, alice, alice_api):
    llm.script(Reply(text="Still going, still going.", interval=SLOW))
    url = f"/api/agent/conversations/{conversation.pk}/active"
    before = await sync_to_async(alice_api.get)(url)
    assert before.status_code == 200 and before.json()["active"] is False

    socket = await sockets(conversation, alice)
    await socket.send({"type": "message", "content": "Go", "client_id": "x"})
    frames = await tokens(socket, 1)
    run_id = of(frames, "run_started")[0]["run_id"]
    during = (await sync_to_async(alice_api.get)(url)).json()
    assert during["active"] is True and during["run_id"] == run_id and during["since"]

    frames += await socket.receive_until("run_finished")
    assert frames[-1]["status"] == "completed"
    after = (await sync_to_async(alice_api.get)(url)).json()
    assert after == {"active": False, "run_id": None, "since": None}


# --- cancel -------------------------------------------------------------------------------------------


async def test_cancel_during_text_keeps_the_partial_text(llm, sockets, conversation, alice):
    llm.script(Reply(text="word " * 200, interval=SLOW), Reply(text="Back again."))  # ~17 s of stream
    socket = await sockets(conversation, alice)
    await socket.send({"type": "message", "content": "Talk a lot", "client_id": "long"})
    frames = await tokens(socket, 4)
    assert llm._server._connections  # the stream is open

    await socket.send({"type": "cancel"})
    cancelled_at = time.monotonic()
    # The stream would go on for ~17 s: the run's end within receive_until's wait is the stop taking effect.
    frames += await socket.receive_until("run_finished")
    # The provider's stream was closed: the fake server's handler finds its client gone.
    while llm._server._connections and time.monotonic() - cancelled_at < 10:
        await asyncio.sleep(0.02)
    assert not llm._server._connections
    finished = frames[-1]
    assert finished["status"] == "cancelled"
    assert_run_events(frames)
    partial = text_of(frames)
    assert partial and ("word " * 200).startswith(partial)
    interrupted = of(frames, "message")[-1]["message"]
    assert (interrupted["role"], interrupted["status"], interrupted["content"]) == ("assistant", "interrupted", partial)
    assert finished["message_id"] == interrupted["id"]
    await settle()
    _, assistant = await stored(conversation)
    assert (assistant.role, assistant.status, assistant.content) == ("assistant", "interrupted", partial)

    after = await ask(socket, "Again?", "again")
    assert after[-1]["status"] == "completed" and text_of(after) == "Back again."
    assert len(llm.requests) == 2
    assert llm.requests[1].messages[1:] == [
        {"role": "user", "content": "Talk a lot"},
        {"role": "assistant", "content": partial},
        {"role": "user", "content": "Again?"},
    ]
    # A cancel with no run going on changes nothing.
    await socket.send({"type": "cancel"})
    assert await socket.quiet()


async def test_cancel_during_a_slow_tool_closes_the_call(llm, sockets, conversation, alice, tools):
    llm.script(Reply(tool_calls=[("slow", {}, "call_slow")]), Reply(text="Fine then."))
    socket = await sockets(conversation, alice)
    await socket.send({"type": "message", "content": "Do the slow thing", "client_id": "slow"})
    frames = await socket.receive_until("tool_start")
    assert frames[-1]["tool"] == "slow" and frames[-1]["tool_call_id"] == "call_slow"

    await socket.send({"type": "cancel"})
    frames += await socket.receive_until("run_finished")
    assert frames[-1]["status"] == "cancelled"
    assert_run_events(frames)
    closed = of(frames, "message")[-1]["message"]
    assert (closed["role"], closed["tool_call_id"], closed["is_error"]) == ("tool", "call_slow", True)
    await settle()

    rows = await stored(conversation)
    assert [row.role for row in rows] == ["user", "assistant", "tool"]
    call, result = rows[1], rows[2]
    assert call.tool_calls == [{"id": "call_slow", "name": "slow", "args": {}}]
    assert call.status == "complete"
    assert (result.tool_call_id, result.tool_name, result.is_error) == ("call_slow", "slow", True)
    assert result.content == "Error: cancelled by the user"

    after = await ask(socket, "Never mind", "nm")
    assert after[-1]["status"] == "completed"
    sent = llm.requests[1].messages
    index = next(i for i, message in enumerate(sent) if message.get("tool_calls"))
    assert sent[index]["tool_calls"][0]["id"] == "call_slow"
    assert sent[index + 1] == {"role": "tool", "tool_call_id": "call_slow", "content": "Error: cancelled by the user"}
    assert sent[-1] == {"role": "user", "content": "Never mind"}
    well_formed(sent)


# --- tools --------------------------------------------------------------------------------------------


async def test_tool_calls_are_stored_as_messages_and_streamed(llm, sockets, conversation, alice, tools):
    llm.script(
        Reply(
            tool_calls=[
                ("lookup", {"q": "abc"}, "call_ok"),
                ("explode", {}, "call_boom"),
                ("lookup", {}, "call_bad"),
            ]
        ),
        Reply(text="All done."),
    )
    socket = await sockets(conversation, alice)
    frames = await ask(socket, "Use your tools", "tools")

    assert frames[-1]["status"] == "completed"
    assert_run_events(frames)
    starts = {frame["tool_call_id"]: frame for frame in of(frames, "tool_start")}
    assert starts["call_ok"]["tool"] == "lookup" and starts["call_ok"]["input"] == {"q": "abc"}
    assert starts["call_boom"]["tool"] == "explode"
    assert "call_bad" not in starts  # invalid arguments: the tool does not run
    (end,) = of(frames, "tool_end")
    assert (end["tool_call_id"], end["tool"], end["output"]) == ("call_ok", "lookup", {"found": "ABC"})
    errors = {frame["tool_call_id"]: frame for frame in of(frames, "tool_error")}
    assert set(errors) == {"call_boom", "call_bad"}
    assert "kaboom" in errors["call_boom"]["error"]
    assert "q" in errors["call_bad"]["error"]
    assert text_of(frames) == "All done."

    rows = await stored(conversation)
    assert [row.role for row in rows] == ["user", "assistant", "tool", "tool", "tool", "assistant"]
    call = rows[1]
    assert call.tool_calls == [
        {"id": "call_ok", "name": "lookup", "args": {"q": "abc"}},
        {"id": "call_boom", "name": "explode", "args": {}},
        {"id": "call_bad", "name": "lookup", "args": {}},
    ]
    assert call.status == "complete"
    results = {row.tool_call_id: row for row in rows[2:5]}
    assert (results["call_ok"].tool_name, results["call_ok"].is_error) == ("lookup", False)
    assert results["call_ok"].content == '{"found": "ABC"}'
    assert results["call_boom"].is_error and "kaboom" in results["call_boom"].content
    assert results["call_bad"].is_error and "q" in results["call_bad"].content
    assert (rows[-1].content, rows[-1].status, rows[-1].tool_calls) == ("All done.", "complete", [])
    assert frames[-1]["message_id"] == rows[-1].pk

    assert {tool["function"]["name"] for tool in llm.requests[0].tools} == {"lookup", "explode", "slow"}
    second = llm.requests[1].messages
    well_formed(second)
    assert [message["role"] for message in second[-4:]] == ["assistant", "tool", "tool", "tool"]
    assert second[-3] == {"role": "tool", "tool_call_id": "call_ok", "content": '{"found": "ABC"}'}


async def test_nine_rounds_of_tool_calls_stop_at_the_iteration_limit(llm, sockets, conversation, alice, tools):
    llm.script(*[Reply(tool_calls=[("lookup", {"q": f"w{i}"}, f"call_{i}")]) for i in range(9)])
    socket = await sockets(conversation, alice)
    frames = await ask(socket, "Loop forever", "loop")

    assert frames[-1]["status"] == "iteration_limit"
    assert_run_events(frames)
    assert len(llm.requests) == 8
    assert len(of(frames, "tool_end")) == 8
    final = of(frames, "message")[-1]["message"]
    assert (final["role"], final["content"], final["status"]) == ("assistant", LIMIT_MESSAGE, "interrupted")
    assert final["error"] == "The agent used all of its 8 steps before finishing."
    assert final["metadata"] == {"run_id": frames[-1]["run_id"], "stop": "step_limit"}
    assert frames[-1]["message_id"] == final["id"]
    rows = await stored(conversation)
    assert [row.role for row in rows] == ["user", *["assistant", "tool"] * 8, "assistant"]
    assert rows[-1].content == "Reached maximum iteration limit"
    assert [row.tool_call_id for row in rows if row.role == "tool"] == [f"call_{i}" for i in range(8)]


# --- provider failures --------------------------------------------------------------------------------


async def test_provider_failures_fail_the_run_and_keep_the_text(llm, sockets, conversation, alice):
    text = "Revenue grew by twelve percent this quarter."
    llm.script(Reply(status=401), Reply(text=text, cut_after=4), Reply(text="Recovered."))
    socket = await sockets(conversation, alice)

    refused = await ask(socket, "First", "1")
    error = of(refused, "error")[0]
    assert error["code"] == "PROVIDER_ERROR" and KEY not in error["message"]
    assert refused[-1]["status"] == "failed"
    assert kinds(refused).index("error") < kinds(refused).index("run_finished")
    # The answer stays, without text, saying what went wrong (never the key): a reload shows where it failed.
    [kept] = [row for row in await stored(conversation) if row.role == "assistant"]
    assert (kept.status, kept.content) == ("failed", "") and "credentials" in kept.error and KEY not in kept.error
    assert refused[-1]["message_id"] == kept.pk

    cut = await ask(socket, "Second", "2")
    assert of(cut, "error")[0]["code"] == "PROVIDER_ERROR"
    assert cut[-1]["status"] == "failed"
    assert text_of(cut) == "Revenue g"
    await settle()
    rows = await stored(conversation)
    assert [(row.role, row.content, row.status) for row in rows] == [
        ("user", "First", "complete"),
        ("assistant", "", "failed"),
        ("user", "Second", "complete"),
        ("assistant", "Revenue g", "failed"),
    ]
    assert cut[-1]["message_id"] == rows[-1].pk

    after = await ask(socket, "Third", "3")
    assert after[-1]["status"] == "completed" and text_of(after) == "Recovered."
    assert {"role": "assistant", "content": "Revenue g"} in llm.requests[-1].messages
    # The failure kept to show where the first question went unanswered is not sent to the provider.
    assert {"role": "assistant", "content": ""} not in llm.requests[-1].messages


# --- context ------------------------------------------------------------------------------------------


async def test_what_no_database_stores_is_taken_from_the_models_text_and_call(llm, sockets, conversation, alice, tools):
    # Valid JSON from a provider: the NUL character, which PostgreSQL stores nowhere, and half a UTF-16 pair.
    llm.script(
        Reply(text="half \ud800 a pair", tool_calls=[("lookup", {"q": "nul\x00 and \udc00"}, "call_odd")]),
        Reply(text="nul\x00 too"),
    )
    socket = await sockets(conversation, alice)
    frames = await ask(socket, "Look it up", "odd")

    assert frames[-1]["status"] == "completed"
    (start,) = of(frames, "tool_start")
    (end,) = of(frames, "tool_end")
    assert start["input"] == {"q": "nul and \ufffd"} and end["output"] == {"found": "NUL AND \ufffd"}
    assert text_of(frames) == "half \ufffd a pairnul too"
    _, call, result, answer = await stored(conversation)
    assert (call.content, call.tool_calls[0]["args"]) == ("half \ufffd a pair", {"q": "nul and \ufffd"})
    assert result.content == '{"found": "NUL AND \ufffd"}' and not result.is_error
    assert (answer.content, answer.status) == ("nul too", "complete")


async def test_a_huge_message_is_truncated(llm, sockets, conversation, alice):
    content = "This is one sentence of a very long message. " * 4_445  # 200,025 characters
    assert len(content) > 200_000
    llm.script(Reply(text="That was long."))
    socket = await sockets(conversation, alice)
    frames = await ask(socket, content, "big")

    notice = of(frames, "notice")[0]
    assert notice["code"] == "MESSAGE_TRUNCATED" and notice["detail"]
    assert_run_events(frames)
    echo = of(frames, "message")[0]["message"]
    assert frames[-1]["status"] == "completed"
    (user,) = [row for row in await stored(conversation) if row.role == "user"]
    assert len(user.content) <= TRUNCATION_LIMIT + len(TRUNCATION_SUFFIX)
    assert user.content.endswith("[...truncated]")
    assert content.startswith(user.content.removesuffix(TRUNCATION_SUFFIX))
    assert len(user.content) > TRUNCATION_LIMIT - 2_000
    assert echo["content"] == user.content
    assert llm.requests[0].messages[-1] == {"role": "user", "content": user.content}


async def test_long_history_is_trimmed_without_splitting_tool_calls(llm, sockets, conversation, alice, settings):
    settings.CONTEXT_TOKEN_BUDGET = 300
    words = " ".join(f"item{i}" for i in range(120))
    await append(conversation, role="user", content=f"Old question about {words}", actor=alice)
    await append(
        conversation,
        role="assistant",
        tool_calls=[{"id": "call_old", "name": "lookup", "args": {"q": words}}],
    )
    await append(conversation, role="tool", content="short result", tool_call_id="call_old", tool_name="lookup")
    await append(conversation, role="assistant", content="Here is what I found earlier.")
    llm.script(Reply(text="Trimmed."))

    socket = await sockets(conversation, alice)
    frames = await ask(socket, "And now?", "now")

    notice = of(frames, "notice")[0]
    assert notice["code"] == "CONTEXT_TRIMMED"
    assert frames[-1]["status"] == "completed"
    assert_run_events(frames)
    sent = llm.requests[0].messages
    assert sent[0]["role"] == "system"
    assert sent[-1] == {"role": "user", "content": "And now?"}
    first = next(message for message in sent if message["role"] != "system")
    assert first["role"] != "tool"
    well_formed(sent)
    assert "Old question" not in str(sent)
    # The old tool result alone would fit; it is left out with the call it answers.
    assert "short result" not in str(sent) and "call_old" not in str(sent)
    assert "3" in notice["detail"]
    assert {"role": "assistant", "content": "Here is what I found earlier."} in sent
    # The stored history itself is untouched.
    assert len(await stored(conversation)) == 6


async def test_a_new_conversation_starts_empty(llm, sockets, conversation, alice):
    llm.script(Reply(text="Noted."), Reply(text="Hello."))
    first = await sockets(conversation, alice)
    assert (await ask(first, "My secret is plum-42", "p"))[-1]["status"] == "completed"

    fresh = await sync_to_async(services.conversation_create)(owner=alice)
    second = await sockets(fresh, alice)
    assert (await ask(second, "Hello", "h"))[-1]["status"] == "completed"

    sent = llm.requests[1].messages
    assert [message["role"] for message in sent] == ["system", "user"]
    assert sent[1] == {"role": "user", "content": "Hello"}
    assert "plum-42" not in str(llm.requests[1].body)
    assert [row.content for row in await stored(fresh)] == ["Hello", "Hello."]
    assert await first.quiet()  # the other conversation's run is not seen here


# --- audit --------------------------------------------------------------------------------------------


async def test_runs_are_audited(llm, sockets, conversation, alice, tools):
    llm.script(
        Reply(tool_calls=[("lookup", {"q": "a"}, "call_ok"), ("explode", {}, "call_boom")]),
        Reply(text="Done."),
    )
    socket = await sockets(conversation, alice)
    frames = await ask(socket, "Audit me", "audit")
    assert frames[-1]["status"] == "completed"
    await settle()

    @sync_to_async
    def events():
        return list(AuditEvent.objects.filter(conversation=conversation).order_by("id"))

    found = await events()
    by_kind: dict[str, list[AuditEvent]] = {}
    for event in found:
        by_kind.setdefault(event.kind, []).append(event)
    for kind in ("message_sent", "run_started", "run_finished", "tool_called", "tool_succeeded", "tool_failed"):
        assert kind in by_kind, [event.kind for event in found]
    run_id = frames[1]["run_id"]
    assert by_kind["run_started"][0].data["run_id"] == run_id
    assert by_kind["run_finished"][0].data == {"run_id": run_id, "status": "completed"}
    assert {event.data["tool"] for event in by_kind["tool_called"]} == {"lookup", "explode"}
    assert by_kind["tool_succeeded"][0].data["tool_call_id"] == "call_ok"
    assert by_kind["tool_failed"][0].data["tool_call_id"] == "call_boom"
    assert all(event.actor_id == alice.pk for event in found if event.kind != "conversation_created")
    assert by_kind["message_sent"][0].data["client_id"] == "audit"


async def test_cancel_right_after_the_message_stops_the_run(llm, sockets, conversation, alice):
    llm.script(Reply(text="word " * 200, interval=SLOW))
    socket = await sockets(conversation, alice)
    await socket.send({"type": "message", "content": "Start", "client_id": "quick"})
    await socket.send({"type": "cancel"})
    frames = await socket.receive_until("run_finished")
    assert frames[-1]["status"] == "cancelled"
    # The answer stays, with what it had, saying it was stopped: a reload shows it where it happened.
    [answer] = [frame["message"] for frame in of(frames, "message") if frame["message"]["role"] == "assistant"]
    assert (answer["status"], answer["error"]) == ("interrupted", "You pressed Stop.")
    assert frames[-1]["message_id"] == answer["id"]
    await settle()
    rows = await stored(conversation)
    assert [(row.role, row.status, row.error) for row in rows] == [
        ("user", "complete", ""),
        ("assistant", "interrupted", "You pressed Stop."),
    ]


async def test_joining_while_a_later_round_starts_misses_nothing(llm, sockets, conversation, alice, tools, monkeypatch):
    """A newcomer whose snapshot is taken while the second round's answer row is being created (a slow database)."""
    text = "After the tool, here is the answer."
    llm.script(Reply(tool_calls=[("lookup", {"q": "x"}, "call_j")]), Reply(text=text, interval=SLOW))
    start_message = db.start_message
    stalled = asyncio.Event()
    calls = []

    async def slow_start_message(conversation, run_id):
        calls.append(run_id)
        if len(calls) == 1:  # the first round's row is made in the run's first database step, not here
            stalled.set()
            await asyncio.sleep(0.5)
        return await start_message(conversation, run_id)

    monkeypatch.setattr(db, "start_message", slow_start_message)
    first = await sockets(conversation, alice)
    await first.send({"type": "message", "content": "Look it up", "client_id": "j"})
    await asyncio.wait_for(stalled.wait(), 3)

    late = await sockets(conversation, alice)
    run = late.ready["run"]
    joined = await late.receive_until("run_finished")
    await first.receive_until("run_finished")
    assert joined[-1]["status"] == "completed"
    assert run["content"] + text_of(joined) == text
    live = of(joined, "token")
    assert [frame["seq"] for frame in live] == list(range(run["seq"] + 1, run["seq"] + 1 + len(live)))
