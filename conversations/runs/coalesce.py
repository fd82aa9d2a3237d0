"""Tokens read ahead while the last frame is sent, and those that piled up meanwhile sent as one."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from dataclasses import replace

from agentchat.agent import events as ev

# After a token frame, the next waits this long, gathering what arrives meanwhile: the first token goes out at
# once, then at most 25 frames a second per run, however fast the model writes (docs/benchmarks.md).
TOKEN_INTERVAL = 0.04


async def read_ahead(events: AsyncIterator[ev.RunEvent]) -> AsyncIterator[ev.RunEvent]:
    """The run's tokens, read in a task of their own while the last one is being handled.

    The tokens that arrived meanwhile go on as one: a busy process sends fewer, larger frames instead of
    falling behind, and no run sends token frames closer together than TOKEN_INTERVAL. Any other event holds
    the reading until it has been handled: no tool starts before its start is stored and sent.
    """
    loop = asyncio.get_running_loop()
    next_token_at = 0.0
    ready: collections.deque[ev.RunEvent] = collections.deque()
    arrived, handled = asyncio.Event(), asyncio.Event()
    ended: list[BaseException | None] = []

    async def read() -> None:
        try:
            async for event in events:
                ready.append(event)
                arrived.set()
                if not isinstance(event, ev.Token):
                    handled.clear()
                    await handled.wait()
        except BaseException as exc:
            ended.append(exc)
            raise
        else:
            ended.append(None)
        finally:
            arrived.set()

    reader = asyncio.create_task(read())
    try:
        while True:
            await arrived.wait()
            arrived.clear()
            while ready:
                if isinstance(ready[0], ev.Token) and (wait := next_token_at - loop.time()) > 0:
                    await asyncio.sleep(wait)
                event = ready.popleft()
                if isinstance(event, ev.Token):
                    deltas = [event.delta]
                    while ready and isinstance(ready[0], ev.Token):
                        deltas.append(ready.popleft().delta)
                    event = replace(event, delta="".join(deltas))
                    next_token_at = loop.time() + TOKEN_INTERVAL
                yield event
                if not isinstance(event, ev.Token):
                    handled.set()
            if ended:
                if ended[0] is not None and not isinstance(ended[0], asyncio.CancelledError):
                    raise ended[0]
                return
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
