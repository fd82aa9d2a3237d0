"""HTTP requests' synchronous steps on kept threads (agentchat.request_threads): each request's steps on one thread,
a thread reused by later requests rather than started anew, never shared by two requests at once, and not reused
while a step a request left behind still runs on it."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async

from agentchat.asgi import application
from agentchat.request_threads import KeptThreads


def recording_app(seen: list, hold: asyncio.Event | None = None):
    """An ASGI app whose request runs two synchronous steps, optionally waiting between them, and notes their
    threads."""

    async def app(scope, receive, send):
        first = await sync_to_async(threading.get_ident)()
        if hold is not None:
            await hold.wait()
        second = await sync_to_async(threading.get_ident)()
        seen.append((first, second))

    return app


async def test_a_request_runs_its_steps_on_one_thread_which_the_next_request_takes_up():
    seen: list = []
    kept = KeptThreads(recording_app(seen))

    await kept({"type": "http"}, None, None)
    await kept({"type": "http"}, None, None)

    (first, second), (third, fourth) = seen
    assert first == second == third == fourth
    assert first != threading.get_ident()  # not the event loop's


async def test_requests_at_the_same_time_have_a_thread_each():
    seen: list = []
    hold = asyncio.Event()
    kept = KeptThreads(recording_app(seen, hold))

    both = asyncio.gather(kept({"type": "http"}, None, None), kept({"type": "http"}, None, None))
    await asyncio.sleep(0.05)
    hold.set()
    await both

    (a1, a2), (b1, b2) = seen
    assert a1 == a2 and b1 == b2
    assert a1 != b1


async def test_a_thread_still_busy_when_its_request_ends_is_not_taken_by_the_next():
    started, release = threading.Event(), threading.Event()

    def left_running():
        started.set()
        release.wait(10)

    async def abandoning(scope, receive, send):
        step = asyncio.ensure_future(sync_to_async(left_running)())
        await asyncio.to_thread(started.wait, 10)
        step.cancel()  # as when the client goes away: the step runs on regardless

    seen: list = []
    kept = KeptThreads(abandoning)
    await kept({"type": "http"}, None, None)
    kept.app = recording_app(seen)
    try:
        await asyncio.wait_for(kept({"type": "http"}, None, None), 5)  # not behind the step left running
    finally:
        release.set()

    assert len(seen) == 1
    assert kept.idle and len(kept.idle) == 1  # the new thread, kept; the busy one let go


@pytest.mark.django_db(transaction=True)
async def test_the_application_serves_a_second_request_without_starting_a_thread():
    async def get(path: str) -> int:
        sent: list = []
        messages = iter([{"type": "http.request", "body": b"", "more_body": False}])

        async def receive():
            return next(messages, None) or await asyncio.Event().wait()

        async def send(message):
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"testserver")],
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }
        await application(scope, receive, send)
        return sent[0]["status"]

    assert await get("/healthz") == 200
    before = {thread.ident for thread in threading.enumerate()}

    assert await get("/healthz") == 200
    assert await get("/api/schema/") == 200

    assert {thread.ident for thread in threading.enumerate()} == before
