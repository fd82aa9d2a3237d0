"""Token frames of one run: the first at once, the next ones gathered, nothing lost or reordered."""

from __future__ import annotations

import asyncio
import gc
import weakref

from agentchat.agent import events as ev
from conversations.runs import coalesce
from conversations.runs.coalesce import ReadAhead


def token(seq: int, delta: str) -> ev.Token:
    return ev.Token(run_id="r", seq=seq, delta=delta)


async def test_the_first_token_goes_alone_and_the_next_wait_to_go_together():
    first_sent = asyncio.Event()

    async def model():
        yield token(1, "He")
        await first_sent.wait()
        for seq, delta in enumerate(["llo", ", ", "wor", "ld"], start=2):
            await asyncio.sleep(0)
            yield token(seq, delta)
        yield ev.RunFinished(run_id="r", seq=6, status="completed")

    frames = []
    async with ReadAhead(model()) as events:
        async for event in events:
            frames.append(event)
            first_sent.set()

    assert [getattr(event, "delta", event.type) for event in frames] == ["He", "llo, world", "run_finished"]
    assert frames[1].seq == 2  # a gathered frame keeps its first token's place


async def test_without_an_interval_each_token_that_comes_alone_goes_alone(monkeypatch):
    monkeypatch.setattr(coalesce, "TOKEN_INTERVAL", 0)
    handled = asyncio.Event()

    async def model():
        for seq, delta in enumerate(["a", "b", "c"], start=1):
            yield token(seq, delta)
            await handled.wait()
            handled.clear()

    deltas = []
    async with ReadAhead(model()) as events:
        async for event in events:
            deltas.append(event.delta)
            handled.set()

    assert deltas == ["a", "b", "c"]


async def test_the_reading_begins_before_the_first_event_is_asked_for_and_ends_on_the_way_out():
    asked, stopped = asyncio.Event(), asyncio.Event()

    async def model():
        asked.set()  # as a provider would be asked for its answer
        try:
            await asyncio.Event().wait()
            yield token(1, "never")
        finally:
            stopped.set()

    async with ReadAhead(model()):
        await asyncio.wait_for(asked.wait(), 1)
    assert stopped.is_set()


async def test_with_many_runs_in_the_process_a_run_sends_its_tokens_further_apart(monkeypatch):
    monkeypatch.setattr(coalesce, "PROCESS_TOKEN_FRAMES", 10)  # with 10 runs, a frame a second each
    first_sent = asyncio.Event()

    async def model():
        yield token(1, "Re")
        await first_sent.wait()
        for seq, delta in enumerate(["ven", "ue ", "grew"], start=2):
            await asyncio.sleep(0.05)  # each longer than TOKEN_INTERVAL: alone, they would go one by one
            yield token(seq, delta)
        yield ev.RunFinished(run_id="r", seq=5, status="completed")

    frames = []
    async with ReadAhead(model(), runs=lambda: 10) as events:
        async for event in events:
            frames.append(event)
            first_sent.set()

    assert [getattr(event, "delta", event.type) for event in frames] == ["Re", "venue grew", "run_finished"]


async def test_a_run_that_returns_at_its_last_event_leaves_nothing_for_the_garbage_collector():
    async def model():
        yield token(1, "Hi")
        yield ev.RunFinished(run_id="r", seq=2, status="completed")

    gc.disable()
    try:
        reading = ReadAhead(model())
        async with reading as events:
            async for event in events:
                if event.type == "run_finished":
                    break  # as the run manager returns, with the reader waiting for this event to be handled
        gone = weakref.ref(reading)
        del reading, events
        for _ in range(3):  # the reader's cancellation, its callbacks, the closing of the events' generator
            await asyncio.sleep(0)
        assert gone() is None
    finally:
        gc.enable()
