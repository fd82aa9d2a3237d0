"""A new message's way in, in the common case, as few and as cheap statements as it allows: the conversation's
state read (together with the user and the history, sql.Reads), then the gate taken with the message, the
answer's row and the audit rows of both stored, all or none of it: one statement on PostgreSQL, one transaction
on SQLite.

Every run's start waits for this, and each process's starts queue on one database thread, so its cost is the
time to first token under load (docs/benchmarks.md). Building a query costs Django's ORM several times what the
database takes to run it: the read and the gate are written here in SQL, over the models' own tables and columns;
the rows go in with one INSERT for each model, built once (sql.insert; on PostgreSQL sql.new_rows, within the
statement that takes the gate). Anything else (a client_id seen before, an archived conversation, decisions to
settle, a gate held or lapsed) is left to the general path, turn_take under run_open, which says so or does it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import NamedTuple

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from .. import selectors
from ..models import AuditEvent, Conversation, Message, PendingConfirmation
from ..sql import Reads, insert, new_rows, param, statement, stored
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
WHERE {Conversation.id} = %s AND {Conversation.active_run_id} IS NULL AND {Conversation.updated_at} = %s
"""
# On PostgreSQL, the gate and the rows that go with it, in one statement: the rows only if the gate was free.
STORE = """
WITH gate AS ({claim} RETURNING 1),
stored AS (INSERT INTO {messages} WHERE EXISTS (SELECT FROM gate) RETURNING {{Message.id}}),
audited AS (INSERT INTO {audits} WHERE EXISTS (SELECT FROM gate))
SELECT {{Message.id}} FROM stored ORDER BY {{Message.id}}
"""
# The first audit row's data (message sent) with the user's message's id, which the statement gives it.
MESSAGE_ID = ((0, "data", "({} || jsonb_build_object('message_id', (SELECT min({Message.id}) FROM stored)))"),)


def state_read(reads: Reads, conversation: Conversation, turn: Turn, user_id) -> Callable[[], Conversation | None]:
    """The conversation as message_intake takes it (STATE), read among `reads`."""
    statuses = [PendingConfirmation.Status.PENDING, *PendingConfirmation.DECIDED]
    params = [turn.client_id, user_id, *statuses, param(Conversation, "id", conversation.pk)]
    found = reads.add(Conversation, statement(STATE), params)
    return lambda: next(iter(found()), None)


def message_intake(
    *, conversation: Conversation, user, turn: Turn, admit: Callable[[], None], fresh: Conversation | None
) -> Intake | None:
    """Take `turn` (a message without attachments) in and open its run, or None, storing nothing, when it is not
    the common case. `fresh` is the conversation as state_read found it: the gate is taken only if nothing has
    changed it since (a run that ended meanwhile moved its `updated_at`), as what was read with it (the history)
    must still hold. `admit` runs before anything is stored (on SQLite once the gate is taken, on PostgreSQL
    before it is tried) and may raise (the budget, the rate limit): nothing is stored then."""
    if fresh is None or fresh.seen is not None or fresh.is_archived or fresh.unsettled or not turn.content.strip():
        return None
    read_at = param(Conversation, "updated_at", fresh.updated_at)
    selectors.refreshed(conversation, fresh)
    now, run_id = timezone.now(), uuid.uuid4()
    title = conversation.title or title_from_text(turn.content)
    stamp = param(Conversation, "updated_at", now)
    key = param(Conversation, "id", conversation.pk)
    claim = [param(Conversation, "active_run_id", run_id), stamp, stamp, title, stamp, key, read_at]
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
    audits = [
        AuditEvent(
            kind=AuditEvent.Kind.MESSAGE_SENT,
            actor=user,
            conversation=conversation,
            data={"client_id": turn.client_id, "length": len(turn.content)},  # and the message's id
        ),
        AuditEvent(
            kind=AuditEvent.Kind.RUN_STARTED, actor=user, conversation=conversation, data={"run_id": str(run_id)}
        ),
    ]
    store = _store_in_one_statement if connection.vendor == "postgresql" else _store_in_a_transaction
    try:
        if not store(claim, [question, answer], audits, admit):
            return None  # the gate is held: the general path says the conversation is busy, or takes it over
    except IntegrityError:
        return None  # the same client_id, stored meanwhile by another socket: the general path echoes it
    conversation.title, conversation.updated_at = title, now
    return Intake(run_id, without_files(question), answer.pk, bool(fresh.has_files))


def _store_in_one_statement(claim: list, messages: list[Message], audits: list[AuditEvent], admit) -> bool:
    """The gate, the messages and their audit rows in one statement (PostgreSQL), all or none of it: a run's start
    waits for one answer of the server instead of five (BEGIN, the gate, two inserts, COMMIT). The rate is counted
    first, so `admit` runs before the gate is known to be free."""
    admit()
    new_messages, message_params = new_rows(messages)
    new_audits, audit_params = new_rows(audits, computed=MESSAGE_ID)
    with connection.cursor() as cursor:
        sql = statement(STORE.format(claim=CLAIM, messages=new_messages, audits=new_audits))
        cursor.execute(sql, [*claim, *message_params, *audit_params])
        keys = [key for (key,) in cursor.fetchall()]
    if not keys:
        return False
    stored(messages, keys)
    return True


def _store_in_a_transaction(claim: list, messages: list[Message], audits: list[AuditEvent], admit) -> bool:
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(statement(CLAIM), claim)
            if cursor.rowcount != 1:
                return False
        admit()
        insert(messages)
        audits[0].data = {"message_id": messages[0].pk, **audits[0].data}
        insert(audits)
    return True
