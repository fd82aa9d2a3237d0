"""Calls that went to their owner for a decision, settled with the truth when they are not carried out now."""

from __future__ import annotations

from enum import StrEnum

from django.db import transaction
from django.utils import timezone

from agentchat.agent.calls import ToolOutcome

from .. import selectors
from ..models import AuditEvent, Conversation, Message, PendingConfirmation, ToolJob
from .audit import audit_record
from .jobs import job_outcome, tool_job_cancel
from .messages import CANCELLED_BY_USER, tool_result_store

NOT_STARTED = "not run: a new message was sent before it started."


class Settle(StrEnum):
    """Why decided calls are being settled without being carried out now."""

    STOPPED = "stopped"  # the user stopped the run
    FAILED = "failed"  # the run failed, or its process died
    NEW_MESSAGE = "new_message"  # a new message comes before them


def decision_outcome(confirmation: PendingConfirmation) -> tuple[ToolOutcome | None, ToolJob | None]:
    """How a decided call that has no result ended, when that can be told without running it (None when it
    never started, or when its background job is still going), and that job if it has one. A call is claimed
    in the same transaction as its job is queued: an unclaimed one has none."""
    if confirmation.status == PendingConfirmation.Status.REJECTED:
        return ToolOutcome.rejected(confirmation.reason), None
    if confirmation.claimed_at is None:
        return None, None
    job = selectors.tool_job_for(confirmation.conversation, confirmation.tool_call_id)
    if job is None:
        return ToolOutcome.unknown(confirmation.tool_name), None
    return (job_outcome(job) if job.status in ToolJob.FINISHED else None), job


def decisions_settle(
    *, conversation: Conversation, why: Settle, run_id: str = "", unsettled: list[PendingConfirmation] | None = None
) -> list[Message]:
    """Store a result for the decided calls that have none and will not be carried out now.

    Said as it is: a rejection; a call that started in this server and has no result "may have run"
    (Outcome.UNKNOWN), never "run it again"; a finished background job's own result. An approved call that
    never started is left for the next run to carry out, unless the user stopped the run or sent a new
    message first; a background job still running is left for the next run to wait for, unless a new
    message comes first. `unsettled`: those calls, when the caller has read them already.
    """
    settled = []
    if unsettled is None:
        unsettled = list(selectors.confirmations_unsettled(conversation))
    for confirmation in unsettled:
        outcome, job = decision_outcome(confirmation)
        if outcome is None and confirmation.claimed_at is None and why != Settle.FAILED:
            outcome = ToolOutcome.cancelled(CANCELLED_BY_USER if why == Settle.STOPPED else NOT_STARTED)
        elif outcome is None and job is not None and why == Settle.NEW_MESSAGE:
            outcome = (
                ToolOutcome.cancelled(NOT_STARTED)
                if tool_job_cancel(job_id=job.pk, only_queued=True)
                else ToolOutcome.unknown(confirmation.tool_name)
            )
        if outcome is None:
            continue
        settled.append(
            tool_result_store(
                conversation=conversation,
                tool_call_id=confirmation.tool_call_id,
                tool_name=confirmation.tool_name,
                outcome=outcome,
                run_id=run_id,
                confirmation=confirmation,
            )
        )
    return settled


def confirmations_supersede(*, conversation: Conversation, actor) -> list[Message]:
    """A new user message: pending decisions lapse, decided calls not carried out are settled, and their tool
    messages (returned) say so, ahead of the new message."""
    now = timezone.now()
    lapsed = []
    open_ones = list(selectors.confirmations_open(conversation))
    pending = [item for item in open_ones if item.status == PendingConfirmation.Status.PENDING]
    for confirmation in pending:
        status = (
            PendingConfirmation.Status.EXPIRED
            if confirmation.expires_at <= now
            else PendingConfirmation.Status.SUPERSEDED
        )
        with transaction.atomic():
            # Conditional, like a decision: whichever of the two lands first wins, the other changes nothing.
            if not PendingConfirmation.objects.filter(
                pk=confirmation.pk, status=PendingConfirmation.Status.PENDING
            ).update(status=status, decided_at=now):
                continue
            expired = status == PendingConfirmation.Status.EXPIRED
            message = tool_result_store(
                conversation=conversation,
                tool_call_id=confirmation.tool_call_id,
                tool_name=confirmation.tool_name,
                outcome=ToolOutcome.cancelled(
                    "not run: "
                    + (
                        "the user did not decide in time."
                        if expired
                        else "the user sent a new message instead of deciding."
                    )
                ),
                run_id="",
            )
            audit_record(
                kind=AuditEvent.Kind.CONFIRMATION_DECIDED,
                actor=actor,
                conversation=conversation,
                data={"confirmation_id": str(confirmation.pk), "tool": confirmation.tool_name, "decision": status},
            )
        lapsed.append(message)
    unsettled = [item for item in open_ones if item.status != PendingConfirmation.Status.PENDING]
    return lapsed + decisions_settle(conversation=conversation, why=Settle.NEW_MESSAGE, unsettled=unsettled)
