"""The one-run-at-a-time gate of a conversation: taken, kept alive, released, taken over from a dead run."""

from __future__ import annotations

import uuid
from typing import NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Prefetch, prefetch_related_objects
from django.utils import timezone

from agentchat.agent.calls import ToolOutcome

from .. import selectors
from ..models import Attachment, AuditEvent, Conversation, Message, PendingConfirmation, ToolJob
from ..sql import param, statement
from .audit import audit_record
from .messages import INTERRUPTED, assistant_message_start, dangling_calls_close
from .turns import Turn, turn_take


def conversation_run_claim(*, conversation: Conversation) -> uuid.UUID | None:
    """Take the one-run gate atomically, unless a live run holds it; None when one does.

    Taking it over from a run whose heartbeat lapsed (its process died) tidies what that run left behind.
    """
    run_id = uuid.uuid4()
    now = timezone.now()
    claim = {"active_run_id": run_id, "active_run_since": now, "active_run_heartbeat": now}
    conversations = Conversation.objects.filter(pk=conversation.pk)
    if conversations.filter(active_run_id__isnull=True).update(**claim):
        return run_id
    with transaction.atomic():
        if not conversations.filter(active_run_heartbeat__lt=now - settings.RUN_HEARTBEAT_TIMEOUT).update(**claim):
            return None
        conversation_recover(conversation=conversation)
    return run_id


def conversation_run_heartbeat(*, conversation: Conversation, run_id: uuid.UUID) -> bool:
    """Refresh the holder's heartbeat; False means the gate is no longer ours."""
    return bool(
        Conversation.objects.filter(pk=conversation.pk, active_run_id=run_id).update(
            active_run_heartbeat=timezone.now()
        )
    )


# The gate given back by the run that holds it; written in SQL as every run ends with it (see sql.py).
RELEASE = """
UPDATE {Conversation}
SET {Conversation.active_run_id} = NULL, {Conversation.active_run_since} = NULL,
  {Conversation.active_run_heartbeat} = NULL, {Conversation.updated_at} = %s
WHERE {Conversation.id} = %s AND {Conversation.active_run_id} = %s
"""


def conversation_run_release(*, conversation: Conversation, run_id: uuid.UUID) -> None:
    params = [
        param(Conversation, "updated_at", timezone.now()),
        param(Conversation, "id", conversation.pk),
        param(Conversation, "active_run_id", run_id),
    ]
    with connection.cursor() as cursor:
        cursor.execute(statement(RELEASE), params)


@transaction.atomic
def conversation_recover(*, conversation: Conversation) -> None:
    """What a dead run left behind, tidied by the run that takes its lapsed gate over: its streaming answer
    becomes `interrupted`, its calls get a result. Decided calls are left to the new run, which carries them
    out or tells how they ended before anything else; their background jobs go on, for it to wait for.
    """
    Message.objects.filter(conversation=conversation, status=Message.Status.STREAMING).update(
        status=Message.Status.INTERRUPTED, error=selectors.SERVER_STOPPED
    )
    # Nobody waits for the dead run's other background jobs any more: a queued one need not start.
    ToolJob.objects.filter(conversation=conversation, status__in=ToolJob.OPEN).exclude(
        tool_call_id__in=conversation.confirmations.values("tool_call_id")
    ).update(status=ToolJob.Status.CANCELLED, error=INTERRUPTED, finished_at=timezone.now())
    dangling_calls_close(conversation=conversation, why=ToolOutcome.cancelled(INTERRUPTED))


class OpenedRun(NamedTuple):
    run_id: uuid.UUID | None  # None: another run holds the gate
    created: bool  # False: a message with this client_id was stored before (`message` is that one)
    message: Message | None
    changed: list[Message]  # messages to show anew before the run: settled calls' results, superseded messages


def run_open(*, conversation: Conversation, user, turn: Turn) -> OpenedRun:
    """Take the gate and make the turn's writes (turn_take): for a message, store it after settling what it
    supersedes.

    With the gate held by another run, nothing is stored; `message` is then the message or answer that carries
    this client_id if another tab sent it at the same moment (it is that tab's run). A message seen before gives
    the gate back at once.
    """
    run_id = conversation_run_claim(conversation=conversation)
    if run_id is None:
        return OpenedRun(None, False, selectors.message_with_client_id(conversation, turn.client_id), [])
    try:
        taken = turn_take(conversation=conversation, user=user, turn=turn)
        if taken.message is not None:
            # For the echo, which shows them twice (ids and files): read once, or not at all when a new message
            # has none.
            known_none = taken.created and turn.kind == "message" and not turn.attachments
            prefetch_related_objects(
                [taken.message],
                Prefetch("attachments", queryset=Attachment.objects.none()) if known_none else "attachments",
            )
    except BaseException:
        conversation_run_release(conversation=conversation, run_id=run_id)
        raise
    if not taken.created:
        conversation_run_release(conversation=conversation, run_id=run_id)
    return OpenedRun(run_id, taken.created, taken.message, taken.changed)


def run_begin(
    *,
    conversation: Conversation,
    user,
    run_id: str,
    after_decision: bool = False,
    settled: bool = False,
    client_id: str | None = None,
) -> tuple[list[PendingConfirmation], bool, int | None]:
    """A run's first writes: its audit row, then either the decided calls to carry out first (and whether a
    decision is still awaited) or, when there are none, the answer's row, which exists from the start.

    `settled`: the run's message has just settled every decision (confirmations_supersede), so none is looked for.
    `client_id`: of the frame that asked for this answer (regenerate, continue), kept on the answer's row.
    """
    audit_record(kind=AuditEvent.Kind.RUN_STARTED, actor=user, conversation=conversation, data={"run_id": run_id})
    decided = [] if settled else list(selectors.confirmations_unsettled(conversation))
    waiting = after_decision and selectors.pending_confirmations(conversation).exists()
    if decided or waiting:
        return decided, waiting, None
    return decided, waiting, assistant_message_start(conversation=conversation, run_id=run_id, client_id=client_id).pk
