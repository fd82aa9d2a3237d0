"""Messages: the user's, the streaming answer's rows, and tool results."""

from __future__ import annotations

import functools
from typing import Any

from django.db import IntegrityError, connection, transaction

from agentchat.agent.calls import ToolOutcome
from agentchat.agent.providers import Usage

from ..exceptions import AlreadySettled
from ..models import Attachment, AuditEvent, Conversation, Message, PendingConfirmation
from ..sql import param, rows, statement
from .audit import audit_record
from .conversations import title_from_text
from .usage import usage_record

CANCELLED_BY_USER = "cancelled by the user"
INTERRUPTED = "not run: the answer was interrupted"


def message_append(
    *,
    conversation: Conversation,
    role: str,
    content: str = "",
    client_id: str | None = None,
    actor=None,
    **fields: Any,
) -> tuple[Message, bool]:
    """Store a message; the same `client_id` twice gives back the first one and `created=False`.

    The unique constraint finds a repeated client_id: callers that expect one look it up first (it is rare).
    """
    try:
        with transaction.atomic():
            message = Message.objects.create(
                conversation=conversation, role=role, content=content, client_id=client_id or None, **fields
            )
            # A person's message moves the conversation up; the rest of a run moves it when the run ends (release).
            if role == Message.Role.USER:
                conversation.title = conversation.title or title_from_text(content)
                conversation.save(update_fields=["title", "updated_at"])
            if role == Message.Role.USER:
                audit_record(
                    kind=AuditEvent.Kind.MESSAGE_SENT,
                    actor=actor,
                    conversation=conversation,
                    data={"message_id": message.pk, "client_id": client_id, "length": len(content)},
                )
    except IntegrityError:
        # The same client_id again, most often from two sockets at the same moment: the first one won.
        if client_id:
            existing = Message.objects.filter(conversation=conversation, client_id=client_id).first()
            if existing:
                return existing, False
        raise
    return message, True


def assistant_message_start(*, conversation: Conversation, run_id: str, client_id: str | None = None) -> Message:
    return Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        status=Message.Status.STREAMING,
        client_id=client_id,
        metadata={"run_id": run_id},
    )


# An answer's final write and the answer as stored, with its conversation's owner, in one statement; a field given
# as NULL is left as it is.
FINAL_WRITE = """
UPDATE {Message} SET {Message.content} = %s, {Message.status} = %s, {Message.error} = %s,
  {Message.tool_calls} = COALESCE(%s, {Message.tool_calls}), {Message.usage} = COALESCE(%s, {Message.usage}),
  {Message.metadata} = COALESCE(%s, {Message.metadata})
WHERE {Message.id} = %s
RETURNING {Message.*}, (SELECT {Conversation.owner} FROM {Conversation}
              WHERE {Conversation}.{Conversation.id} = {Message}.{Message.conversation}) AS owner
"""


def assistant_message_save(
    *,
    message_id: int,
    content: str,
    status: str,
    tool_calls: list | None = None,
    error: str = "",
    usage: Usage | None = None,
    metadata: dict | None = None,
) -> Message:
    """An answer's final write, and the answer as stored, in one statement (every run ends with one, on the database
    thread the starts queue on); its usage, when the provider reported one, is added to its owner's day."""
    optional_fields = (("tool_calls", tool_calls), ("usage", usage), ("metadata", metadata))
    optional = [None if value is None else param(Message, name, value) for name, value in optional_fields]
    saved = rows(Message, statement(FINAL_WRITE), [content, status, error, *optional, message_id])
    if not saved:
        raise Message.DoesNotExist(f"No answer {message_id} to save.")
    [message] = saved
    if usage is not None:
        usage_record(user_id=message.owner, usage=usage)
    return without_files(message)


def without_files(message: Message) -> Message:
    """`message`, known to have no files (an answer, or a question sent without): what shows it does not ask the
    database for them (as prefetch_related fills its cache)."""
    none = Attachment.objects.none()
    none._result_cache, none._prefetch_done = [], True
    message._prefetched_objects_cache = {"attachments": none}
    return message


# The answers flushed in one statement at most: three parameters each, within the 999 Django lets SQLite have.
FLUSH_BATCH = 300


def assistant_messages_flush(*, texts: dict[int, str]) -> None:
    """The text so far of answers still streaming (by message id), in one statement for up to FLUSH_BATCH of them;
    never overwrites an answer's final write."""
    items = list(texts.items())
    with connection.cursor() as cursor:
        for start in range(0, len(items), FLUSH_BATCH):
            batch = items[start : start + FLUSH_BATCH]
            params = [value for pair in batch for value in pair] + [pk for pk, _ in batch]
            cursor.execute(_flush_statement(len(batch)), [*params, Message.Status.STREAMING])


@functools.cache
def _flush_statement(count: int) -> str:
    """The flush of `count` answers (at most FLUSH_BATCH), built once for each count: the ORM's bulk_update builds
    its CASE anew at every flush, for some forty times what the database spends on it (docs/benchmarks.md)."""
    cases = " ".join(["WHEN %s THEN %s"] * count)
    ids = ", ".join(["%s"] * count)
    # Only placeholders are joined in.
    template = "UPDATE {Message} SET {Message.content} = CAST(CASE {Message.id} " + cases + " END AS TEXT) "  # noqa: S608
    return statement(template + f"WHERE {{Message.id}} IN ({ids}) AND {{Message.status}} = %s")


def assistant_message_discard(*, message_id: int) -> None:
    """A placeholder that never got a word or a call is not worth keeping, unless it holds the client_id of the
    frame that asked for it: a repeated frame is then known, and it ends empty."""
    empty = Message.objects.filter(pk=message_id, content="", tool_calls=[])
    if not empty.filter(client_id__isnull=True).delete()[0]:
        empty.update(status=Message.Status.COMPLETE)


def tool_result_store(
    *,
    conversation: Conversation,
    tool_call_id: str,
    tool_name: str,
    outcome: ToolOutcome,
    run_id: str,
    confirmation: PendingConfirmation | None = None,
) -> Message:
    """Store how a call ended; for a decided call, settle its confirmation with it in the same transaction.

    A decided call is settled once: should another result have settled it first, nothing is stored and
    AlreadySettled says so.
    """
    with transaction.atomic():
        message, _ = message_append(
            conversation=conversation,
            role=Message.Role.TOOL,
            content=outcome.content,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            is_error=not outcome.ok,
            outcome=outcome.outcome,
            metadata={"run_id": run_id},
        )
        if confirmation is not None and not (
            PendingConfirmation.objects.filter(pk=confirmation.pk, result__isnull=True).update(result=message)
        ):
            raise AlreadySettled(f"The call {tool_call_id} has its result already.")
    return message


def dangling_calls_close(*, conversation: Conversation, why: ToolOutcome, run_id: str = "") -> list[Message]:
    """Give every call left without a result a tool message saying why, after a cancel or a crash, so the
    history stays well-formed for the next provider call.

    Calls that went to their owner for a decision are left to decisions_settle.
    """
    answered = set(conversation.messages.filter(role=Message.Role.TOOL).values_list("tool_call_id", flat=True))
    gated = set(conversation.confirmations.values_list("tool_call_id", flat=True))
    callers = conversation.messages.filter(role=Message.Role.ASSISTANT, superseded=False).exclude(tool_calls=[])
    return [
        tool_result_store(
            conversation=conversation, tool_call_id=call["id"], tool_name=call["name"], outcome=why, run_id=run_id
        )
        for message in callers
        for call in message.tool_calls
        if call["id"] not in answered and call["id"] not in gated
    ]
