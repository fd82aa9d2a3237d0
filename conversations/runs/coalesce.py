"""Tokens read ahead while the last frame is sent, and those that piled up meanwhile sent as one."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

from agentchat import tasks
from agentchat.agent import events as ev

# After a token frame, the next waits this long, gathering what arrives meanwhile: the first token goes out at
# once, then at most 25 frames a second per run, however fast the model writes (docs/benchmarks.md).
TOKEN_INTERVAL = 0.04
# Token frames a second that all the runs of a process send together at most: with more runs than that allows at
# TOKEN_INTERVAL (more than 40), each run's frames come further apart and carry more text. Most of a frame's cost
# is its write to the socket, the same for a word as for a sentence (docs/benchmarks.md).
PROCESS_TOKEN_FRAMES = 1000


class ReadAhead:
    """The run's events, read in a task of their own from the moment this is made, and while the last one is
    being handled: the provider is asked while the run's first frames go out, not after.

    The tokens that arrived meanwhile go on as one: a busy process sends fewer, larger frames instead of
    falling behind, and no run sends token frames closer together than TOKEN_INTERVAL, nor than its share of
    PROCESS_TOKEN_FRAMES among the `runs()` of the process. Any other event holds the reading until it has
    been handled: no tool starts before its start is stored and sent. Use it as an async context manager,
    which stops the reading on the way out.
    """

    def __init__(self, events: AsyncIterator[ev.RunEvent], runs: Callable[[], int] = lambda: 1):
        self._runs = runs
        self._ready: collections.deque[ev.RunEvent] = collections.deque()
        self._arrived, self._handled = asyncio.Event(), asyncio.Event()
        self._ended: list[BaseException | None] = []
        self._reader = asyncio.create_task(self._read(events))

    async def _read(self, events: AsyncIterator[ev.RunEvent]) -> None:
        try:
            async for event in events:
                self._ready.append(event)
                self._arrived.set()
                if not isinstance(event, ev.Token):
                    self._handled.clear()
                    await self._handled.wait()
        except asyncio.CancelledError:
            self._ended.append(None)  # not the error: its traceback holds this frame, which holds this object
            raise
        except BaseException as exc:
            self._ended.append(exc)
            raise
        else:
            self._ended.append(None)
        finally:
            self._arrived.set()

    async def __aenter__(self) -> ReadAhead:
        return self

    async def __aexit__(self, *exc_info) -> None:
        tasks.cancel(self._reader)
        await asyncio.gather(self._reader, return_exceptions=True)

    def __aiter__(self) -> AsyncIterator[ev.RunEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[ev.RunEvent]:
        loop = asyncio.get_running_loop()
        next_token_at = 0.0
        ready = self._ready
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            while ready:
                if isinstance(ready[0], ev.Token) and (wait := next_token_at - loop.time()) > 0:
                    await asyncio.sleep(wait)
                event = ready.popleft()
                if isinstance(event, ev.Token):
                    deltas = [event.delta]
                    while ready and isinstance(ready[0], ev.Token):
                        deltas.append(ready.popleft().delta)
                    event = replace(event, delta="".join(deltas))
                    next_token_at = loop.time() + max(TOKEN_INTERVAL, self._runs() / PROCESS_TOKEN_FRAMES)
                yield event
                if not isinstance(event, ev.Token):
                    self._handled.set()
            if self._ended:
                if self._ended[0] is not None:
                    raise self._ended[0]
                return
