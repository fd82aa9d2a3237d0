"""The background worker's side of slow tools (`manage.py db_worker --queue-name tools`, started by `make run`).

The run that called the tool waits for the job's row (services.tool_job_check), not for this task's result:
the row is where cancels, retries and a lost worker are settled, whichever process looks.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import DatabaseError, connection
from django_tasks import task

from agentchat.agent.orchestrator import ToolOutcome, call_tool
from tools.registry import ToolArgumentsError, registry

from . import selectors, services
from .models import ToolJob

logger = logging.getLogger(__name__)


@task(queue_name="tools")
def run_tool_job(job_id: str, attempt: int) -> None:
    if not services.tool_job_start(job_id=job_id, attempt=attempt):
        return
    job = ToolJob.objects.select_related("conversation", "user").get(pk=job_id)
    with _heartbeat(job_id, attempt):
        outcome = _run(job)
    output = json.loads(json.dumps(outcome.output, ensure_ascii=False, default=str)) if outcome.ok else None
    services.tool_job_finish(
        job_id=job_id, attempt=attempt, ok=outcome.ok, output=output, error=outcome.error, reason=outcome.reason
    )


def _run(job: ToolJob) -> ToolOutcome:
    """The call as its user would make it now: permission checked again, arguments validated again."""
    tool = registry.get(job.tool_name) if registry.has(job.tool_name) else None
    if tool is None:
        return ToolOutcome.unavailable(job.tool_name)
    ctx = selectors.tool_context(job.conversation, job.user, tool)
    if ctx is None:
        return ToolOutcome.denied(job.tool_name)
    try:
        args = tool.validate(job.args)
    except ToolArgumentsError as exc:
        return ToolOutcome(ok=False, error=str(exc), reason="invalid_arguments")
    return async_to_sync(call_tool)(tool, args, ctx)


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
