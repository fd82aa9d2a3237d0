"""A closed socket leaves nothing for the garbage collector (agentchat/server.py, docs/benchmarks.md "The collector").

What the collector frees, it frees in a pass on the event loop, with every socket of the process waiting. A socket's
objects (daphne's and autobahn's protocol, the HTTP channel and request it was upgraded from, the consumer and its
run) are freed by reference counting as it closes instead.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from tests.fake_provider import Reply

from .helpers import text_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_thread_connections")]

PROBE = "tests.collector_probe"  # named, not imported: only the server process installs its signal handler
REPORT_ENV = "AGENTCHAT_TEST_COLLECTOR_REPORT"


async def probe(server, report) -> dict:
    report.unlink(missing_ok=True)
    os.kill(server.pid, signal.SIGUSR2)
    async with asyncio.timeout(10):
        while not report.exists():
            await asyncio.sleep(0.05)
    return json.loads(report.read_text())


async def collected_once_closed(server, report) -> dict[str, int]:
    """What the collector found of the closed sockets, once daphne has let go of them all."""
    collected: dict[str, int] = {}
    async with asyncio.timeout(20):
        while True:  # daphne lets go of a closed socket's protocol on its next check, within a second or two
            seen = await probe(server, report)
            for kind, count in seen["collected"].items():
                collected[kind] = collected.get(kind, 0) + count
            if seen["existing"] == 0:
                return collected
            await asyncio.sleep(0.5)


async def started(daphnes, report):
    (server,) = await asyncio.to_thread(daphnes, 1, preload=[PROBE], env={REPORT_ENV: str(report)})
    await probe(server, report)  # what starting the server left
    return server


async def test_sockets_that_streamed_an_answer_and_closed_leave_nothing_in_cycles(
    daphnes, remote_sockets, fake_llm, conversation, alice, tmp_path
):
    report = tmp_path / "collector.json"
    fake_llm.script(*(Reply(text=f"Answer {index}.") for index in range(3)))
    server = await started(daphnes, report)

    sockets = []
    for index in range(3):  # each opened once the run before has finished, so that it reads its own run's end
        socket = await remote_sockets(server, conversation, alice)
        sockets.append(socket)
        await socket.send({"type": "message", "content": f"Question {index}"})
        frames = await socket.receive_until("run_finished")
        assert frames[-1]["status"] == "completed", frames
        assert text_of(frames) == f"Answer {index}."
    for socket in sockets:
        await socket.close()

    assert await collected_once_closed(server, report) == {}


async def test_a_socket_refused_by_a_database_thread_and_closed_leaves_nothing_in_cycles(
    daphnes, remote_sockets, fake_llm, conversation, alice, tmp_path
):
    report = tmp_path / "collector.json"
    fake_llm.script(Reply(text="Still thinking.", stall=1.0, stall_after=0))
    server = await started(daphnes, report)
    asking = await remote_sockets(server, conversation, alice)
    await asking.send({"type": "message", "content": "A long question"})
    await asking.receive_until("run_started")

    other = await remote_sockets(server, conversation, alice)
    await other.send({"type": "message", "content": "Another question meanwhile"})
    refused = await other.receive_until("error")
    assert refused[-1]["code"] == "BUSY"
    await asking.receive_until("run_finished")
    await asking.close()
    await other.close()

    assert await collected_once_closed(server, report) == {}
