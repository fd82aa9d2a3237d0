"""Slow tools as background jobs: the real socket and run manager here, the real worker in its own process.

The tools (tests/background_tools.py) run only in the worker processes these tests start; each holds until
the test opens its gate, so a test can close the page, kill the worker or press Stop while the job runs.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

from conversations import runs
from conversations.models import ToolJob
from tests import background_tools
from tests.background_tools import GATE_ENV, LOG_ENV, LONG, PUBLISH, REPORT
from tests.fake_provider import Reply
from tests.servers import start_worker
from tools.registry import ToolRegistry

from .helpers import of, tool_messages

pytestmark = pytest.mark.django_db(transaction=True)

CALL = "call_report"
HEARTBEAT = 1
WAIT = 15


class Jobs:
    def __init__(self, tmp_path: Path):
        self.log = tmp_path / "jobs.log"
        self.log.touch()
        self.gates = tmp_path / "gates"
        self.gates.mkdir()
        self.log_dir = tmp_path
        self.workers: list = []

    def start_worker(self, name: str = "worker"):
        worker = start_worker(
            {LOG_ENV: str(self.log), GATE_ENV: str(self.gates), "JOB_HEARTBEAT_TIMEOUT": str(HEARTBEAT)},
            preload=["tests.background_tools:install"],
            log_dir=self.log_dir,
            name=name,
        )
        self.workers.append(worker)
        return worker

    def open_gate(self, note: str) -> None:
        (self.gates / note).touch()

    def lines(self, kind: str) -> list[list[str]]:
        return [line.split() for line in self.log.read_text().splitlines() if line.startswith(kind + " ")]

    async def started(self, count: int = 1) -> list[list[str]]:
        """Wait until the tools have started `count` times in all; their log lines."""
        deadline = time.monotonic() + WAIT
        while len(self.lines("start")) < count:
            assert time.monotonic() < deadline, f"the job did not start; log: {self.log.read_text()!r}"
            await asyncio.sleep(0.05)
        return self.lines("start")


@pytest.fixture
def jobs(settings, monkeypatch, tmp_path):
    settings.JOB_HEARTBEAT_TIMEOUT = timedelta(seconds=HEARTBEAT)
    registry = ToolRegistry()
    background_tools.build(registry)
    monkeypatch.setattr(runs.manager, "registry", registry)
    jobs = Jobs(tmp_path)
    yield jobs
    for worker in jobs.workers:
        worker.kill()  # what it was doing no longer matters, and a graceful exit takes a second or more
    for worker in jobs.workers:
        print(f"----- {worker.name}: {worker.log_path}\n{worker.tail(40)}")


@sync_to_async
def job_row(call_id: str = CALL) -> ToolJob:
    return ToolJob.objects.get(tool_call_id=call_id)


async def ask(llm, socket, tool: str = REPORT, note: str = "q3", answer: str = "The report is ready.") -> dict:
    llm.script(Reply(text="On it.", tool_calls=[(tool, {"note": note}, CALL)]), Reply(text=answer))
    await socket.send({"type": "message", "content": f"Run {tool} for {note}"})
    frames = await socket.receive_until("tool_start")
    return frames[-1]


async def test_a_slow_tool_runs_in_the_worker_and_the_run_resumes_by_itself(llm, jobs, sockets, conversation, alice):
    worker = jobs.start_worker()
    socket = await sockets(conversation, alice)

    start = await ask(llm, socket)
    assert (start["tool"], start["input"], start["background"]) == (REPORT, {"note": "q3"}, True)
    [(_, tool, note, pid)] = await jobs.started()
    assert (tool, note, int(pid)) == (REPORT, "q3", worker.pid)  # in the worker, not in the server
    assert (await job_row()).status == ToolJob.Status.RUNNING

    await socket.send({"type": "message", "content": "Anything else?"})
    busy = await socket.receive()
    assert (busy["type"], busy["code"]) == ("error", "BUSY")

    jobs.open_gate("q3")
    frames = await socket.receive_until("run_finished", timeout=WAIT)
    [end] = of(frames, "tool_end", tool_call_id=CALL)
    assert end["output"] == {"report": "compile_report q3", "for": "alice", "conversation": str(conversation.pk)}
    assert "".join(f["delta"] for f in of(frames, "token")) == "The report is ready."
    assert frames[-1]["status"] == "completed"

    job = await job_row()
    assert (job.status, job.attempt, job.output) == (ToolJob.Status.SUCCEEDED, 1, end["output"])
    [result] = await tool_messages(conversation)
    assert (result.tool_call_id, result.is_error) == (CALL, False)
    assert json.loads(result.content) == end["output"]
    assert json.loads(llm.requests[-1].messages[-1]["content"]) == end["output"]


async def test_a_tool_allowed_more_than_30_seconds_runs_in_the_background_too(llm, jobs, sockets, conversation, alice):
    worker = jobs.start_worker()
    socket = await sockets(conversation, alice)

    start = await ask(llm, socket, tool=LONG, note="all")
    assert start["background"] is True
    [(_, _, _, pid)] = await jobs.started()
    assert int(pid) == worker.pid
    jobs.open_gate("all")
    frames = await socket.receive_until("run_finished", timeout=WAIT)
    assert frames[-1]["status"] == "completed"


async def test_a_page_closed_and_reopened_sees_the_job_running_then_the_answer(llm, jobs, sockets, conversation, alice):
    jobs.start_worker()
    first = await sockets(conversation, alice)
    start = await ask(llm, first)
    await jobs.started()
    await first.close()

    again = await sockets(conversation, alice)
    run = again.ready["run"]
    assert run is not None and run["run_id"] == start["run_id"]
    assert run["tools"] == [
        {"tool_call_id": CALL, "tool": REPORT, "input": {"note": "q3"}, "background": True, "decision": None}
    ]

    jobs.open_gate("q3")
    frames = await again.receive_until("run_finished", timeout=WAIT)
    assert len(of(frames, "tool_end", tool_call_id=CALL)) == 1
    assert "".join(f["delta"] for f in of(frames, "token")) == "The report is ready."
    assert frames[-1]["status"] == "completed"


async def test_a_worker_killed_mid_job_has_the_job_retried_once_by_another(llm, jobs, sockets, conversation, alice):
    first = jobs.start_worker("worker-a")
    socket = await sockets(conversation, alice)
    await ask(llm, socket)
    await jobs.started()
    first.kill()
    second = jobs.start_worker("worker-b")

    starts = await jobs.started(2)
    assert [int(pid) for *_, pid in starts] == [first.pid, second.pid]
    assert (await job_row()).attempt == 2
    jobs.open_gate("q3")
    frames = await socket.receive_until("run_finished", timeout=WAIT)

    [retried] = of(frames, "notice", code="JOB_RETRIED")
    assert f"{REPORT} stopped; it runs again (attempt 2 of 2)" in retried["detail"]

    assert frames[-1]["status"] == "completed"
    assert len(of(frames, "tool_end", tool_call_id=CALL)) == 1
    assert [int(pid) for *_, pid in jobs.lines("end")] == [second.pid]
    job = await job_row()
    assert (job.status, job.attempt) == (ToolJob.Status.SUCCEEDED, 2)
    assert len(await tool_messages(conversation)) == 1


async def test_a_confirmed_job_whose_worker_died_is_told_unknown_not_run_twice(llm, jobs, sockets, conversation, alice):
    first = jobs.start_worker("worker-a")
    socket = await sockets(conversation, alice)
    llm.script(Reply(text="Publishing needs your approval.", tool_calls=[(PUBLISH, {"note": "q3"}, CALL)]))
    await socket.send({"type": "message", "content": "Publish the q3 report"})
    frames = await socket.receive_until("run_finished")
    [confirm] = of(frames, "confirm_required")
    llm.script(Reply(text="Publishing failed: the worker stopped. Nothing was sent twice."))

    await socket.send({"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "approve"})
    start = (await socket.receive_until("tool_start"))[-1]
    assert start["background"] is True
    await jobs.started()
    first.kill()
    jobs.start_worker("worker-b")
    frames = await socket.receive_until("run_finished", timeout=WAIT)

    [error] = of(frames, "tool_error", tool_call_id=CALL)
    assert error["outcome"] == "unknown"
    assert f"the background worker stopped while running {PUBLISH} (tried once)" in error["error"]
    assert frames[-1]["status"] == "completed"
    job = await job_row()
    assert (job.status, job.attempt) == (ToolJob.Status.FAILED, 1)
    [result] = await tool_messages(conversation)
    assert result.is_error and "worker stopped" in result.content
    await asyncio.sleep(HEARTBEAT + 0.5)
    assert len(jobs.lines("start")) == 1  # the second worker never took it


async def test_stop_cancels_the_job_and_its_late_result_is_dropped(llm, jobs, sockets, conversation, alice):
    jobs.start_worker()
    socket = await sockets(conversation, alice)
    await ask(llm, socket)
    await jobs.started()

    await socket.send({"type": "cancel"})
    frames = await socket.receive_until("run_finished")
    assert frames[-1]["status"] == "cancelled"
    assert (await job_row()).status == ToolJob.Status.CANCELLED

    jobs.open_gate("q3")
    deadline = time.monotonic() + WAIT
    while not jobs.lines("end"):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    job = await job_row()
    assert (job.status, job.output) == (ToolJob.Status.CANCELLED, None)
    [result] = await tool_messages(conversation)
    assert result.is_error and "cancelled by the user" in result.content


async def test_a_job_no_worker_takes_is_announced_and_can_be_stopped(
    llm, jobs, sockets, conversation, alice, monkeypatch
):
    monkeypatch.setattr(runs.jobs, "JOB_WAIT_NOTICE", 0.5)
    socket = await sockets(conversation, alice)
    await ask(llm, socket)

    frames = await socket.receive_until("notice", code="JOB_WAITING")
    assert REPORT in frames[-1]["detail"]
    assert (await job_row()).status == ToolJob.Status.QUEUED
    await socket.send({"type": "cancel"})
    frames = await socket.receive_until("run_finished")
    assert frames[-1]["status"] == "cancelled"
    assert (await job_row()).status == ToolJob.Status.CANCELLED


async def test_stop_leaves_an_approved_job_running_and_its_result_is_kept(
    llm, jobs, sockets, conversation, alice, monkeypatch
):
    jobs.start_worker()
    socket = await sockets(conversation, alice)
    llm.script(Reply(text="Publishing needs your approval.", tool_calls=[(PUBLISH, {"note": "q3"}, CALL)]))
    await socket.send({"type": "message", "content": "Publish the q3 report"})
    [confirm] = of(await socket.receive_until("run_finished"), "confirm_required")
    await socket.send({"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "approve"})
    await socket.receive_until("tool_start")
    await jobs.started()

    await socket.send({"type": "cancel"})
    frames = await socket.receive_until("run_finished")
    assert frames[-1]["status"] == "cancelled"
    assert (await job_row()).status == ToolJob.Status.RUNNING  # approved and started: it is not dropped
    assert await tool_messages(conversation) == []

    jobs.open_gate("q3")
    deadline = time.monotonic() + WAIT
    while (await job_row()).status != ToolJob.Status.SUCCEEDED:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    llm.script(Reply(text="It was published."))
    await socket.close()
    again = await sockets(conversation, alice)
    frames = await again.receive_until("run_finished", timeout=WAIT)

    end = of(frames, "tool_end", tool_call_id=CALL)
    assert len(end) == 1 and end[0]["output"] == (await job_row()).output
    [result] = await tool_messages(conversation)
    assert result.outcome == "done"
    assert frames[-1]["status"] == "completed"
    assert len(jobs.lines("start")) == 1
