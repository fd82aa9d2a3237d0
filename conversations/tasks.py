"""The background worker's side of slow tools (`manage.py db_worker --queue-name tools`, started by `make run`).

The run that called the tool waits for the job's row (services.tool_job_check), not for this task's result:
the row is where cancels, retries and a lost worker are settled, whichever process looks.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.conf import settings
from django.db import DatabaseError, connection
from django_tasks import task
from pydantic import BaseModel

from agentchat.agent.calls import ToolAccess, ToolOutcome, call_tool, carry_out_decided
from tools.registry import Tool, registry

from . import selectors, services
from .models import ToolJob

logger = logging.getLogger(__name__)


@task(queue_name="tools")
def run_tool_job(job_id: str, attempt: int) -> None:
    if not services.tool_job_start(job_id=job_id, attempt=attempt):
        return
    job = ToolJob.objects.select_related("conversation", "user").get(pk=job_id)
    with _heartbeat(job_id, attempt):
        outcome = async_to_sync(_run)(job)
    if outcome.ok:
        outcome = ToolOutcome.done(json.loads(json.dumps(outcome.output, ensure_ascii=False, default=str)))
    services.tool_job_finish(job_id=job_id, attempt=attempt, outcome=outcome)


async def _run(job: ToolJob) -> ToolOutcome:
    """The call as its user may make it now: the same steps as in a run, past the gate it passed there."""
    user = await database_sync_to_async(selectors.user_as_stored)(job.user_id)

    async def execute(tool: Tool, args: BaseModel, call_id: str) -> ToolOutcome:
        ctx = await database_sync_to_async(selectors.tool_context)(job.conversation, user)
        return await call_tool(tool, args, ctx)

    access = ToolAccess(
        lookup=registry.find,
        permitted=database_sync_to_async(functools.partial(selectors.user_may_use, job.user_id)),
        execute=execute,
    )
    return await carry_out_decided(access, job.tool_call_id, job.tool_name, job.args)


@contextmanager
def _heartbeat(job_id: str, attempt: int) -> Iterator[None]:
    """Beat in a thread of its own, so a tool that holds the worker's thread still shows it is alive."""
    stop = threading.Event()
    interval = settings.JOB_HEARTBEAT_TIMEOUT.total_seconds() / 3

    def beat() -> None:
        try:
            while not stop.wait(interval):
                try:
                    services.tool_job_beat(job_id=job_id, attempt=attempt)
                except DatabaseError:
                    logger.warning("could not refresh the heartbeat of job %s; trying again", job_id, exc_info=True)
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"job {job_id} heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
