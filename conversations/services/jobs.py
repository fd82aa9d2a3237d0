"""Slow tools as background jobs: queued with their row, started, beaten, finished, lost, cancelled."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from agentchat.agent.calls import Outcome, ToolOutcome
from agentchat.text import storable

from ..exceptions import AlreadySettled
from ..models import Conversation, PendingConfirmation, ToolJob
from .confirmations import confirmation_claim

WORKER_LOST = "the background worker stopped while running"


@transaction.atomic
def tool_job_enqueue(
    *,
    conversation: Conversation,
    user,
    run_id: str,
    tool,
    tool_call_id: str,
    args: dict,
    claim: PendingConfirmation | None = None,
) -> ToolJob:
    """Store the job and queue it for the worker in one transaction: both or neither, with the decided call's
    claim (`claim`) too, so that a claimed call always has the job that tells how it went."""
    if claim is not None and not confirmation_claim(confirmation=claim):
        raise AlreadySettled(f"The call {tool_call_id} was started by another run.")
    job = ToolJob.objects.create(
        conversation=conversation,
        user=user,
        run_id=run_id,
        tool_call_id=tool_call_id,
        tool_name=tool.name,
        args=args,
        # Running a confirmed call again could repeat what the user approved once.
        max_attempts=1 if tool.requires_confirmation else settings.JOB_MAX_ATTEMPTS,
    )
    _queue(job.pk, job.attempt)
    return job


def _queue(job_id, attempt: int) -> None:
    from ..tasks import run_tool_job  # the task module imports this one

    run_tool_job.enqueue(str(job_id), attempt)


def tool_job_start(*, job_id: str, attempt: int) -> bool:
    """The worker takes the job; False when it was cancelled or another attempt replaced this one."""
    now = timezone.now()
    return bool(
        ToolJob.objects.filter(pk=job_id, status=ToolJob.Status.QUEUED, attempt=attempt).update(
            status=ToolJob.Status.RUNNING, started_at=now, heartbeat_at=now
        )
    )


def tool_job_beat(*, job_id: str, attempt: int) -> bool:
    return bool(
        ToolJob.objects.filter(pk=job_id, status=ToolJob.Status.RUNNING, attempt=attempt).update(
            heartbeat_at=timezone.now()
        )
    )


def tool_job_finish(*, job_id: str, attempt: int, outcome: ToolOutcome) -> bool:
    """Store the outcome, only if this attempt still holds the job (not cancelled, not given up as lost)."""
    return bool(
        ToolJob.objects.filter(pk=job_id, status=ToolJob.Status.RUNNING, attempt=attempt).update(
            status=ToolJob.Status.SUCCEEDED if outcome.ok else ToolJob.Status.FAILED,
            output=storable(outcome.output) if outcome.ok else None,
            error=storable(outcome.error),
            outcome=outcome.outcome,
            finished_at=timezone.now(),
        )
    )


@transaction.atomic
def tool_job_check(*, job_id: str) -> ToolJob:
    """The job as it stands; one whose worker stopped beating is queued again, or failed when out of attempts."""
    job = ToolJob.objects.get(pk=job_id)
    stale_before = timezone.now() - settings.JOB_HEARTBEAT_TIMEOUT
    if job.status != ToolJob.Status.RUNNING or job.heartbeat_at >= stale_before:
        return job
    current = ToolJob.objects.filter(pk=job.pk, status=ToolJob.Status.RUNNING, attempt=job.attempt)
    if job.attempt < job.max_attempts:
        if current.update(status=ToolJob.Status.QUEUED, attempt=F("attempt") + 1, started_at=None, heartbeat_at=None):
            _queue(job.pk, job.attempt + 1)
    else:
        attempts = "once" if job.attempt == 1 else f"{job.attempt} times"
        current.update(
            status=ToolJob.Status.FAILED,
            error=f"{WORKER_LOST} {job.tool_name} (tried {attempts}), so whether it took effect is not known. "
            "Check before trying it again.",
            outcome=Outcome.UNKNOWN,
            finished_at=timezone.now(),
        )
    job.refresh_from_db()
    return job


def tool_job_cancel(*, job_id, only_queued: bool = False) -> bool:
    """A queued job will not start; a running one's outcome is dropped (the tool itself runs on to its end).

    With `only_queued`, a job that has started is left to finish. Returns whether the job was cancelled.
    """
    statuses = [ToolJob.Status.QUEUED] if only_queued else ToolJob.OPEN
    return bool(
        ToolJob.objects.filter(pk=job_id, status__in=statuses).update(
            status=ToolJob.Status.CANCELLED, finished_at=timezone.now()
        )
    )


def job_outcome(job: ToolJob) -> ToolOutcome:
    if job.status == ToolJob.Status.SUCCEEDED:
        return ToolOutcome.done(job.output)
    if job.status == ToolJob.Status.CANCELLED:
        return ToolOutcome.cancelled(job.error or f"{job.tool_name} was cancelled before it started.")
    return ToolOutcome(Outcome(job.outcome or Outcome.ERROR), error=job.error or f"{job.tool_name} failed.")
