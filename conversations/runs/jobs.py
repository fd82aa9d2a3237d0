"""Waiting for a slow tool's background job: its row says how it went, whichever process looks."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from django.utils.translation import gettext as _

from agentchat.agent.calls import ToolOutcome

from .. import services
from ..models import ToolJob
from . import db
from .frames import notice

# How often a run waiting for a background job looks at it, and when it says that no worker has taken it.
JOB_POLL_INTERVAL = 0.5
JOB_WAIT_NOTICE = 10.0


async def wait_for_job(
    job_id, tool_name: str, *, decided: bool, send: Callable[[dict[str, Any]], Awaitable[None]]
) -> ToolOutcome:
    """How the job went, once its row says so; `send` gets the notices for the page meanwhile.

    Stopped meanwhile, the job will not start if it has not; one that started goes on, and for a decided call
    its result is waited for by the next run, for the user approved it and it may be taking effect.
    """
    waited, told, attempt = 0.0, False, 1
    try:
        while True:
            job = await db.check_job(job_id=job_id)
            if job.status in ToolJob.FINISHED:
                return services.job_outcome(job)
            if job.attempt > attempt:
                attempt = job.attempt
                retried = _(
                    "The background worker running %(tool)s stopped; it runs again (attempt %(attempt)s of %(most)s)."
                ) % {"tool": tool_name, "attempt": attempt, "most": job.max_attempts}
                await send(notice("JOB_RETRIED", retried))
            if job.status == ToolJob.Status.QUEUED and waited >= JOB_WAIT_NOTICE and not told:
                told = True
                waiting = _("%(tool)s is waiting for a background worker to take it.") % {"tool": tool_name}
                await send(notice("JOB_WAITING", waiting))
            await asyncio.sleep(JOB_POLL_INTERVAL)
            waited += JOB_POLL_INTERVAL
    except BaseException:
        with contextlib.suppress(*db.DATABASE_UNREACHABLE):
            await asyncio.shield(db.cancel_job(job_id=job_id, only_queued=decided))
        raise
