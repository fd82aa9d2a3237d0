"""Threads kept for HTTP requests' synchronous work, so that a request starts no thread on the event loop.

Django's ASGI handler gives each request a thread of its own (asgiref's `ThreadSensitiveContext`): a new one,
started on the event loop as the request's first synchronous step runs, and joined by yet another new thread as the
request ends. Starting a thread holds the loop, and so every socket of the process, until the new thread runs: about
0.1 ms on an idle machine, milliseconds on a busy one (docs/benchmarks.md). Here each request still has one thread
to itself, for all its synchronous steps, but takes a thread an earlier request left idle when there is one.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext

# Idle threads kept between requests; more requests at once than this each start one, as without this.
KEPT = 16


class RequestThread(ThreadPoolExecutor):
    """One thread, which knows whether it has finished all it was given."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="request")
        self._last: Future | None = None

    def submit(self, fn, /, *args, **kwargs) -> Future:
        self._last = super().submit(fn, *args, **kwargs)
        return self._last

    @property
    def idle(self) -> bool:
        return self._last is None or self._last.done()


class KeptThreads:
    """ASGI middleware: each HTTP request's synchronous steps run on a thread of its own, one kept from an earlier
    request when one is idle. A thread still busy when its request ends (a step the client's disconnect left running)
    is not kept: the next request would wait for it."""

    def __init__(self, app) -> None:
        self.app = app
        self.idle: list[RequestThread] = []

    async def __call__(self, scope, receive, send) -> None:
        thread = self.idle.pop() if self.idle else RequestThread()
        try:
            async with ThreadSensitiveContext(executor=thread):
                await self.app(scope, receive, send)
        finally:
            if thread.idle and len(self.idle) < KEPT:
                self.idle.append(thread)
            else:
                thread.shutdown(wait=False)
