"""A new message's way in, in the common case, as few and as cheap statements as it allows: one read of the
conversation and one transaction that takes the gate, stores the message and the answer's row, and audits both.

Every run's start waits for this, and each process's starts queue on one database thread, so its cost is the
time to first token under load (docs/benchmarks.md). Building a query costs Django's ORM several times what the
database takes to run it: the read and the gate are written here in SQL, over the models' own tables and columns;
the rows go in with one INSERT for each model, built once (sql.insert). Anything else (a client_id seen before, an
archived conversation, decisions to settle, a gate held or lapsed) is left to the general path, turn_take under
run_open, which says so or does it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import NamedTuple

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from .. import selectors
from ..models import AuditEvent, Conversation, Message, PendingConfirmation
from ..sql import insert, param, rows, statement
from .conversations import title_from_text
from .messages import without_files
from .turns import Turn


class Intake(NamedTuple):
    run_id: uuid.UUID
    message: Message  # the user's, as stored, to echo
    answer_id: int  # the answer's row, streaming
    has_files: bool


# What turn_start and confirmations_open read, in one statement: the client_id's message, the user's files, and
# decisions a new message settles (pending ones, and decided calls without a result).
STATE = """
SELECT {Conversation.*},
  (SELECT {Message.id} FROM {Message}
   WHERE {Message.conversation} = {Conversation}.{Conversation.id} AND {Message.client_id} = %s) AS seen,
  EXISTS (SELECT 1 FROM {Attachment}
          WHERE {Attachment.conversation} = {Conversation}.{Conversation.id} AND {Attachment.owner} = %s) AS has_files,
  EXISTS (SELECT 1 FROM {PendingConfirmation}
          WHERE {PendingConfirmation.conversation} = {Conversation}.{Conversation.id}
          AND ({PendingConfirmation.status} = %s
               OR ({PendingConfirmation.status} IN (%s, %s, %s) AND {PendingConfirmation.result} IS NULL))
  ) AS unsettled
FROM {Conversation} WHERE {Conversation.id} = %s
"""
# The gate, taken only when no run holds it; with the title a first message gives and the time it moves to.
CLAIM = """
UPDATE {Conversation}
SET {Conversation.active_run_id} = %s, {Conversation.active_run_since} = %s, {Conversation.active_run_heartbeat} = %s,
  {Conversation.title} = %s, {Conversation.updated_at} = %s
WHERE {Conversation.id} = %s AND {Conversation.active_run_id} IS NULL
"""


def message_intake(*, conversation: Conversation, user, turn: Turn, admit: Callable[[], None]) -> Intake | None:
    """Take `turn` (a message without attachments) in and open its run, or None, storing nothing, when it is not
    the common case. The conversation is read again in place. `admit` runs once the gate is taken and may raise
    (the budget, the rate limit): nothing is stored then."""
    statuses = [PendingConfirmation.Status.PENDING, *PendingConfirmation.DECIDED]
    params = [turn.client_id, user.pk, *statuses, param(Conversation, "id", conversation.pk)]
    fresh = next(iter(rows(Conversation, statement(STATE), params)), None)
    if fresh is None or fresh.seen is not None or fresh.is_archived or fresh.unsettled or not turn.content.strip():
        return None
    selectors.refreshed(conversation, fresh)
    now, run_id = timezone.now(), uuid.uuid4()
    title = conversation.title or title_from_text(turn.content)
    stamp = param(Conversation, "updated_at", now)
    claim = [param(Conversation, "active_run_id", run_id), stamp, stamp, title, stamp, params[-1]]
    question = Message(
        conversation=conversation,
        role=Message.Role.USER,
        content=turn.content,
        client_id=turn.client_id,
        metadata=turn.metadata or {},
    )
    answer = Message(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        status=Message.Status.STREAMING,
        metadata={"run_id": str(run_id)},
    )
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(statement(CLAIM), claim)
                if cursor.rowcount != 1:
                    return None
            admit()
            insert([question, answer])
            insert(
                [
                    AuditEvent(
                        kind=AuditEvent.Kind.MESSAGE_SENT,
                        actor=user,
                        conversation=conversation,
                        data={"message_id": question.pk, "client_id": turn.client_id, "length": len(turn.content)},
                    ),
                    AuditEvent(
                        kind=AuditEvent.Kind.RUN_STARTED,
                        actor=user,
                        conversation=conversation,
                        data={"run_id": str(run_id)},
                    ),
                ]
            )
    except IntegrityError:
        return None  # the same client_id, stored meanwhile by another socket: the general path echoes it
    conversation.title, conversation.updated_at = title, now
    return Intake(run_id, without_files(question), answer.pk, bool(fresh.has_files))
